"""`make demo`: trainer + policy server + reference engine on this machine, then the proof.

1. `croupier train` and `croupier serve --trainer` start as processes; the reference engine runs
   here, keeping `--games` leduc-holdem tables going through the HTTP API (learned vs rules).
2. A live line shows iteration, env steps/s, version, ingest lag and the learned seats' recent
   payoff against the rules.
3. When training ends, the final version plays the rules over HTTP (`frozen@<version>` seats,
   not recorded) and `runs/<timestamp>/report.json` and `learning_curve.png` are written.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import uvloop

from croupier.engine.runner import EngineSummary, run_engine

READY_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
        return json.loads(r.read())


def wait_until_up(url: str, proc: subprocess.Popen, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[2:4]} exited with {proc.returncode}")
        try:
            get_json(url + "/healthz", timeout=1.0)
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not come up in {timeout:.0f} s")


def last_progress(path: Path) -> dict[str, Any] | None:
    try:
        lines = path.read_text().strip().splitlines()
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None


class CurveRecorder:
    """The learned seats' payoff over each progress window (from the engine's running sums)."""

    def __init__(self, policy: str = "learned"):
        self.policy = policy
        self.points: list[dict[str, Any]] = []
        self._n = 0
        self._sum = 0.0
        self.t0 = time.monotonic()

    def window(self, summary: EngineSummary, trainer: dict[str, Any] | None) -> dict[str, Any]:
        stats = summary.policies.get(self.policy)
        n, total = (stats.n, stats.n * stats.mean) if stats else (0, 0.0)
        dn = n - self._n
        point = {
            "seconds": time.monotonic() - self.t0,
            "hands": n,
            "payoff": (total - self._sum) / dn if dn else None,
            "window_hands": dn,
            "version": trainer["version"] if trainer else 0,
            "env_steps": trainer["env_steps"] if trainer else 0,
        }
        self._n, self._sum = n, total
        if dn:
            self.points.append(point)
        return point


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("DEMO_MINUTES", 5)))
    ap.add_argument("--game", default="leduc-holdem")
    ap.add_argument("--games", type=int, default=128, help="concurrent tables")
    ap.add_argument("--algo", default="ppo", help="ppo (learned fastest here) or appo")
    ap.add_argument("--eval-hands", type=int, default=10_000)
    ap.add_argument("--runs-dir", type=Path, default=Path("runs"))
    args = ap.parse_args(argv)

    run_dir = args.runs_dir / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    link_port, http_port = free_port(), free_port()
    url = f"http://127.0.0.1:{http_port}"
    exe = [sys.executable, "-m", "croupier"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    print(
        f"croupier demo: {args.game}, {args.games} tables, {args.minutes:g} min of training "
        f"({args.algo}); logs in {run_dir}/",
        flush=True,
    )

    train_args = ["--algo", args.algo, "--checkpoint-dir", str(run_dir / "trainer")]
    if args.algo == "ppo":
        train_args += ["--train-batch-size", "4000", "--minibatch-size", "500", "--lr", "5e-4"]
    trainer = subprocess.Popen(
        [
            *exe,
            "train",
            "--game",
            args.game,
            "--listen",
            f"127.0.0.1:{link_port}",
            "--minutes",
            str(args.minutes),
            *train_args,
        ],
        stdout=(run_dir / "trainer.log").open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    server = subprocess.Popen(
        [
            *exe,
            "serve",
            "--game",
            args.game,
            "--port",
            str(http_port),
            "--seats",
            "learned,rules",
            "--trainer",
            f"127.0.0.1:{link_port}",
            "--weights-dir",
            str(run_dir / "weights"),
        ],
        stdout=(run_dir / "server.log").open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        wait_until_up(url, server)
        started = time.monotonic()
        curve = CurveRecorder()
        progress_file = run_dir / "trainer" / "progress.jsonl"

        def show(summary: EngineSummary) -> None:
            p = last_progress(progress_file)
            w = curve.window(summary, p)
            if p is None:
                print(f"  waiting for the trainer... {summary.hands} hands played", flush=True)
                return
            payoff = "   n/a" if w["payoff"] is None else f"{w['payoff']:+.3f}"
            print(
                f"  {w['seconds']:5.0f}s  iter {p['iteration']:4d}  "
                f"{p['env_steps_per_s']:6.0f} steps/s  version {p['version']:4d}  "
                f"lag p50/p90 {p['lag']['p50']:.0f}/{p['lag']['p90']:.0f}  "
                f"learned vs rules {payoff}  ({summary.decisions_per_s:,.0f} decisions/s)",
                flush=True,
            )

        play_s = max(10.0, args.minutes * 60 - (time.monotonic() - started))
        training = uvloop.run(
            run_engine(
                url,
                args.game,
                args.games,
                ["learned", "rules"],
                None,
                play_s,
                progress=show,
                batch=True,
            )
        )
        trainer.wait(timeout=600)
        time.sleep(2.0)  # the final push reaches the server
        version = get_json(url + "/v1/policies")["policies"]["learned"]["latest"]
        print(
            f"training done; evaluating version {version} against the rules "
            f"over {args.eval_hands} hands...",
            flush=True,
        )
        final = uvloop.run(
            run_engine(
                url,
                args.game,
                args.games,
                [f"frozen@{version}", "rules"],
                args.eval_hands,
                None,
                batch=True,
            )
        )
        stats = final.policies[f"frozen@{version}"]
        result = {"n": stats.n, "mean": stats.mean, "ci95": stats.ci95}
        report = {
            "game": args.game,
            "algo": args.algo,
            "minutes": args.minutes,
            "tables": args.games,
            "final_version": version,
            "final_vs_rules": result,
            "beats_rules": stats.mean - stats.ci95 > 0,
            "training_engine": training.to_dict(),
            "eval_engine": final.to_dict(),
            "trainer_last": last_progress(progress_file),
            "curve": curve.points,
        }
        (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
        plot_curve(curve.points, result, run_dir / "learning_curve.png", args.game)
        print(final.format_table())
        print(
            f"final version {version} vs rules: {stats.mean:+.3f} ± {stats.ci95:.3f} per hand "
            f"(leduc's best response to the rules: +1.133); report: {run_dir / 'report.json'}, "
            f"curve: {run_dir / 'learning_curve.png'}"
        )
        return 0
    finally:
        for proc in (server, trainer):
            if proc.poll() is None:
                proc.terminate()
        for proc in (server, trainer):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
