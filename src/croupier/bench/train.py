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
from dataclasses import replace
from pathlib import Path
from typing import Any

from croupier.bench.evaluate import payoff_vs
from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external
from croupier.policies.learned import read_weights_dir


def run_anchor(
    game: str,
    algo: str | None,
    minutes: float,
    num_cpus: int | None = None,
    train: dict[str, Any] | None = None,
    rules_anchor: Any = None,
    eval_every_s: float | None = None,
    eval_hands: int = 2000,
    seed: int = 1,
    ray_started: bool = False,
    env_config: dict[str, Any] | None = None,
    max_steps: int | None = None,
    preset: Any = None,
) -> dict[str, Any]:
    """RLlib in-process on the game's simulator for `minutes`, with `croupier train`'s
    settings (the preset, `train` over it: `bench strength`'s TRAIN_OVERRIDES) and, as
    `croupier train` does by default, rules-anchored learning (`rules_anchor`, a
    `RulesAnchor`; None: its defaults; disabled, or a game without rules: from scratch).

    Curve: RLlib's smoothed training return after each iteration; with `eval_every_s`,
    instead the policy evaluated against the rules (sampled, `eval_hands` on the same deals
    each time, at 0 and every `eval_every_s` of training; evaluation time not counted).
    `env_config`: the seat env's opponent (`engine/seat_env.py`; default the rules);
    `max_steps`: stop at this many env steps if sooner; `preset`: a `TrainingPreset` in
    place of the game's (a preset file's). Starts Ray unless it runs already
    (then leaves it)."""
    import ray
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions, module_weights
    from croupier.trainer import rules_anchor as ra
    from croupier.trainer import rules_clone as rc
    from croupier.trainer.algo import anchor_config, training_defaults

    torch.set_num_threads(1)
    spec, hyper = training_defaults(game, algo, train, preset)  # as `croupier train`
    adapter = load_adapter(game)
    if rules_anchor is None:  # `croupier train`'s default for the game
        rules_anchor = ra.anchor_for(adapter)
    anchor = rules_anchor
    if anchor.enabled and rc.anchorable(game) is not None:
        anchor = replace(anchor, enabled=False)
    served_keys = PolicyVersions(adapter, spec).weights(0).keys()
    ray_started = ray_started or ray.is_initialized()
    if not ray_started:
        ray.init(num_cpus=num_cpus, include_dashboard=False)
    clone = None
    try:
        config = anchor_config(game, spec, hyper, env_config=env_config)
        algo_ = config.debugging(seed=seed).build_algo()
        if anchor.enabled:
            t0 = time.monotonic()
            full, clone = rc.distil(game, spec, anchor, gamma=hyper.gamma, seed=seed)
            clone["seconds"] = time.monotonic() - t0  # before the clock starts, as the trainer's
            ra.start_from(algo_, full, version=1)
            ra.hold_reference(algo_, full)
            ra.set_coefficients(algo_, anchor, 0)
            algo_.env_runner_group.sync_weights(
                from_worker_or_learner_group=algo_.learner_group, inference_only=True
            )
        release = ra.restored_release({"clone": clone or {}})  # the clone's value offset

        def served() -> dict[str, Any]:
            weights = module_weights(algo_.get_module())
            return {k: v for k, v in weights.items() if k in served_keys}

        def evaluate(trained_s: float, steps: int) -> None:
            score = payoff_vs(game, spec, served(), eval_hands, seed=seed)
            point = {"seconds": trained_s, "env_steps": steps, **score, **learned}
            curve.append(point)
            print(f"  in-process {trained_s / 60:5.2f} min  {steps:>9,} steps  "
                  f"{point['mean']:+.3f} ± {point['ci95']:.3f}  {learned}", flush=True)  # fmt: skip

        steps, trained_s = 0, 0.0
        learned: dict[str, float] = {}
        curve: list[dict[str, Any]] = []
        next_eval = 0.0 if eval_every_s else float("inf")
        while True:
            if trained_s >= next_eval:
                evaluate(trained_s, steps)
                next_eval = trained_s + (eval_every_s or 0.0)
            if trained_s >= minutes * 60 or (max_steps is not None and steps >= max_steps):
                break
            t0 = time.monotonic()
            result = algo_.train()
            trained_s += time.monotonic() - t0
            steps = int(result["num_env_steps_sampled_lifetime"])
            # What the last update measured: the policy's entropy, the KL to the clone.
            stats = result.get("learners", {}).get(DEFAULT_MODULE_ID, {})
            learned = {k: round(float(stats[k]), 4) for k in ("entropy", ra.KL_KEY) if k in stats}
            if anchor.enabled:
                ra.after_update(algo_, anchor, release, steps, result)
            if not eval_every_s:
                ret = result["env_runners"].get("episode_return_mean")
                curve.append({"seconds": trained_s, "env_steps": steps, "return": ret})
        if eval_every_s and curve[-1]["seconds"] < trained_s:
            evaluate(trained_s, steps)
        weights = served()
        algo_.stop()
    finally:
        if not ray_started:
            ray.shutdown()
    return {
        "env_steps": steps,
        "seconds": trained_s,
        "env_steps_per_s": steps / max(trained_s, 1e-9),
        # The learner's module has a value head too; the served (inference) module's part.
        "weights": weights,
        "spec": spec,
        "curve": curve,
        "rules_anchor": {
            **anchor.to_dict(),
            "released_at": release.released_at,
            "held_back": release.held_back,
        },
        "clone": clone,
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
