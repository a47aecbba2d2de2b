"""`croupier bench train`: croupier's external path against RLlib stepping the game in-process.

Same game, module, algorithm and hyperparameters, same wall-clock budget:

- anchor: RLlib with the game as an in-process gymnasium env (learner seat vs the rules);
- external: reference engine → HTTP → policy server → link → trainer (`--batch` engine).

Reported: env steps/s trained (steps the learner received ÷ wall-clock) and the final policy's
payoff against the rules, both measured by the same in-process evaluation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.bench.evaluate import payoff_vs
from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external
from croupier.policies.learned import read_weights_dir


def run_anchor(
    game: str,
    algo: str,
    minutes: float,
    num_cpus: int | None = None,
    train: dict[str, Any] | None = None,
    env_config: dict[str, Any] | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """RLlib in-process on the game's simulator for `minutes` (or `max_steps` env steps,
    whichever comes first), with `croupier train`'s settings (the preset, `train` over it:
    `bench strength`'s TRAIN_OVERRIDES), against the rules or the opponent `env_config`
    names (`engine/seat_env.py`). Starts Ray unless it runs already (then leaves it)."""
    import ray
    import torch

    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions, module_weights
    from croupier.trainer.algo import anchor_config, training_defaults

    torch.set_num_threads(1)
    spec, hyper = training_defaults(game, algo, train)  # as `croupier train`: like for like
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=num_cpus, include_dashboard=False)
    try:
        config = anchor_config(game, spec, hyper, env_config=env_config)
        if seed is not None:
            config = config.debugging(seed=seed)
        algo_ = config.build_algo()
        t0 = time.monotonic()
        steps = 0
        curve = []
        while time.monotonic() - t0 < minutes * 60 and (max_steps is None or steps < max_steps):
            result = algo_.train()
            steps = int(result["num_env_steps_sampled_lifetime"])
            curve.append(
                {
                    "seconds": time.monotonic() - t0,
                    "env_steps": steps,
                    "return": result["env_runners"].get("episode_return_mean"),
                }
            )
        seconds = time.monotonic() - t0
        weights = module_weights(algo_.get_module())
        algo_.stop()
    finally:
        if started:
            ray.shutdown()
    # The learner's module has a value head too; keep what the served (inference) module has.
    served_keys = PolicyVersions(load_adapter(game), spec).weights(0).keys()
    weights = {k: v for k, v in weights.items() if k in served_keys}
    return {
        "env_steps": steps,
        "seconds": seconds,
        "env_steps_per_s": steps / seconds,
        "weights": weights,
        "spec": spec,
        "curve": curve,
    }


def bench_train(
    game: str, algo: str, minutes: float, out_dir: Path, eval_hands: int = 10_000
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / f"train-external-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"external path: {minutes:g} min ({algo})...", flush=True)
    external = run_external(
        ExternalRun(game=game, minutes=minutes, algo=algo, eval_hands=1000, run_dir=run_dir,
                    quiet=True)
    )  # fmt: skip
    last = external["trainer_last"] or {}
    ext_steps = int(last.get("env_steps", 0))
    ext_seconds = minutes * 60
    version, spec, ext_weights = read_weights_dir(run_dir / "weights")
    print(f"anchor (in-process RLlib): {minutes:g} min ({algo})...", flush=True)
    anchor = run_anchor(game, algo, minutes)
    print(f"evaluating both against the rules over {eval_hands} hands each...", flush=True)
    ext_eval = payoff_vs(game, spec, ext_weights, eval_hands, seed=1)
    anc_eval = payoff_vs(game, anchor["spec"], anchor["weights"], eval_hands, seed=1)
    report = {
        "game": game,
        "algo": algo,
        "minutes": minutes,
        "anchor": {
            "env_steps": anchor["env_steps"],
            "env_steps_per_s": anchor["env_steps_per_s"],
            "vs_rules": anc_eval,
            "curve": anchor["curve"],
        },
        "external": {
            "env_steps": ext_steps,
            "env_steps_per_s": ext_steps / ext_seconds,
            "final_version": version,
            "vs_rules": ext_eval,
            "decisions_per_s": external["training_engine"]["decisions_per_s"],
            "curve": external["curve"],
        },
    }
    report["throughput_ratio"] = (
        report["external"]["env_steps_per_s"] / report["anchor"]["env_steps_per_s"]
    )
    (out_dir / "train.json").write_text(json.dumps(report, indent=2, default=float))
    plot(report, out_dir / "train.png")
    return report


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.5))
    a = [p for p in report["anchor"]["curve"] if p["return"] is not None]
    ax.plot([p["seconds"] / 60 for p in a], [p["return"] for p in a], label="anchor (in-process)")
    e = [p for p in report["external"]["curve"] if p["payoff"] is not None]
    ax.plot([p["seconds"] / 60 for p in e], [p["payoff"] for p in e], label="external path")
    for key, color in (("anchor", "C0"), ("external", "C1")):
        ev = report[key]["vs_rules"]
        ax.errorbar([report["minutes"]], [ev["mean"]], yerr=[ev["ci95"]], fmt="o", c=color)
    ax.set_xlabel("minutes")
    ax.set_ylabel("payoff per hand vs rules")
    ax.set_title(
        f"bench train: {report['game']} ({report['algo']}), throughput ratio "
        f"{report['throughput_ratio']:.2f}"
    )
    ax.legend()
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    rows = []
    for key in ("anchor", "external"):
        r = report[key]
        ev = r["vs_rules"]
        rows.append(
            f"{key:<10} {r['env_steps']:>10,} steps  {r['env_steps_per_s']:>8,.0f} steps/s  "
            f"vs rules {ev['mean']:+.3f} ± {ev['ci95']:.3f} ({ev['n']} hands)"
        )
    rows.append(f"throughput ratio external/anchor: {report['throughput_ratio']:.2f}")
    return "\n".join(rows)
