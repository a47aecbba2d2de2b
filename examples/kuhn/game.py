"""Kuhn poker, the studio's own engine for the tutorial (croupier does not know this game).

Three cards (J, Q, K), one each, ante 1. Player 0 checks or bets 1; facing a bet a player calls
or folds; check-check or a call goes to showdown, the higher card wins the pot.
"""

from __future__ import annotations

import random

CARDS = ("J", "Q", "K")


class KuhnHand:
    def __init__(self, rng: random.Random):
        self.cards = rng.sample(CARDS, 2)
        self.history: list[str] = []

    def current_player(self) -> int:
        return len(self.history) % 2

    def legal_actions(self) -> list[str]:
        return ["call", "fold"] if "bet" in self.history else ["check", "bet"]

    def is_over(self) -> bool:
        h = self.history
        return h[-1:] == ["fold"] or h[-1:] == ["call"] or h == ["check", "check"]

    def state(self, player: int) -> dict:
        """What the engine sends croupier for `player`'s decision."""
        return {"card": self.cards[player], "history": list(self.history),
                "legal_actions": self.legal_actions()}  # fmt: skip

    def step(self, action: str) -> None:
        assert action in self.legal_actions(), (action, self.legal_actions())
        self.history.append(action)

    def payoffs(self) -> list[float]:
        if self.history[-1] == "fold":  # the player who folded loses what they put in
            loser = (len(self.history) - 1) % 2
            return [-1.0, 1.0] if loser == 0 else [1.0, -1.0]
        stake = 2.0 if "bet" in self.history else 1.0
        winner = 0 if CARDS.index(self.cards[0]) > CARDS.index(self.cards[1]) else 1
        return [stake, -stake] if winner == 0 else [-stake, stake]
