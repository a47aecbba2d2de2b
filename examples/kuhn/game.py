"""Kuhn poker, the studio's own engine for the tutorial (croupier does not know this game).

Three cards (J, Q, K), one each, ante 1. Player 0 checks or bets 1; facing a bet a player calls
or folds; check-check or a call goes to showdown, the higher card wins the pot.

`KuhnSimulator` hands the same game to croupier (`croupier.games.simulator.Simulator`): with it,
`croupier eval`, the league, `score` and `promote --auto` play Kuhn poker by themselves.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from croupier.games.simulator import Simulator

CARDS = ("J", "Q", "K")


class KuhnHand:
    def __init__(self, rng: random.Random, cards: list[str] | None = None):
        self.cards = list(cards) if cards is not None else rng.sample(CARDS, 2)
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


class KuhnSimulator(Simulator):
    """The engine above as croupier's simulator: `--game examples.kuhn.game:KuhnSimulator`."""

    name = "kuhn-poker"  # the adapter's name: what `POST /v1/games` says
    adapter = "examples.kuhn.adapter:KuhnAdapter"  # what `croupier serve --game` takes

    def __init__(self) -> None:
        self._rng = random.Random()
        self.hand = KuhnHand(self._rng)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._rng.seed(seed)
        self.hand = KuhnHand(self._rng)

    def current_player(self) -> int:
        return self.hand.current_player()

    def state(self, seat: int) -> dict[str, Any]:
        return self.hand.state(seat)

    def step(self, action: Any) -> None:
        if self.hand.is_over() or action not in self.hand.legal_actions():
            raise ValueError(f"illegal action {action!r}; legal: {self.hand.legal_actions()}")
        self.hand.step(action)

    def is_over(self) -> bool:
        return self.hand.is_over()

    def payoffs(self) -> list[float]:
        return self.hand.payoffs()

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other seat's card drawn from the two this seat cannot see; the moves as the
        state lists them (a Kuhn state shows everything else)."""
        history = list(state["history"])
        other = rng.choice([c for c in CARDS if c != state["card"]])
        cards = [state["card"], other] if len(history) % 2 == 0 else [other, state["card"]]
        self.hand = KuhnHand(self._rng, cards)
        self.hand.history = history

    # Small enough to solve exactly: `croupier eval --exploitability` walks every deal.
    def deals(self) -> list[tuple[Any, float]]:
        deals = list(itertools.permutations(CARDS, 2))  # (player 0's card, player 1's)
        return [(d, 1.0 / len(deals)) for d in deals]

    def deal(self, deal: Any) -> None:
        self.hand = KuhnHand(self._rng, list(deal))

    def information(self, state: dict[str, Any]) -> str:
        """`second Q | check, bet`: who acts (first or second to act), the card, the moves."""
        history = state["history"]
        position = "second" if len(history) % 2 else "first"
        return f"{position} {state['card']} | {', '.join(history) or '-'}"
