"""The search seat's algorithm: determinized rollouts (policy improvement by simulation).

A seat that sees only its own cards cannot search the game tree itself, but it can search
worlds: hands consistent with what it sees (`Simulator.resample`: the unseen cards dealt at
random). In each world every candidate move is played and the hand played out to its end by a
base policy (the game's rules) for every seat (or the base for the searching seat and another
policy, `vs`, for the rest); the move whose mean payoff is best is chosen.
Rolling out a base policy from each move and taking the best is one step of policy
iteration: the result plays at least as well as the base wherever the worlds are
representative (Tesauro & Galperin 1996, backgammon rollouts; Ginsberg's GIB, bridge; the
determinized search of skat programs). Its worlds know of the other seats' moves what the
game's `resample` reads from them (uniform deals unless the table weighs them: crazy eights'
reads its opponent's draws, 8s, suits named and plays); beyond that a deal the other seats'
play made unlikely counts as much as any, so it can lose to a base that reads the table
better where hidden information decides the hand.

`search(...)` below is the whole algorithm, in order:

1. the moves: every legal move, at most `top` of them (the base's own move always; the rest
   the best by a `prior`'s scores when one is given, else drawn at random), a single legal
   move answered at once;
2. the worlds: seeds drawn as needed, world w the table `resample`d from the seat's state with
   its own seed. Every move is played in the same worlds (common random numbers): the
   difference between two moves' means is then the difference their moves make, not whose
   deal was luckier (the deal's variance cancels from the comparison);
3. the budget: `rollouts` hands per move on average (`rollouts` x moves in all), spent by
   successive halving (Karnin et al. 2013): rounds of equal budget, each playing the moves
   still in on new worlds and keeping the better half, so the close contenders get the most
   worlds (an even split, every move on the same `rollouts` worlds, is `halving=False`); the
   base's own move is never dropped, so the choice below compares it on every world;
4. the deadline: checked before every playout; at it the search stops and decides on the
   worlds every remaining move has played in full (a world half-played is dropped, so every
   mean compared is over the same worlds);
5. the choice: the remaining move with the best mean payoff to the acting seat's team, taken
   only when it beats the base's own move on the same worlds by more than `confidence`
   standard errors of their paired difference; else the base's move. A handful of worlds
   cannot tell near-equal moves apart, and a search that swaps the base's move for the
   luckiest of them plays worse than its base (crazy eights, where drawing and playing are
   often within a few hundredths: see docs/search.md). No world finished: no choice (the
   caller answers the base's move as a fallback).

The base policy plays inside the rollouts with numpy's global generator seeded per world
(`rules_seeded`): the rules bots that draw (RLCard's) and the `random` base draw the same in
every move's playout of one world, another case of common random numbers.

Where it runs: one process (a worker of `policies/search_pool.py`, which keeps a table per
worker and the server's deadline) or in-process (`SearchPlayer`: `croupier bench search`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from croupier.games.base import rules_seeded
from croupier.games.simulator import MAX_MOVES_PER_HAND, Simulator
from croupier.policies.seats import SearchSpec

Act = Callable[[dict[str, Any]], Any]  # an engine state in, the engine's action value out
# A state in, a score per legal move (in `legal_actions`' order, higher: more likely best):
# a version's logits, say. Which moves a search over many keeps (`candidate_moves`).
Prior = Callable[[dict[str, Any]], Sequence[float]]
# Standard errors by which a move must beat the base's own move (their paired difference over
# the same worlds) to be chosen over it (step 5).
CONFIDENCE = 1.0


@dataclass
class SearchResult:
    """What a search decided: `move` (a position in the state's `legal_actions`) or None
    when no world was played in full before the deadline."""

    move: int | None
    moves: list[int] = field(default_factory=list)  # the moves searched (positions)
    means: list[float] = field(default_factory=list)  # each one's mean payoff, over its worlds
    worlds: list[int] = field(default_factory=list)  # each one's worlds played
    playouts: int = 0  # hands played out in all
    complete: bool = False  # the whole budget was spent before the deadline
    base: int | None = None  # the base policy's move (a position): what `move` departs from


def random_base(state: dict[str, Any]) -> Any:
    """The `random` base: a legal move drawn from numpy's global generator (seeded per world
    by `playout`, so every move's playout of a world draws alike)."""
    legal = state["legal_actions"]
    return legal[np.random.randint(len(legal))]


def playout(table: Simulator, base: Act, seed: int, seat: int | None = None,
            others: Act | None = None) -> list[float]:  # fmt: skip
    """Play the hand `table` holds to its end, `seat` by `base` and every other seat by
    `others` (None: every seat by `base`), numpy's draws seeded by `seed`; every seat's
    payoff."""
    with rules_seeded(seed % 2**32):
        return play_to_end(table, base, seat, others)


def play_to_end(table: Simulator, base: Act, seat: int | None = None,
                others: Act | None = None) -> list[float]:  # fmt: skip
    """`playout` on numpy's draws as they stand."""
    for _ in range(MAX_MOVES_PER_HAND):
        if table.is_over():
            return [float(p) for p in table.payoffs()]
        player = table.current_player()
        act = base if others is None or player == seat else others
        table.step(act(table.state(player)))
    raise RuntimeError(f"a {table.name} playout ran past {MAX_MOVES_PER_HAND} moves")


def team_value(table: Simulator, seat: int, payoffs: list[float]) -> float:
    """The acting seat's payoff: its team's mean (partners share a hand's result)."""
    team = next((t for t in table.teams() if seat in t), [seat])
    return sum(payoffs[s] for s in team) / len(team)


def candidate_moves(
    state: dict[str, Any],
    base_move: Any,
    top: int,
    rng: random.Random,
    prior: Prior | None = None,
) -> list[int]:
    """Step 1: the positions of the moves searched: all legal moves when at most `top`; else
    the base's own move and the `top` - 1 others `prior` scores highest (without one: drawn
    at random)."""
    legal = state["legal_actions"]
    if len(legal) <= top:
        return list(range(len(legal)))
    mine = legal.index(base_move) if base_move in legal else 0
    others = [i for i in range(len(legal)) if i != mine]
    if prior is None:
        return [mine, *rng.sample(others, top - 1)]
    scores = list(prior(state))
    if len(scores) != len(legal):
        raise ValueError(f"a prior scored {len(scores)} moves of {len(legal)}")
    return [mine, *sorted(others, key=lambda i: -scores[i])[: top - 1]]


def search(
    table: Simulator,
    state: dict[str, Any],
    base: Act,
    spec: SearchSpec,
    rng: random.Random,
    deadline: float,
    halving: bool = True,
    prior: Prior | None = None,
    confidence: float = CONFIDENCE,
    others: Act | None = None,
) -> SearchResult:
    """The search seat's move in `state` (what the seat to act was sent), by rollouts of
    `base` on `table` (set to each world in turn: its hand is lost), the other seats by
    `others` when given, stopping at `deadline` (`time.monotonic()`); `prior` picks the moves
    searched when there are more than `spec.top`. See the module doc for the steps."""
    legal = state["legal_actions"]
    if len(legal) == 1:
        return SearchResult(0, [0], complete=True, base=0)
    # 1. the moves
    with rules_seeded(rng.getrandbits(32)):
        base_move = base(state)
    moves = candidate_moves(state, base_move, spec.top, rng, prior)
    first = moves[0] if base_move not in legal else legal.index(base_move)
    # each move's payoff in each world it played, in order: two moves still in played the
    # same worlds, so the k-th values of two moves pair up (step 5)
    played: dict[int, list[float]] = {m: [] for m in moves}
    # 3. the budget: rounds of equal size, the better half of the moves kept after each
    alive = list(moves)
    budget = spec.rollouts * len(moves)
    rounds = max(1, math.ceil(math.log2(len(moves)))) if halving else 1
    spent, playouts, stopped = 0, 0, False
    for r in range(rounds):
        share = (budget - spent) // (rounds - r)  # this round's hands (the last takes the rest)
        for _ in range(max(1, share // len(alive))):
            # 2. a world: its seed deals the hidden cards and seeds the base's own draws
            seed = rng.getrandbits(63)
            values = []
            for move in alive:
                # 4. the deadline, before every playout; a world half-played is dropped
                if time.monotonic() >= deadline:
                    stopped = True
                    break
                table.resample(state, random.Random(seed))
                seat = table.current_player()
                table.step(legal[move])
                payoffs = playout(table, base, seed, seat, others)
                values.append(team_value(table, seat, payoffs))
                playouts += 1
            if stopped:
                break
            for move, value in zip(alive, values, strict=True):
                played[move].append(value)
            spent += len(alive)
        if stopped:
            break
        if r < rounds - 1:  # keep the better half (ties: the earlier move), and the base's
            half = max(1, math.ceil(len(alive) / 2))
            kept = sorted(alive, key=lambda m: -_mean(played[m]))[:half]
            alive = [m for m in alive if m in kept or m == first]
    # 5. the choice, among the moves still in (all played in the same worlds)
    means = [_mean(played[m]) if played[m] else float("nan") for m in moves]
    worlds = [len(played[m]) for m in moves]
    result = SearchResult(None, moves, means, worlds, playouts, not stopped, base=first)
    if not played[alive[0]]:
        return result
    best = max(alive, key=lambda m: (_mean(played[m]), m == first))
    sure = first not in alive or _beats(played[best], played[first], confidence)
    result.move = best if sure else first
    return result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("-inf")


def _beats(move: list[float], base: list[float], confidence: float) -> bool:
    """Whether `move` beats `base` over the worlds both played, by more than `confidence`
    standard errors of the paired difference (a difference the same in every world is
    certain: no error)."""
    diffs = [a - b for a, b in zip(move, base, strict=False)]
    n = len(diffs)
    if n == 0:
        return False
    mean = sum(diffs) / n
    if n == 1:
        return mean > 0 and confidence <= 0
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    return mean > confidence * math.sqrt(var / n)


class SearchPlayer:
    """A search seat in-process (a `bench` yardstick's player, `bench/evaluate.py`'s `Act`):
    its own table of `game`, `base` playing the rollouts, `spec`'s budget and deadline."""

    def __init__(self, table: Simulator, base: Act, spec: SearchSpec, seed: int = 0,
                 halving: bool = True, prior: Prior | None = None,
                 confidence: float = CONFIDENCE, others: Act | None = None):  # fmt: skip
        if not table.resamples():
            raise ValueError(
                f"{type(table).__name__} cannot set a table from a seat's view "
                "(Simulator.resample): its game cannot be searched"
            )
        self.table, self.base, self.spec, self.halving = table, base, spec, halving
        self.prior, self.confidence, self.others = prior, confidence, others
        self.rng = random.Random(seed)
        self.decisions = 0
        self.fallbacks = 0  # deadlines passed with no world played in full: the base answered
        self.seconds = 0.0  # spent deciding, in all
        self.playouts = 0  # hands played out, in all

    def __call__(self, state: dict[str, Any]) -> Any:
        t0 = time.monotonic()
        result = search(self.table, state, self.base, self.spec, self.rng,
                        t0 + self.spec.ms / 1000.0, self.halving, self.prior,
                        self.confidence, self.others)  # fmt: skip
        self.decisions += 1
        self.seconds += time.monotonic() - t0
        self.playouts += result.playouts
        if result.move is None:
            self.fallbacks += 1
            return self.base(state)
        return state["legal_actions"][result.move]
