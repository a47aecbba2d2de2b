"""The strength score: how much better policy A plays a game than policy B, on the same deals.
Every tool that says how strong a version is (`croupier eval`, `score`, `promote`, the league,
`bench strength`, `bench train`) reports this number, under this name.

Hands are played in duplicate sets: every deal once per team, A on that team's seats and B on
all the others (two players: A in seat 0, then in seat 1). A seat's *par* on a deal is the mean
of what that seat scored over the set's hands (A's and B's play of it). The score of a set is
A's payoff per hand less the par of A's seats; the score is its mean over sets, with a 95% CI
over sets (they are independent).

    score = mean over A's hands of (A's payoff - par)  =  half of (A - B) in the same seats
            on the same deals

Why this one:
- B against itself scores 0 exactly, in any game: the rules' own record on this scale is 0 by
  construction (`rules_record` measures it anyway, beside the rules' raw payoff per hand).
- In a two-player zero-sum game it is A's payoff per hand against B (leduc's "+1.08 a hand
  against the rules" reads the same on every tool).
- In a game that is not zero-sum (the rules may score -0.02 a seat against themselves), a raw
  payoff against a 0 line misreads both ways; the par removes what the deal and the seat gave
  everyone.
- Seat advantage and the luck of the deal cancel within a set, so it needs far fewer hands
  than a raw payoff for the same CI.

**On one side** (`side`: a game of named sides, e.g. doudizhu's landlord, for a version that
learned one side only): a set is the deal played twice, A on that side's seats and then B on
them, B on every other seat both times; the par is the mean of the two, so the score is half of
(A - B) on that side on the same deals, against the same opponents. Only A's hand is A's: its
wins, draws and losses count that hand alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from croupier.stats import ci95

SCORE_NAME = "strength score"
SCORE_MEANING = (
    "A's payoff per hand less the deal's par (half of A - B in the same seats on the same "
    "deals); 0 for B against itself"
)

# One hand of a set: A's seats, the other teams' seats, every seat's payoff.
Hand = tuple[Sequence[int], Sequence[Sequence[int]], Sequence[float]]


@dataclass
class SetOutcome:
    value: float  # the set's score
    wins: int  # hands A's team scored more than the other teams' mean
    draws: int
    losses: int


def set_outcome(hands: Sequence[Hand], reference: Sequence[Sequence[float]] = ()) -> SetOutcome:
    """One duplicate set's score, and A's wins, draws and losses over its hands. `reference`:
    every seat's payoffs in the set's hands B played alone (a set on one side): in the par,
    not A's."""
    par: dict[int, list[float]] = {}  # seat -> its payoffs over the set's hands
    for payoffs in [*(h[2] for h in hands), *reference]:
        for seat, p in enumerate(payoffs):
            par.setdefault(seat, []).append(p)
    value = 0.0
    wins = draws = losses = 0
    for mine, others, payoffs in hands:
        a = sum(payoffs[s] for s in mine) / len(mine)
        value += a - sum(sum(par[s]) / len(par[s]) for s in mine) / len(mine)
        rest = [sum(payoffs[s] for s in team) / len(team) for team in others]
        b = sum(rest) / len(rest) if rest else 0.0
        wins += a > b
        draws += a == b
        losses += a < b
    return SetOutcome(value / len(hands), wins, draws, losses)


def score_summary(values: Sequence[float]) -> tuple[float, float]:
    """The score (mean over sets) and its 95% CI half-width (NaN below two sets)."""
    n = len(values)
    if not n:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((x - mean) ** 2 for x in values) / (n - 1)
    return mean, ci95(math.sqrt(var), n)
