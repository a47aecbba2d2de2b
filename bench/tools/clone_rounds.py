"""The rules' clone's budget, round by round, as `croupier train` distils it: per game, the
decisions of each round and the clone's misses of the rules' moves on 4,000 fresh decisions
(`rules_clone.grow_clone`) and why it stopped, with the time it took to record and fit them.

    PYTHONPATH=src:. python bench/tools/clone_rounds.py leduc-holdem \
        examples.hearts_openspiel.adapter:Hearts examples.president.adapter:President
    PYTHONPATH=src:. python bench/tools/clone_rounds.py examples.hearts_openspiel.adapter:Hearts \
        --max-decisions 160000 --tolerance 0

`--tolerance 0` grows the budget while a doubling still cuts the misses, to see the whole
curve; the default is the trainer's (`CLONE_MISS_TOLERANCE`). Prints one JSON line per game.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from croupier.trainer import rules_anchor as ra
from croupier.trainer import rules_clone as rc
from croupier.trainer.algo import training_defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("games", nargs="+", help="games or adapters, as `croupier train --game`")
    parser.add_argument("--max-decisions", type=int, default=ra.RulesAnchor.clone_max_decisions)
    parser.add_argument("--tolerance", type=float, default=rc.CLONE_MISS_TOLERANCE)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rc.CLONE_MISS_TOLERANCE = args.tolerance  # (this process's trainer setting)
    for game in args.games:
        spec, hyper = training_defaults(game, None, {})
        anchor = ra.RulesAnchor(clone_max_decisions=args.max_decisions)
        t0 = time.monotonic()
        _, report = rc.distil(game, spec, anchor, gamma=hyper.gamma)
        keys = ("decisions", "record_s", "fit_s", "rounds", "value_offset_s", "clone_play_s")
        row = {"game": game, **{k: report[k] for k in keys}}
        row["total_s"] = round(time.monotonic() - t0, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
