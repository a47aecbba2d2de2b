"""Rollout outcomes: canary arms' and shadowed versions' payoffs and disagreement."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


class Mean:
    """Count, mean and 95% CI half-width of a stream of numbers."""

    __slots__ = ("n", "total", "squares")

    def __init__(self) -> None:
        self.n, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x

    def to_dict(self) -> dict[str, Any]:
        if not self.n:
            return {"n": 0, "mean": None, "ci95": None}
        mean = self.total / self.n
        var = max(0.0, (self.squares - self.n * mean * mean) / (self.n - 1)) if self.n > 1 else 0
        return {"n": self.n, "mean": mean, "ci95": 1.96 * math.sqrt(var / self.n)}


@dataclass
class ShadowStats:
    """One learned version shadowing the rules."""

    decisions: int = 0
    disagree_sampled: int = 0  # the action it would have played differs from the rules'
    disagree_greedy: int = 0  # its most likely action differs
    failed: int = 0
    payoff: Mean = field(default_factory=Mean)  # the shadowed seat's payoff (rules acted)
    payoff_when_disagreed: Mean = field(default_factory=Mean)

    def to_dict(self) -> dict[str, Any]:
        n = max(self.decisions, 1)
        return {
            "decisions": self.decisions,
            "disagreement_rate": self.disagree_sampled / n if self.decisions else None,
            "greedy_disagreement_rate": self.disagree_greedy / n if self.decisions else None,
            "failed": self.failed,
            "games": self.payoff.to_dict(),
            "games_with_disagreement": self.payoff_when_disagreed.to_dict(),
        }
