"""`croupier bench outage`: what training an outage's backlog does to learning, against dropping it.

Each policy runs the whole external path (as `make demo`) for `minutes`; `outage_at_s` in, the
trainer is SIGKILLed and started again `outage_s` later while the games go on, so the servers'
spools fill with a backlog played by the version before the outage. The policies differ only
in `--max-sample-lag`: the default (32 versions for PPO) trains the backlog between fresh
batches; 8 drops what is still waiting 8 updates on; 1 drops whatever the first update after
the restart does not take (close to the old drop-the-surplus behaviour). The restarted trainer
is stopped with the games, so every policy saw the same traffic. Reported per policy: the
restarted trainer's trained share and drops, the learning curve, and the final version against
the rules.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external

# name -> `croupier train` arguments
POLICIES: dict[str, list[str]] = {
    "train-backlog": [],  # the default bound
    "bound-8": ["--max-sample-lag", "8"],
    "drop-backlog": ["--max-sample-lag", "1"],
}


def bench_outage(
    game: str,
    minutes: float,
    outage_at_s: float,
    outage_s: float,
    out_dir: Path,
    policies: list[str] | None = None,
    eval_hands: int = 5000,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = []
    for name in policies or list(POLICIES):
        print(f"{name}: {minutes:g} min, trainer down {outage_s:g} s from {outage_at_s:g} s...",
              flush=True)  # fmt: skip
        try:
            report = run_external(
                ExternalRun(
                    game=game,
                    minutes=minutes,
                    eval_hands=eval_hands,
                    run_dir=out_dir / f"outage-{stamp}" / name,
                    train_args=POLICIES[name],
                    quiet=True,
                    outage_at_s=outage_at_s,
                    outage_s=outage_s,
                )
            )
        except RuntimeError as e:  # one failed run (say Ray failed to start) is left out
            print(f"  FAILED, left out: {e}", flush=True)
            continue
        last = report["trainer_last"] or {}
        run = {
            "policy": name,
            "train_args": POLICIES[name],
            "final_version": report["final_version"],
            "final_vs_rules": report["final_vs_rules"],
            "restarted_at_s": report["trainer_restarted_at_s"],
            # The restarted trainer's counters: the backlog and what followed it.
            "trained_share": last.get("trained_share"),
            **{k: last.get(k) for k in (
                "episodes_received", "episodes_sampled", "episodes_dropped_stale",
                "episodes_dropped_backlog", "episodes_dropped_lag")},
            "curve": report["curve"],
        }  # fmt: skip
        runs.append(run)
        f = run["final_vs_rules"]
        print(f"  trained share {run['trained_share']}, final version {run['final_version']}: "
              f"{f['mean']:+.3f} ± {f['ci95']:.3f} vs rules", flush=True)  # fmt: skip
    result = {
        "game": game,
        "minutes": minutes,
        "outage_at_s": outage_at_s,
        "outage_s": outage_s,
        "eval_hands": eval_hands,
        "runs": runs,
    }
    (out_dir / "outage.json").write_text(json.dumps(result, indent=2, default=float))
    plot(result, out_dir / "outage.png")
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in result["runs"]:
        pts = [p for p in run["curve"] if p["payoff"] is not None]
        f = run["final_vs_rules"]
        label = (f"{run['policy']}: trained share {run['trained_share']:.2f}, "
                 f"final {f['mean']:+.3f} ± {f['ci95']:.3f}")  # fmt: skip
        ax.plot([p["seconds"] / 60 for p in pts], [p["payoff"] for p in pts], lw=1.2, label=label)
    at, dur = result["outage_at_s"] / 60, result["outage_s"] / 60
    ax.axvspan(at, at + dur, color="gray", alpha=0.2, label="trainer down")
    ax.axhline(0, c="black", lw=0.5)
    ax.set_xlabel("minutes")
    ax.set_ylabel("learned vs rules, recent hands")
    ax.set_title(f"{result['game']}: a {result['outage_s']:g} s trainer outage, the backlog "
                 "trained or dropped")  # fmt: skip
    ax.legend(loc="lower right", fontsize=8)
    save(fig, path)
