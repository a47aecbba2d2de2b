"""A against B in-process on a game's simulator, in duplicate, for policies that are functions
of the state (`policies/distribution.py`): the arena's method without a server, for
benchmarks that train their own players (`croupier bench exploit`).

Each deal is played once per team with the same cards (two players: A in seat 0, then in
seat 1), B in every other seat; a set's value is A's mean payoff over its hands less what
those seats scored on that deal on average over the set (two-player zero-sum: A's mean payoff
over the pair), as `arena.py` scores one. Mean and 95% CI are over sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from croupier.games.registry import load_simulator
from croupier.stats import ci95

MAX_MOVES_PER_HAND = 10_000

Act = Callable[[dict[str, Any]], Any]


def play_duplicate(game: str, a: Act, b: Act, hands: int, seed: int = 0) -> dict[str, Any]:
    """`hands` hands (rounded up to whole sets) of A against B: A's payoff per hand, its
    95% CI half-width, the sets played, and A's win/draw/loss rates over hands."""
    table = load_simulator(game)
    table.reset(seed * 1_000_003)
    per_set = max(1, len(table.teams()))
    sets = math.ceil(max(hands, 2) / per_set)
    values: list[float] = []
    wins = draws = losses = 0
    for n in range(sets):
        deal = seed * 1_000_003 + n
        table.reset(deal)
        teams = table.teams()
        results = []
        for i, mine in enumerate(teams):
            if i:
                table.reset(deal)
            for _ in range(MAX_MOVES_PER_HAND):
                if table.is_over():
                    break
                seat = table.current_player()
                table.step((a if seat in mine else b)(table.state(seat)))
            else:
                raise RuntimeError("a hand did not end")
            results.append((mine, table.payoffs()))
        par = np.mean([p for _, p in results], axis=0)
        value = 0.0
        for mine, payoffs in results:
            ours = float(np.mean([payoffs[s] for s in mine]))
            value += ours - float(np.mean([par[s] for s in mine]))
            theirs = [payoffs[s] for s in range(len(payoffs)) if s not in mine]
            best_other = float(np.mean(theirs)) if theirs else 0.0
            wins += ours > best_other
            draws += ours == best_other
            losses += ours < best_other
        values.append(value / len(results))
    x = np.asarray(values)
    played = sets * per_set
    return {
        "hands": played,
        "sets": sets,
        "mean": float(x.mean()),
        "ci95": float(ci95(float(x.std(ddof=1)), sets)) if sets > 1 else float("nan"),
        "win": wins / played,
        "draw": draws / played,
        "loss": losses / played,
    }
