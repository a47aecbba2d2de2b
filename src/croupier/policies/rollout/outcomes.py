"""Rollout outcomes: canary arms' and shadowed versions' payoffs and disagreement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from croupier.stats import Mean


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
