"""`croupier bench overload`: the games outpacing the learner, measured.

The whole external path (as `make demo`: trainer + server processes, the reference engine's
tables here) runs twice for the same minutes and the same small PPO learner: once with the
learner slowed on purpose (`croupier train --update-sleep S`: a pause after each update, so
the games outpace it by a chosen factor without a bigger machine), once at full speed (the
baseline). Reported per run: env steps offered (received) and trained per second and their
ratio, what was dropped and why (`steps_dropped_stale`: waited past `--max-sample-lag`
versions; `steps_dropped_backlog`: past the memory bound), what waited, the servers' spool,
the alerts of `examples/prometheus/alerts.yml` that fired or were pending (a real Prometheus
scraping the run's processes every 5 s with those rules, when the `prometheus` binary is
installed: `make tools`), and the final version's strength against the rules.

Why a small learner (train batch 250, `--max-sample-batches` 2: 500 env steps an update): the
staleness bound counts versions, so drops begin once 32 updates passed over a waiting episode;
with PPO's default 4,000-step batches and a learner slowed to a third of the games that takes
tens of minutes (and the memory bound, 262,144 steps, as long). With 500 steps an update it
takes ~1.5 minutes, so a few minutes show the steady state: the newest data trained, the
oldest dropped and counted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external
from croupier.local_server import free_port
from croupier.trainer.progress import PROGRESS

# The learner both runs share (see the module doc); the slowed run adds --update-sleep.
LEARNER = ["--algo", "ppo", "--train-batch-size", "250", "--minibatch-size", "250"]
SCRAPE_S = 5.0


class LocalPrometheus:
    """Prometheus on this machine, scraping the run's servers (job `croupier`) and trainer
    (job `croupier-trainer`) every `SCRAPE_S` with the shipped rules, evaluated as often."""

    def __init__(self, run_dir: Path, servers: list[str], trainer: str, rules: Path):
        self.dir, self.port = run_dir / "prometheus", free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {
                "scrape_interval": f"{SCRAPE_S:g}s",
                "evaluation_interval": f"{SCRAPE_S:g}s",
            },
            "rule_files": [str(rules.resolve())],
            "scrape_configs": [
                {"job_name": "croupier", "static_configs": [{"targets": servers}]},
                {"job_name": "croupier-trainer", "static_configs": [{"targets": [trainer]}]},
            ],
        }
        (self.dir / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> LocalPrometheus:
        self.proc = subprocess.Popen(
            [
                str(shutil.which("prometheus")),
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=(self.dir / "prometheus.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # bounded: up in ~1 s
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: see {self.dir / 'prometheus.log'}")
            try:
                if httpx.get(self.url + "/-/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError("prometheus not ready after 60 s")

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def query(self, expr: str) -> float | None:
        body = httpx.get(self.url + "/api/v1/query", params={"query": expr}, timeout=10).json()
        result = body.get("data", {}).get("result") or []
        return float(result[0]["value"][1]) if result else None

    def alerts(self, since: float, until: float) -> dict[str, dict[str, Any]]:
        """Every alert pending or firing between `since` and `until` (Unix times): when each
        state was first seen (seconds after `since`) and its labels. Pending: its condition
        held, its `for:` had not yet passed by `until`. Read from two scrape intervals after
        `since` on: what was pending at `since` (a trainer that had just become healthy,
        before its next scrape) belongs to the start-up."""
        params = {
            "query": "ALERTS",
            "start": since + 2 * SCRAPE_S,
            "end": until,
            "step": f"{SCRAPE_S:g}s",
        }
        body = httpx.get(self.url + "/api/v1/query_range", params=params, timeout=30).json()
        seen: dict[str, dict[str, Any]] = {}
        for series in body.get("data", {}).get("result") or []:
            labels = dict(series["metric"])
            name, state = labels.pop("alertname"), labels.pop("alertstate")
            labels.pop("__name__", None)
            first = min(float(t) for t, _ in series["values"]) - since
            entry = seen.setdefault(name, {"labels": []})
            key = f"first_{state}_s"
            entry[key] = round(min(entry.get(key, first), first), 1)
            if labels not in entry["labels"]:
                entry["labels"].append(labels)
        for entry in seen.values():
            entry["state"] = "firing" if "first_firing_s" in entry else "pending"
        return seen


def _timeline(progress_file: Path) -> list[dict[str, Any]]:
    """The trainer's progress lines, reduced to what this bench plots."""
    keys = ("time", "version", "steps_received", "steps_sampled", "steps_dropped_stale",
            "steps_dropped_backlog", "waiting_steps", "trained_share")  # fmt: skip
    lines = progress_file.read_text().splitlines() if progress_file.exists() else []
    return [{k: p.get(k) for k in keys} for p in map(json.loads, lines)]


def _rates(timeline: list[dict[str, Any]]) -> dict[str, float | None]:
    """Env steps received and handed to the learner per second, first to last iteration."""
    if len(timeline) < 2:
        return {"offered_steps_per_s": None, "trained_steps_per_s": None, "ratio": None}
    a, b = timeline[0], timeline[-1]
    dt = b["time"] - a["time"]
    offered = (b["steps_received"] - a["steps_received"]) / dt
    trained = (b["steps_sampled"] - a["steps_sampled"]) / dt
    return {
        "offered_steps_per_s": offered,
        "trained_steps_per_s": trained,
        "ratio": offered / trained if trained else None,
    }


def _one_run(
    name: str,
    game: str,
    minutes: float,
    tables: int,
    update_sleep_s: float,
    eval_hands: int,
    run_dir: Path,
    rules: Path,
) -> dict[str, Any]:
    server_port, metrics_port = free_port(), free_port()
    train_args = [*LEARNER, "--metrics-port", str(metrics_port)]
    if update_sleep_s > 0:
        train_args += ["--update-sleep", str(update_sleep_s)]
    run = ExternalRun(
        game=game, minutes=minutes, tables=tables, eval_hands=eval_hands, run_dir=run_dir,
        train_args=train_args, quiet=True, wait_for_trainer=True, http_ports=[server_port],
    )  # fmt: skip
    prometheus = None
    if shutil.which("prometheus") and rules.exists():
        prometheus = LocalPrometheus(
            run_dir, [f"127.0.0.1:{server_port}"], f"127.0.0.1:{metrics_port}", rules
        )
    alerts: Any = "not evaluated: install prometheus (`make tools`) to see them"
    spool_max = spool_dropped = None
    timeline: list[dict[str, Any]] = []
    if prometheus is not None:
        with prometheus:
            report = run_external(run)
            timeline = _timeline(run_dir / "trainer" / PROGRESS)
            # From the first update to the last: the processes' start-up (a trainer building
            # for a minute) and the end (the trainer stops, then the final evaluation) are
            # what every start and stop looks like, not overload.
            if timeline:
                alerts = prometheus.alerts(timeline[0]["time"], timeline[-1]["time"])
            spool_max = prometheus.query("max_over_time(croupier_episodes_spooled[1h])")
            spool_dropped = prometheus.query("max_over_time(croupier_episodes_dropped_total[1h])")
    else:
        report = run_external(run)
        timeline = _timeline(run_dir / "trainer" / PROGRESS)
    last = report["trainer_last"] or {}
    return {
        "run": name,
        "update_sleep_s": update_sleep_s,
        "train_args": train_args,
        **_rates(timeline),
        "versions": report["final_version"],
        **{k: last.get(k) for k in (
            "steps_received", "steps_sampled", "steps_dropped_stale", "steps_dropped_backlog",
            "episodes_received", "episodes_sampled", "episodes_dropped_stale",
            "episodes_dropped_backlog", "episodes_dropped_lag", "trained_share",
            "waiting_steps", "unacked_episodes")},
        "waiting_steps_max": max((p["waiting_steps"] or 0 for p in timeline), default=None),
        "lag": last.get("lag_lifetime"),
        "server_spooled_max": spool_max,
        # Deleted from a full spool (`--spool-max-episodes`): the trainer may still hold and
        # train some of them (acknowledged means trained, not the reverse).
        "server_spool_dropped": spool_dropped,
        "alerts": alerts,
        "final_vs_rules": report["final_vs_rules"],
        "hands_played": report["training_engine"].get("hands"),
        "timeline": timeline,
    }  # fmt: skip


def bench_overload(
    game: str,
    minutes: float,
    tables: int,
    update_sleep_s: float,
    out_dir: Path,
    eval_hands: int = 5000,
    baseline: bool = True,
    rules: Path = Path("examples/prometheus/alerts.yml"),
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    plan = [("slowed", update_sleep_s)] + ([("full-speed", 0.0)] if baseline else [])
    runs = []
    for name, sleep_s in plan:
        print(f"{name} learner (--update-sleep {sleep_s:g}): {minutes:g} min, {tables} tables...",
              flush=True)  # fmt: skip
        try:
            run = _one_run(name, game, minutes, tables, sleep_s, eval_hands,
                           out_dir / f"overload-{stamp}" / name, rules)  # fmt: skip
        except RuntimeError as e:  # e.g. Ray failing to start on a saturated machine
            print(f"  FAILED, left out: {e}", flush=True)
            continue
        runs.append(run)
        print(format_run(run), flush=True)
    result = {
        "game": game,
        "minutes": minutes,
        "tables": tables,
        "eval_hands": eval_hands,
        "date": time.strftime("%Y-%m-%d"),
        "runs": runs,
    }
    (out_dir / "overload.json").write_text(json.dumps(result, indent=2, default=float))
    if runs:
        plot(result, out_dir / "overload.png")
    return result


def format_run(run: dict[str, Any]) -> str:
    f, ratio = run["final_vs_rules"], run["ratio"]
    alerts = run["alerts"]
    if isinstance(alerts, dict):
        alerts = ", ".join(f"{k} ({v['state']})" for k, v in sorted(alerts.items())) or "none"
    return (
        f"  {run['run']}: offered {run['offered_steps_per_s'] or 0:.0f} env steps/s, trained "
        f"{run['trained_steps_per_s'] or 0:.0f}/s (games at {ratio or 0:.1f}x the learner); "
        f"trained share {run['trained_share']}; dropped stale {run['steps_dropped_stale']} "
        f"steps, past the memory bound {run['steps_dropped_backlog']}; waiting at most "
        f"{run['waiting_steps_max']} steps; server spool at most {run['server_spooled_max']} "
        f"episodes ({run['server_spool_dropped']} deleted past its bound); "
        f"version {run['versions']}, {f['mean']:+.3f} ± {f['ci95']:.3f} per hand vs rules\n"
        f"  alerts: {alerts}"
    )


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (steps, waiting) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run, style in zip(result["runs"], ("-", "--"), strict=False):
        tl = run["timeline"]
        if not tl:
            continue
        t0 = tl[0]["time"]
        xs = [(p["time"] - t0) / 60 for p in tl]
        f = run["final_vs_rules"]
        tag = f"{run['run']} ({f['mean']:+.2f} vs rules)"
        for key, color in (("steps_received", "C0"), ("steps_sampled", "C2"),
                           ("steps_dropped_stale", "C3")):  # fmt: skip
            base = tl[0][key] or 0
            steps.plot(xs, [(p[key] or 0) - base for p in tl], style, c=color,
                       label=f"{key.removeprefix('steps_')}: {tag}")  # fmt: skip
        waiting.plot(xs, [p["waiting_steps"] or 0 for p in tl], style, c="C1",
                     label=f"{run['run']}: ratio {run['ratio'] or 0:.1f}x")  # fmt: skip
    steps.set_xlabel("minutes (from the first update)")
    steps.set_ylabel("env steps")
    steps.set_title(f"{result['game']}: received, trained, dropped as stale")
    steps.legend(fontsize=7)
    waiting.set_xlabel("minutes (from the first update)")
    waiting.set_ylabel("env steps waiting for the learner")
    waiting.set_title("the trainer's queue")
    waiting.legend(fontsize=8)
    save(fig, path)
