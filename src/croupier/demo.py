"""`make demo`: trainer + policy server + reference engine on this machine, then the proof.

1. `croupier train` and `croupier serve --trainer` start as processes; the reference engine runs
   here, keeping `--games` leduc-holdem tables going through the HTTP API (learned vs rules).
2. A live line shows iteration, env steps/s, version, ingest lag and the learned seats' recent
   payoff against the rules.
3. When training ends, the final version plays the rules over HTTP (`frozen@<version>` seats,
   not recorded) and `runs/<timestamp>/report.json` and `learning_curve.png` are written.

Why ~430 lines in one module: the demo is one job read in order (start, train, play, report);
split, a newcomer would chase one run through several files."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from croupier.engine.runner import EngineSummary, run_engine
from croupier.local_server import (
    free_port,
    get_json,
    start_serve,
    start_train,
    wait_until_up,
)
from croupier.stats import Z95, Mean
from croupier.trainer.progress import PROGRESS, last_progress


class CurveRecorder:
    """The learned seats' payoff over each progress window (from the engine's running sums)."""

    def __init__(self, policy: str = "learned"):
        self.policy = policy
        self.points: list[dict[str, Any]] = []
        self._seen = Mean()
        self.t0 = time.monotonic()

    def window(self, summary: EngineSummary, trainer: dict[str, Any] | None) -> dict[str, Any]:
        stats = summary.policies.get(self.policy)
        # The engine's running summary (count, mean, 95% CI) back to Welford's statistics:
        # the window's own mean and CI are what it adds to the last one.
        now = Mean()
        if stats:
            now = Mean.of(stats.n, stats.mean, stats.ci95 * math.sqrt(stats.n) / Z95)
        window = now.since(self._seen)
        point = {
            "seconds": time.monotonic() - self.t0,
            "hands": now.n,
            "payoff": window.mean if window.n else None,
            "ci95": window.to_dict()["ci95"],
            "window_hands": window.n,
            "version": trainer["version"] if trainer else 0,
            "env_steps": trainer["env_steps"] if trainer else 0,
        }
        self._seen = now
        if window.n:
            self.points.append(point)
        return point


def window_means(curve: list[dict[str, Any]], width_s: float) -> list[dict[str, Any]]:
    """The training hands' payoff per hand, pooled into windows of `width_s` seconds, each
    with its 95% CI (from the points' own: `CurveRecorder`)."""
    bins: dict[int, Mean] = {}
    for p in curve:
        if p["payoff"] is None or not p["window_hands"]:
            continue
        ci = p.get("ci95") or 0.0
        std = ci * math.sqrt(p["window_hands"]) / Z95
        bins.setdefault(int(p["seconds"] // width_s), Mean()).merge(
            Mean.of(p["window_hands"], p["payoff"], std)
        )
    return [
        {
            "from_s": b * width_s,
            "to_s": (b + 1) * width_s,
            "hands": m.n,
            "payoff": m.mean,
            "ci95": m.to_dict()["ci95"],
        }  # fmt: skip
        for b, m in sorted(bins.items())
        if m.n
    ]


def plot_curve(points: list[dict[str, Any]], final: dict[str, Any], path: Path, game: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["seconds"] / 60 for p in points if p["payoff"] is not None]
    ys = [p["payoff"] for p in points if p["payoff"] is not None]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(xs, ys, lw=1.2, label="learned vs rules, recent hands (training, sampled)")
    if game == "leduc-holdem":
        ax.axhline(1.133, ls="--", c="gray", lw=1, label="best response to the rules (+1.133)")
    ax.axhline(0, c="black", lw=0.5)
    if final:
        ax.errorbar(
            [xs[-1] if xs else 0],
            [final["mean"]],
            yerr=[final["ci95"]],
            fmt="o",
            c="red",
            label=f"final version vs rules, {final['n']} hands: {final['mean']:+.3f}",
        )
    ax.set_xlabel("minutes")
    ax.set_ylabel("payoff per hand")
    ax.set_title(f"croupier: {game}, learned policy against RLCard's rules")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@dataclass
class ExternalRun:
    """One run of the whole external path: trainer + server processes, engine here."""

    game: str = "leduc-holdem"
    minutes: float = 5.0
    algo: str | None = None  # None: the game's preset, else DEFAULT_ALGO (`croupier train`'s)
    tables: int = 128
    eval_hands: int = 10_000
    run_dir: Path = Path("runs/demo")
    train_args: list[str] = field(default_factory=list)
    server_args: list[str] = field(default_factory=list)
    quiet: bool = False
    # Policy servers, the engine's games routed over them by id. Server i connects to the
    # trainer's link port + `link_port_offsets[i]` (remote env runner j listens on port + j);
    # None: all on the port itself (the driver's link).
    servers: int = 1
    link_port_offsets: list[int] | None = None
    # The trainer's extra environment (e.g. a Ray cluster's token: `LocalRayCluster.env`).
    trainer_env: dict[str, str] = field(default_factory=dict)
    # Play only once every server's link is up (a trainer on a cluster takes a minute or more
    # to build): `minutes` is then training time for every setup compared (bench cluster).
    wait_for_trainer: bool = False
    # ... and until the servers serve at least this version (1: a rules-anchored trainer's
    # clone), so that no hand is played by the untrained model.
    min_version: int = 0
    # A trainer outage: SIGKILLed `outage_at_s` after the start, started again (same checkpoint
    # dir, the remaining minutes) `outage_s` later, while the games go on (bench outage).
    outage_at_s: float | None = None
    outage_s: float = 60.0
    # The servers' HTTP ports (one per server), e.g. for a scraper that must know its targets
    # before the run; None: free ports.
    http_ports: list[int] | None = None
    # The training games' seats, rotated every hand (`league` for a league run: its opponent
    # drawn per game by the server, `--league-sampling` in `server_args`).
    seats: list[str] = field(default_factory=lambda: ["learned", "rules"])


class TrainerProcess:
    """`croupier train` for a run; `outage()` kills it and starts it again after a pause."""

    def __init__(self, run: ExternalRun, link_port: int, env: dict[str, str]):
        self.run, self.link_port, self.env = run, link_port, env
        self.started = time.monotonic()
        self.restarted_at: float | None = None
        self.proc = self._start(run.minutes)

    def _start(self, minutes: float) -> subprocess.Popen:
        run = self.run
        return start_train(
            ["--game", run.game, *(["--algo", run.algo] if run.algo else []),
             "--listen", f"127.0.0.1:{self.link_port}", "--minutes", f"{minutes:.3f}",
             "--checkpoint-dir", str(run.run_dir / "trainer"), *run.train_args],
            stdout=(run.run_dir / "trainer.log").open("a"),
            env={**self.env, **run.trainer_env},
        )  # fmt: skip

    def outage(self, stop: threading.Event) -> None:
        """Kill the trainer at `outage_at_s`, start it again `outage_s` later (a thread)."""
        run = self.run
        assert run.outage_at_s is not None
        if stop.wait(run.outage_at_s) or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL)  # a crash: no checkpoint on the way out
        self.proc.wait()
        if stop.wait(run.outage_s):
            return
        left_min = run.minutes - (time.monotonic() - self.started) / 60
        self.restarted_at = time.monotonic() - self.started
        self.proc = self._start(max(left_min, 0.5))


TRAINER_BUILD_TIMEOUT_S = 600.0


def wait_for_links(
    urls: list[str], proc: subprocess.Popen, log_path: Path, timeout_s: float, min_version: int = 0
) -> None:
    """Until every server's trainer link is connected and it serves at least `min_version`
    (1: a rules-anchored trainer's clone, pushed at connect); RuntimeError if the trainer
    exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the trainer exited with {proc.returncode} before its link opened: see {log_path}"
            )
        health = [get_json(u + "/healthz") for u in urls]
        if all(
            (h.get("trainer_link") or {}).get("connected")
            and (h.get("version") or 0) >= min_version
            for h in health
        ):
            return
        time.sleep(1.0)
    raise TimeoutError(f"the servers' trainer links not up after {timeout_s:.0f} s")


def _suffix(i: int) -> str:
    return f"-{i}" if i else ""


def run_external(run: ExternalRun) -> dict[str, Any]:
    """Train for `run.minutes` while the engine plays learned vs rules through HTTP, then
    evaluate the final version against the rules (`frozen@<version>`, not recorded). The
    minutes count from the trainer's first served version (`wait_for_trainer`) or from the
    servers being up; what came before is `setup_s` in the report."""
    entered = time.monotonic()
    run_dir = run.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    link_port = free_port()
    http_ports = run.http_ports or [free_port() for _ in range(run.servers)]
    urls = [f"http://127.0.0.1:{port}" for port in http_ports]
    url = urls[0]  # where the final version is evaluated
    offsets = run.link_port_offsets or [0] * run.servers
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    say = (lambda *a, **k: None) if run.quiet else print
    trainer = TrainerProcess(run, link_port, env)
    stop_outage = threading.Event()
    outage = threading.Thread(target=trainer.outage, args=(stop_outage,), daemon=True)
    if run.outage_at_s is not None:
        outage.start()
    # Server 0 keeps the one-server names (weights/, server/, server.log); server i > 0 has
    # its own, suffixed -i.
    servers = [
        start_serve(
            [
                "--game",
                run.game,
                "--seats",
                ",".join(run.seats),
                "--trainer",
                f"127.0.0.1:{link_port + offsets[i]}",
                "--weights-dir",
                str(run_dir / f"weights{_suffix(i)}"),
                "--data-dir",
                str(run_dir / f"server{_suffix(i)}"),
                "--arena-results",
                str(run_dir / "arena.jsonl"),
                *run.server_args,
            ],
            port,
            stdout=(run_dir / f"server{_suffix(i)}.log").open("w"),
            env=env,
        )  # fmt: skip
        for i, port in enumerate(http_ports)
    ]
    try:
        for server_url, server in zip(urls, servers, strict=True):
            wait_until_up(server_url, server)
        if run.wait_for_trainer:
            wait_for_links(urls, trainer.proc, run_dir / "trainer.log", TRAINER_BUILD_TIMEOUT_S,
                           run.min_version)  # fmt: skip
        say(f"  dashboard: {url}/dashboard   metrics: {url}/metrics", flush=True)
        started = time.monotonic()
        setup_s = started - entered
        curve = CurveRecorder()
        progress_file = run_dir / "trainer" / PROGRESS

        def show(summary: EngineSummary) -> None:
            p = last_progress(progress_file)
            w = curve.window(summary, p)
            if p is None:
                # Already served: the clone (version 1) on a rules-anchored start; what is
                # awaited is the first update, not the trainer itself.
                say(f"  waiting for the first training iteration... {summary.hands} hands "
                    "played", flush=True)  # fmt: skip
                return
            payoff = "   n/a" if w["payoff"] is None else f"{w['payoff']:+.3f}"
            say(
                f"  {w['seconds']:5.0f}s  iter {p['iteration']:4d}  "
                f"{p['env_steps_per_s']:6.0f} steps/s  version {p['version']:4d}  "
                f"lag p50/p90 {p['lag']['p50']:.0f}/{p['lag']['p90']:.0f}  "
                f"learned vs rules {payoff}  ({summary.decisions_per_s:,.0f} decisions/s)",
                flush=True,
            )

        play_s = max(10.0, run.minutes * 60 - (time.monotonic() - started))
        training = uvloop.run(
            run_engine(",".join(urls), run.game, run.tables, run.seats, None,
                       play_s, progress=show, batch=True)
        )  # fmt: skip
        if run.outage_at_s is not None:
            outage.join(run.outage_at_s + run.outage_s + 60)  # the trainer is back
            # The restarted trainer would outlive the games by its start-up time, training
            # on what is left of the backlog alone: stop it with the games, so the policies
            # compared saw the same traffic.
            trainer.proc.send_signal(signal.SIGTERM)
        if trainer.proc.wait(timeout=600) != 0:
            # e.g. Ray failing to start on an overloaded machine: an untrained policy's
            # evaluation must not pass for a result.
            log_tail = (run_dir / "trainer.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the trainer exited with {trainer.proc.returncode}:\n{log_tail}")
        time.sleep(2.0)  # the final push reaches the server
        server_versions = [get_json(u + "/v1/policies")["policies"]["learned"]["latest"]
                           for u in urls]  # fmt: skip
        version = server_versions[0]
        say(f"training done; evaluating version {version} against the rules "
            f"over {run.eval_hands} hands...", flush=True)  # fmt: skip
        final = uvloop.run(
            run_engine(url, run.game, run.tables, [f"frozen@{version}", "rules"],
                       run.eval_hands, None, batch=True)
        )  # fmt: skip
    finally:
        stop_outage.set()
        for proc in (*servers, trainer.proc):
            if proc.poll() is None:
                proc.terminate()
        for proc in (*servers, trainer.proc):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    stats = final.policies[f"frozen@{version}"]
    result = {"n": stats.n, "mean": stats.mean, "ci95": stats.ci95}
    # The final evaluation as an arena result (docs/monitoring.md): a restarted server with
    # `--arena-results <run>/arena.jsonl` shows it on /dashboard's learning curve.
    arena = {"version": version, "payoff": stats.mean, "ci95": stats.ci95, "hands": stats.n,
             "opponent": "rules", "time": time.time()}  # fmt: skip
    with (run_dir / "arena.jsonl").open("a") as f:
        f.write(json.dumps(arena) + "\n")
    report = {
        "game": run.game,
        "algo": run.algo,
        "minutes": run.minutes,
        "setup_s": round(setup_s, 1),
        "tables": run.tables,
        "final_version": version,
        "final_vs_rules": result,
        "beats_rules": stats.mean - stats.ci95 > 0,
        "training_engine": training.to_dict(),
        "eval_engine": final.to_dict(),
        "trainer_last": last_progress(progress_file),
        "trainer_restarted_at_s": trainer.restarted_at,
        "curve": curve.points,
    }
    if run.servers > 1:
        report["server_urls"], report["server_versions"] = urls, server_versions
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
    plot_curve(curve.points, result, run_dir / "learning_curve.png", run.game)
    report["eval_table"] = final.format_table()
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("DEMO_MINUTES", 5)))
    ap.add_argument("--game", default="leduc-holdem")
    ap.add_argument("--games", type=int, default=128, help="concurrent tables")
    ap.add_argument(
        "--algo",
        default=None,
        help="ppo or appo (default: the game's preset, else ppo: it learned fastest here)",
    )
    ap.add_argument("--eval-hands", type=int, default=10_000)
    ap.add_argument("--runs-dir", type=Path, default=Path("runs"))
    ap.add_argument(
        "--no-rules-anchor",
        action="store_true",
        help="start the learner untrained (default: from the rules' clone, as croupier train)",
    )
    ap.add_argument(
        "--keep-every",
        type=int,
        default=0,
        help="keep one version per N version numbers on disk (the server's "
        "--weights-keep-every): a version history, e.g. for croupier bench tiers",
    )
    args = ap.parse_args(argv)
    run = ExternalRun(
        game=args.game,
        minutes=args.minutes,
        algo=args.algo,
        tables=args.games,
        eval_hands=args.eval_hands,
        run_dir=args.runs_dir / time.strftime("%Y%m%d-%H%M%S"),
        train_args=["--no-rules-anchor"] if args.no_rules_anchor else [],
        server_args=["--weights-keep-every", str(args.keep_every)] if args.keep_every else [],
        # Play once the trainer serves its first version: from the first hand, the rules'
        # clone (distilled before the trainer's link opens), not the untrained model.
        wait_for_trainer=True,
        min_version=0 if args.no_rules_anchor else 1,
    )
    algo = run.algo or "the game's default algorithm"
    print(f"croupier demo: {run.game}, {run.tables} tables, {run.minutes:g} min of training "
          f"({algo}); logs in {run.run_dir}/", flush=True)  # fmt: skip
    report = run_external(run)
    final = report["final_vs_rules"]
    print(report["eval_table"])
    best = " (leduc's best response to the rules: +1.133)" if run.game == "leduc-holdem" else ""
    print(f"final version {report['final_version']} vs rules: {final['mean']:+.3f} ± "
          f"{final['ci95']:.3f} per hand{best}; report: {run.run_dir / 'report.json'}, "
          f"curve: {run.run_dir / 'learning_curve.png'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
