"""How far a search over a game's rules could go: the search that sees the table as it is.

    python bench/tools/search_ceiling.py --game examples.crazy_eights.adapter:CrazyEights \
        --game examples.hearts_openspiel.adapter:Hearts --out bench/results/search-ceiling.json

At each of its decisions this seat copies the table as it truly is (every hand, the stock in
the order it will be drawn, the bots' own draws to come), plays each legal move there and the
hand out by the rules for every seat, and takes the move that scored best (the rules' own on a
tie). It is scored against the rules on the same duplicate deals as `croupier bench search`
(`--seed`, `--hands`). A search from the seat's view (`search:base=rules`) chooses among the
same moves by the same playouts, only in worlds it guesses: at any one decision it cannot
choose better than this one, with the rules playing on. So the score says how much a
one-step search over the rules can win on the game at most, and what share of that the search
seat's worlds leave it (docs/search.md).

It reads the table itself, so it never serves (no seat spec): a yardstick, deterministic for a
game whose bots draw from numpy's global generator or nothing. Every move is searched (no
`top`): a game of many moves a decision takes long.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from croupier.bench.evaluate import duplicate_score, opponent_player, side_score
from croupier.games.registry import load_simulator
from croupier.games.simulator import Simulator
from croupier.policies.search import play_to_end, team_value


class TrueTableSearch:
    """The seat: every legal move played out by `rules` on a copy of `table` (the one the
    hands are played on), the best taken."""

    def __init__(self, table: Simulator, rules: Any) -> None:
        self.table, self.rules = table, rules
        self.decisions = self.changed = 0  # decisions, and those not the rules' move

    def __call__(self, state: dict[str, Any]) -> Any:
        legal = state["legal_actions"]
        drawn = np.random.get_state()  # the bots' draws to come, replayed in every playout
        own = self.rules(state)
        values = [self._value(move, drawn) for move in legal]
        np.random.set_state(drawn)  # the hand goes on as if nothing had been drawn here
        best = max(range(len(legal)), key=lambda i: (values[i], legal[i] == own))
        self.decisions += 1
        self.changed += legal[best] != own
        return legal[best]

    def _value(self, move: Any, drawn: Any) -> float:
        world = copy.deepcopy(self.table)
        seat = world.current_player()
        np.random.set_state(drawn)
        world.step(move)
        return team_value(world, seat, play_to_end(world, self.rules))


def ceiling(game: str, hands: int, seed: int, side: str | None) -> dict[str, Any]:
    """The seat against the rules on `game`'s deals (`seed`): its score and how often it
    left the rules' move."""
    table = load_simulator(game)
    rules = opponent_player(game, "rules", seed)
    seat = TrueTableSearch(table, rules)
    t0 = time.monotonic()
    if side is None:
        score = duplicate_score(game, seat, rules, hands, seed, table=table)
    else:
        score = side_score(game, seat, rules, hands, side, seed, table=table)
    return {
        "game": game,
        "side": side,
        "score": score,
        "decisions": seat.decisions,
        "changed": seat.changed,  # decisions where the best move was not the rules' own
        "seconds": time.monotonic() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", action="append", required=True, help="repeat: a point each")
    parser.add_argument("--hands", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--side", help="every seat of one side (doudizhu's landlord, peasant)")
    parser.add_argument("--out", type=Path, help="a JSON file for the result")
    args = parser.parse_args(argv)
    result = {
        "run": {"hands": args.hands, "seed": args.seed},
        "setting": "the rules searched on the true table (every card, the stock's order) "
        "against the rules, the same deals as `croupier bench search`",
        "points": [],
    }
    for game in args.game:
        point = ceiling(game, args.hands, args.seed, args.side)
        result["points"].append(point)
        score = point["score"]
        print(f"{game}: {score['mean']:+.4f} ± {score['ci95']:.4f}, "
              f"{point['changed']} of {point['decisions']} decisions not the rules' move",
              flush=True)  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
