"""`croupier bench pages`: a healthy run of two fleets in one real Prometheus, restarted midway,
with one server restarted too, counting the alerts that fired (the shipped rules should page 0).

Fleet `leduc`: two leduc servers, a trainer (`--metrics-port`), a routed engine; its production
promoted to the version the trainer reached. Fleet `uno`: two UNO servers with no trainer and
unrecorded games, production its version 0. So the two fleets differ in versions, production
and traffic, as two games do. Prometheus (Debian's `prometheus`, scraping every 15 s with
examples/prometheus/alerts.yml, each target labelled with its fleet as docs/monitoring.md
says) is stopped and started again on the same storage at a third of the run; one leduc server
is stopped and started again on its port at two thirds. At the end, Prometheus's `ALERTS`
series over the whole run: every alert that was pending or firing, and when.

Loopback only; every process is stopped on the way out.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from croupier.local_server import (
    CROUPIER,
    free_port,
    get_json,
    start_serve,
    start_train,
    stop,
    wait_until_up,
)

RULES = Path(__file__).resolve().parents[3] / "examples/prometheus/alerts.yml"
SCRAPE_S = 15


def _prometheus_config(fleets: dict[str, dict[str, Any]], rules: Path) -> str:
    """The scrape config of docs/monitoring.md: one static config per fleet and job."""
    lines = [
        "global:",
        f"  scrape_interval: {SCRAPE_S}s",
        f"  evaluation_interval: {SCRAPE_S}s",
        f"rule_files: [{json.dumps(str(rules))}]",
        "scrape_configs:",
    ]
    for job, key in (("croupier", "servers"), ("croupier-trainer", "trainers")):
        lines += [f"  - job_name: {job}", "    static_configs:"]
        for name, fleet in fleets.items():
            targets = [u.removeprefix("http://") for u in fleet[key]]
            if targets:
                lines += [f"      - targets: {json.dumps(targets)}",
                          f"        labels: {{fleet: {name}}}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _query(prom: str, expr: str, **params: Any) -> Any:
    query = urllib.parse.urlencode({"query": expr, **params})
    path = "query_range" if "step" in params else "query"
    with urllib.request.urlopen(f"{prom}/api/v1/{path}?{query}", timeout=30) as r:  # noqa: S310
        return json.loads(r.read())["data"]["result"]


def _wait_prometheus(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:  # noqa: S310
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("prometheus not ready")


def _answers(url: str) -> bool:
    try:
        get_json(url, timeout=5)
        return True
    except (OSError, ValueError):
        return False


def _until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
        time.sleep(2)


def bench_pages(minutes: float, out_dir: Path, games: int = 16) -> dict[str, Any]:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        raise RuntimeError("prometheus is not installed (make tools: Debian's prometheus)")
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = minutes * 60
    events: list[tuple[float, str]] = []
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="croupier-pages-") as tmp_text:
        tmp = Path(tmp_text)
        log = (tmp / "processes.log").open("wb")
        try:
            link = free_port()
            trainer_metrics = f"http://127.0.0.1:{free_port()}"
            trainer = start_train(
                ["--game", "leduc-holdem", "--listen", f"127.0.0.1:{link}",
                 "--metrics-port", trainer_metrics.rsplit(":", 1)[1],
                 "--checkpoint-dir", str(tmp / "trainer"), "--minutes", str(minutes + 10)],
                stdout=log,
            )  # fmt: skip
            procs.append(trainer)
            servers: dict[str, list[dict[str, Any]]] = {"leduc": [], "uno": []}
            for fleet, game, extra in (
                ("leduc", "leduc-holdem", ["--trainer", f"127.0.0.1:{link}"]),
                ("uno", "uno", []),
            ):
                for i in range(2):
                    port = free_port()
                    args = ["--game", game, "--seats", "learned,rules", "--log-level", "warning",
                            "--data-dir", str(tmp / f"{fleet}-{i}"), *extra]  # fmt: skip
                    proc = start_serve(args, port, stdout=log)
                    procs.append(proc)
                    servers[fleet].append(
                        {
                            "url": f"http://127.0.0.1:{port}",
                            "port": port,
                            "args": args,
                            "proc": proc,
                        }
                    )
            for fleet in servers.values():
                for s in fleet:
                    wait_until_up(s["url"], s["proc"])
            # The run starts healthy: the trainer trains (its /healthz 200) and both leduc
            # servers' links are up (a start on this box takes minutes: not what is measured).
            _until(lambda: _answers(trainer_metrics + "/healthz"), 900, "the trainer healthy")
            _until(
                lambda: all(
                    (get_json(s["url"] + "/healthz").get("trainer_link") or {}).get("connected")
                    for s in servers["leduc"]
                ),
                300,
                "the leduc servers' links up",
            )
            fleets = {
                "leduc": {"servers": [s["url"] for s in servers["leduc"]],
                          "trainers": [trainer_metrics]},
                "uno": {"servers": [s["url"] for s in servers["uno"]], "trainers": []},
            }  # fmt: skip
            config = tmp / "prometheus.yml"
            config.write_text(_prometheus_config(fleets, RULES))
            prom_url = f"http://127.0.0.1:{free_port()}"
            prom_args = [prometheus, f"--config.file={config}",
                         f"--storage.tsdb.path={tmp / 'tsdb'}",
                         f"--web.listen-address={prom_url.removeprefix('http://')}"]  # fmt: skip
            prom = subprocess.Popen(prom_args, stdout=log, stderr=subprocess.STDOUT)
            procs.append(prom)
            _wait_prometheus(prom_url, prom)
            t0 = time.time()
            events.append((0.0, "prometheus, 4 servers, trainer up"))
            engines = []
            for fleet, game, record in (("leduc", "leduc-holdem", []),
                                        ("uno", "uno", ["--record", "false"])):  # fmt: skip
                urls = ",".join(fleets[fleet]["servers"])
                engine = subprocess.Popen(
                    [*CROUPIER, "engine", "--url", urls, "--game", game, "--games", str(games),
                     "--seats", "learned,rules", "--seconds", str(seconds + 60), *record],
                    stdout=log, stderr=subprocess.STDOUT,
                )  # fmt: skip
                procs.append(engine)
                engines.append(engine)
            # Production: leduc's at the first version its trainer pushed, uno's its version 0.
            promoted = {"uno": 0}
            deadline = time.monotonic() + 600
            while "leduc" not in promoted and time.monotonic() < deadline:
                versions = [get_json(u + "/v1/policies")["policies"]["learned"]["latest"]
                            for u in fleets["leduc"]["servers"]]  # fmt: skip
                if min(versions) >= 1:
                    promoted["leduc"] = min(versions)
                time.sleep(2)
            for fleet, version in promoted.items():
                subprocess.run(
                    [*CROUPIER, "promote", "--version", str(version),
                     "--url", ",".join(fleets[fleet]["servers"])],
                    check=True, stdout=log, stderr=subprocess.STDOUT, timeout=120,
                )  # fmt: skip
            events.append((time.time() - t0, f"promoted {promoted}"))
            restarted_prometheus = restarted_server = False
            while time.time() - t0 < seconds:
                now = time.time() - t0
                if not restarted_prometheus and now >= seconds / 3:
                    stop(prom, 60)
                    prom = subprocess.Popen(prom_args, stdout=log, stderr=subprocess.STDOUT)
                    procs.append(prom)
                    _wait_prometheus(prom_url, prom)
                    restarted_prometheus = True
                    events.append((now, "prometheus restarted"))
                if not restarted_server and now >= 2 * seconds / 3:
                    s = servers["leduc"][1]
                    stop(s["proc"], 60)
                    s["proc"] = start_serve(s["args"], s["port"], stdout=log)
                    procs.append(s["proc"])
                    wait_until_up(s["url"], s["proc"])
                    restarted_server = True
                    events.append((time.time() - t0, "leduc server 2 restarted"))
                time.sleep(5)
            end = time.time()
            alerts = _query(prom_url, "ALERTS", start=t0, end=end, step=SCRAPE_S)
            # What the fallback rules read, over the run (a restarted server's since its start).
            served = {
                name: {
                    " ".join((r["metric"].get("fleet", ""), r["metric"].get("instance", ""))):
                    float(r["value"][1])
                    for r in _query(prom_url, f"sum by (fleet, instance) ({metric})", time=end)
                }
                for name, metric in (("decisions", "croupier_decisions_total"),
                                     ("fallbacks", "croupier_fallbacks_total"))
            }  # fmt: skip
            load_average = os.getloadavg()
            engine_codes = [e.poll() for e in engines]
        finally:
            for proc in reversed(procs):
                with contextlib.suppress(Exception):
                    stop(proc, 60)
            log.close()
        log_tail = (tmp / "processes.log").read_bytes()[-4000:].decode(errors="replace")
    fired = []
    for series in alerts:
        times = [float(t) - t0 for t, _ in series["values"]]
        fired.append({"labels": series["metric"], "first_s": min(times), "last_s": max(times),
                      "samples": len(times)})  # fmt: skip
    report = {
        "minutes": minutes,
        "games_per_fleet": games,
        "events": [{"at_s": round(t, 1), "what": w} for t, w in events],
        "pages": sum(
            1
            for f in fired
            if f["labels"].get("alertstate") == "firing" and f["labels"].get("severity") == "page"
        ),  # fmt: skip
        "tickets": sum(
            1
            for f in fired
            if f["labels"].get("alertstate") == "firing" and f["labels"].get("severity") == "ticket"
        ),  # fmt: skip
        "alerts": fired,
        "served": served,
        "load_average_at_end": {
            "1m": load_average[0],
            "5m": load_average[1],
            "15m": load_average[2],
        },  # fmt: skip
        "engines_still_running_at_end": [c is None for c in engine_codes],
        "log_tail": log_tail if fired else "",
    }
    (out_dir / "pages.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "log_tail"}, indent=2))
    return report
