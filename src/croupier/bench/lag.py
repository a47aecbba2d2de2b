"""`croupier bench lag`: how learning copes when the behaviour policy is N versions stale.

For each algorithm and lag, the whole external path runs for `minutes` with the server holding
weights back (`croupier serve --behaviour-lag N`: new games get the version N places behind the
newest it received). The learning curve is the learned seats' payoff against the rules over
the trainer's env steps; the final version is then evaluated against the rules.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external


def bench_lag(
    game: str,
    algos: list[str],
    lags: list[int],
    minutes: float,
    out_dir: Path,
    eval_hands: int = 3000,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = []
    for algo in algos:
        for lag in lags:
            print(f"{algo}, behaviour lag {lag}: {minutes:g} min...", flush=True)
            try:
                report = run_external(
                    ExternalRun(
                        game=game,
                        minutes=minutes,
                        algo=algo,
                        eval_hands=eval_hands,
                        run_dir=out_dir / f"lag-{stamp}" / f"{algo}-lag{lag}",
                        server_args=["--behaviour-lag", str(lag)],
                        quiet=True,
                    )
                )
            except RuntimeError as e:  # one failed run (say the trainer died) is left out
                print(f"  FAILED, left out: {e}", flush=True)
                continue
            last = report["trainer_last"] or {}
            run = {
                "algo": algo,
                "lag": lag,
                "minutes": minutes,
                "final_version": report["final_version"],
                "final_vs_rules": report["final_vs_rules"],
                "env_steps": last.get("env_steps"),
                "measured_lag": last.get("lag_lifetime"),
                "curve": report["curve"],
            }
            runs.append(run)
            f = run["final_vs_rules"]
            print(
                f"  final vs rules {f['mean']:+.3f} ± {f['ci95']:.3f}; ingest lag "
                f"{run['measured_lag']}",
                flush=True,
            )
    # One file for the whole sweep: runs of (algorithm, lag) pairs not measured this time are
    # kept, so the APPO and PPO halves (or one repeated run) can be measured apart.
    path = out_dir / "lag.json"
    kept = []
    if path.exists():
        previous = json.loads(path.read_text())
        if previous.get("game") == game:
            done = {(r["algo"], r["lag"]) for r in runs}
            kept = [r for r in previous["runs"] if (r["algo"], r["lag"]) not in done]
    result = {"game": game, "runs": kept + runs}
    path.write_text(json.dumps(result, indent=2, default=float))
    plot(result, out_dir / "lag.png")
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    algos = sorted({r["algo"] for r in result["runs"]})
    fig, axes = plt.subplots(1, len(algos), figsize=(6 * len(algos), 4.5), sharey=True)
    axes = axes if len(algos) > 1 else [axes]
    for ax, algo in zip(axes, algos, strict=True):
        for run in (r for r in result["runs"] if r["algo"] == algo):
            pts = [p for p in run["curve"] if p["payoff"] is not None and p["env_steps"]]
            xs = [p["env_steps"] for p in pts]
            # Smooth over 5 windows: single windows hold a few hundred hands.
            ys = [
                sum(p["payoff"] for p in pts[max(0, i - 4) : i + 1])
                / len(pts[max(0, i - 4) : i + 1])
                for i in range(len(pts))
            ]
            f = run["final_vs_rules"]
            ax.plot(xs, ys, label=f"lag {run['lag']} (final {f['mean']:+.2f})")
        ax.axhline(1.133 if result["game"] == "leduc-holdem" else 0, ls="--", c="gray", lw=1)
        ax.set_title(f"{algo.upper()}: behaviour policy N versions behind")
        ax.set_xlabel("env steps trained")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("payoff per hand vs rules (training)")
    save(fig, path)
