"""One bounded in-process RLlib run (the anchor: learner seat vs the rules), then its policy
played against the rules greedy and sampled: the experiments behind a game's training preset.

    python -m experiments.inprocess --game uno --algo ppo --minutes 10 --out run.json

The curve is RLlib's own mean episode return (the learner's sampled play against the rules,
last 200 games) against env steps, which does not depend on how loaded the machine is; the
final payoffs come from `payoff_vs` over fresh deals, the same for every run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from croupier.bench.evaluate import payoff_vs
from croupier.policies.module import ModelSpec


def train(
    game: str,
    spec: ModelSpec,
    hyper: Any,
    minutes: float,
    seed: int,
    num_envs: int,
    max_steps: int | None = None,
) -> dict[str, Any]:
    import ray
    import torch

    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions, module_weights
    from croupier.trainer.algo import anchor_config

    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        config = anchor_config(game, spec, hyper, num_envs=num_envs).debugging(seed=seed)
        algo = config.build_algo()
        t0 = time.monotonic()
        steps, curve = 0, []
        while time.monotonic() - t0 < minutes * 60 and (max_steps is None or steps < max_steps):
            result = algo.train()
            steps = int(result["num_env_steps_sampled_lifetime"])
            curve.append(
                {
                    "seconds": round(time.monotonic() - t0, 1),
                    "env_steps": steps,
                    "return": result["env_runners"].get("episode_return_mean"),
                }
            )
            print(json.dumps(curve[-1]), flush=True)  # progress, for a run cut short
        seconds = time.monotonic() - t0
        weights = module_weights(algo.get_module())
        algo.stop()
    finally:
        ray.shutdown()
    # The learner's module has a value head too; keep what the served module has.
    served = PolicyVersions(load_adapter(game), spec).weights(0).keys()
    return {
        "env_steps": steps,
        "seconds": seconds,
        "env_steps_per_s": steps / seconds,
        "curve": curve,
        "weights": {k: v for k, v in weights.items() if k in served},
    }


def _layer_sizes(text: str) -> list[int]:
    from croupier.settings import parse_layer_sizes

    try:
        return parse_layer_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from croupier.trainer.algo import training_defaults

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="uno")
    p.add_argument("--algo", default="ppo", choices=["ppo", "appo"])
    # Every setting not given is the game's preset (`croupier train`'s), else the algorithm's.
    p.add_argument("--hiddens", type=_layer_sizes, default=None, help="e.g. 256,256")
    p.add_argument("--score-hidden", type=int, default=None, help="candidate scorer width")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--minibatch", type=int, default=None)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--entropy", type=float, default=None)
    p.add_argument("--gamma", type=float, default=None)
    p.add_argument("--lambda", dest="lambda_", type=float, default=None, help="GAE lambda")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-games", type=int, default=4000)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)

    given = {"lr": a.lr, "train_batch_size": a.batch, "minibatch_size": a.minibatch,
             "num_epochs": a.epochs, "entropy_coeff": a.entropy, "gamma": a.gamma,
             "hiddens": a.hiddens,
             "score_hidden": a.score_hidden or None}  # fmt: skip
    overrides = {k: v for k, v in given.items() if v is not None}
    spec, hyper = training_defaults(a.game, a.algo, overrides)
    if a.lambda_ is not None:
        hyper.extra["lambda_"] = a.lambda_
    run = train(a.game, spec, hyper, a.minutes, a.seed, a.num_envs, a.max_steps)
    weights = run.pop("weights")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    # The trained weights and the curve first: the evaluation takes minutes on a busy machine.
    np.savez(a.out.with_suffix(".weights.npz"), **weights)
    a.out.with_suffix(".curve.json").write_text(json.dumps(run, default=float))
    t0 = time.monotonic()
    evals = {
        mode: payoff_vs(a.game, spec, weights, a.eval_games, seed=10_000 + a.seed, explore=explore)
        for mode, explore in (("greedy", False), ("sampled", True))
    }
    report = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "hyper": vars(hyper),
        **run,
        "vs_rules": evals,
        "eval_seconds": time.monotonic() - t0,
    }
    a.out.write_text(json.dumps(report, indent=1, default=float))
    g, s = evals["greedy"], evals["sampled"]
    print(
        f"{a.out.stem}: {run['env_steps']:,} steps in {run['seconds'] / 60:.1f} min "
        f"({run['env_steps_per_s']:,.0f}/s); vs rules greedy {g['mean']:+.3f} ± {g['ci95']:.3f}, "
        f"sampled {s['mean']:+.3f} ± {s['ci95']:.3f} ({g['n']} games)",
        flush=True,
    )
    return report


if __name__ == "__main__":
    main()
