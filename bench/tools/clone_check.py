"""The rules' clone checked on fresh hands, in one process: how much its value at a seat's
first decision tells about the hand's return (raw, and scaled as the anchor reads it), and how
its sampled and greedy play score against the rules at a few label smoothings.

The value: the clone is distilled as `croupier train` distils it (20,000 decisions, the game's
preset network); on 4,000 fresh first steps of the rules against the rules, the scale is fitted
on one half and the residual spreads are read on the other (no optimism from fitting and judging
on the same rows). The play: each smoothing's clone against the rules over `--hands`
duplicate hands (`bench/evaluate.py` `payoff_vs`: the strength score), sampled and greedy.

    PYTHONPATH=src:. python bench/tools/clone_check.py --game uno
    PYTHONPATH=src:. python bench/tools/clone_check.py --game uno --keep 1,0.2
    PYTHONPATH=src:. python bench/tools/clone_check.py \
        --game croupier.games.doudizhu_cards:DoudizhuCardsCandidates \
        --smoothing 0.05,0.01,0 --hands 1000

`--keep`: the value (and, on 2,000 held-out decisions of fresh hands, the greedy agreement with
the rules and the share of the returns' variance the value explains) of a clone fitted to the
same number of decisions kept at each share (`rules_decisions(keep=...)`: fewer a hand, from
more deals), each its own recording, judged on the same fresh first steps.

Prints one line per measurement.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import torch

from croupier.bench.evaluate import payoff_vs
from croupier.games.registry import load_adapter
from croupier.trainer import rules_anchor as ra
from croupier.trainer import rules_clone as rc
from croupier.trainer.algo import training_defaults


def value_spreads(game: str, module: object, first: rc.Decisions) -> dict[str, float]:
    """The returns' spread at fresh first steps, less the value raw and less it scaled (the
    scale fitted on the first half, every spread read on the second)."""
    v, r = rc.clone_values(module, first), first.returns.astype(np.float64)
    fit, judge = slice(0, len(r) // 2), slice(len(r) // 2, None)
    scale = float(np.cov(r[fit], v[fit])[0, 1] / v[fit].var(ddof=1))
    return {"returns_sd": float(r[judge].std()), "raw_sd": float((r[judge] - v[judge]).std()),
            "scale": scale, "scaled_sd": float((r[judge] - scale * v[judge]).std())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="uno")
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--smoothing", default="", help="comma separated; empty: value only")
    parser.add_argument("--hands", type=int, default=1000)
    parser.add_argument("--keep", default="1", help="comma separated shares of decisions kept")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec, hyper = training_defaults(args.game, None, {}, None)
    first = rc.calibration_steps(args.game, args.decisions, 0, hyper.gamma)
    held_out = rc.rules_decisions(args.game, 2000, seed=7, gamma=hyper.gamma, deviate=0.0)
    adapter = load_adapter(args.game)
    data = None  # the first share's recording, which the smoothings below are fitted to
    for keep in [float(x) for x in args.keep.split(",") if x.strip()]:
        kept = rc.rules_decisions(args.game, args.decisions, seed=0, gamma=hyper.gamma, keep=keep)
        data = kept if data is None else data
        module, _ = rc.fit_clone(adapter, spec, ra.RulesAnchor(), kept)
        spreads = value_spreads(args.game, module, first)
        agreement = rc.clone_fit(module, held_out)["greedy_agreement"]
        # The critic PPO starts from, at every step of fresh hands: the share of the
        # returns' variance its value explains.
        miss = held_out.returns - rc.clone_values(module, held_out)
        explained = 1.0 - float(miss.var() / held_out.returns.var())
        said = ", ".join(f"{k} {v:.3f}" for k, v in spreads.items())
        print(f"{args.game}, keep {keep}: {kept.hands} hands recorded ({kept.seconds:.0f} s), "
              f"{len(first)} fresh first steps; {said}; on {len(held_out)} held-out "
              f"decisions: greedy agreement {agreement:.3f}, value's explained variance "
              f"{explained:.3f}", flush=True)  # fmt: skip
    for smoothing in [float(x) for x in args.smoothing.split(",") if x.strip()]:
        anchor = replace(ra.RulesAnchor(), smoothing=smoothing)
        full, report = rc.distil(args.game, spec, anchor, hyper.gamma, data=data, first=first)
        served = rc.served_weights(args.game, spec, full)
        sampled = payoff_vs(args.game, spec, served, args.hands, seed=1)
        greedy = payoff_vs(args.game, spec, served, args.hands, seed=1, explore=False)
        print(f"smoothing {smoothing}: agreement {report['greedy_agreement']:.3f}, entropy "
              f"{report['entropy']:.3f}; sampled {sampled['mean']:+.4f} ± {sampled['ci95']:.4f}, "
              f"greedy {greedy['mean']:+.4f} ± {greedy['ci95']:.4f}; its own gain by team "
              f"{report['clone_gain_by_team']}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
