"""Games the search seat's tests play: Kuhn poker whose simulator sets a table from a seat's
view (`Simulator.resample`), and a one-decision gamble whose rules always play safe although
the gamble is worth more (the search must find it). Test-local: the shipped games' own
`resample` is the simulators' business, tested with them."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from croupier.games.base import NamedActionsAdapter
from croupier.games.simulator import Simulator
from examples.kuhn.adapter import KuhnAdapter
from examples.kuhn.game import CARDS, KuhnHand, KuhnSimulator


class ResamplingKuhn(KuhnSimulator):
    """Kuhn poker with worlds: the other seat's card dealt at random from the two left."""

    adapter = "tests.helpers.search_games:ResamplingKuhnAdapter"

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        seat = len(state["history"]) % 2
        other = rng.choice([c for c in CARDS if c != state["card"]])
        cards = [state["card"], other] if seat == 0 else [other, state["card"]]
        self.hand = KuhnHand(rng, cards)
        self.hand.history = list(state["history"])


class ResamplingKuhnAdapter(KuhnAdapter):
    simulator = "tests.helpers.search_games:ResamplingKuhn"


# One hidden card of four, one a loser: gambling wins 1 three times in four and loses 1
# otherwise (worth +0.5); playing safe is worth 0. The rules always play safe.
GAMBLE_DECK = ("win", "win", "win", "lose")


class Gamble(Simulator):
    name = "gamble"
    adapter = "tests.helpers.search_games:GambleAdapter"

    def __init__(self) -> None:
        self._rng = random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._rng.seed(seed)
        self.card, self.move = self._rng.choice(GAMBLE_DECK), None

    def current_player(self) -> int:
        return 0

    def state(self, seat: int) -> dict[str, Any]:
        return {"legal_actions": ["safe", "gamble"]}

    def step(self, action: Any) -> None:
        if self.move is not None or action not in ("safe", "gamble"):
            raise ValueError(f"illegal action {action!r}")
        self.move = action

    def is_over(self) -> bool:
        return self.move is not None

    def payoffs(self) -> list[float]:
        won = 0.0 if self.move == "safe" else (1.0 if self.card == "win" else -1.0)
        return [won, -won]

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        self.card, self.move = rng.choice(GAMBLE_DECK), None


class GambleAdapter(NamedActionsAdapter):
    name = "gamble"
    payoff_range = (-1.0, 1.0)
    simulator = "tests.helpers.search_games:Gamble"
    action_names = ("safe", "gamble")
    obs_size = 1

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(1, np.float32), self.legal_mask(state.get("legal_actions"))

    def rules(self):  # noqa: ANN201
        return lambda state: "safe"


def loose_rules(state: dict[str, Any]) -> str:
    """A studio's weak bot: always bets, always calls (never folds a jack to a bet)."""
    legal = state["legal_actions"]
    return "bet" if "bet" in legal else "call"


class LooseKuhn(ResamplingKuhn):
    """Kuhn poker with worlds, whose rules are `loose_rules`: the search over them folds a
    jack facing a bet (-1, not -2), which the rules never do."""

    adapter = "tests.helpers.search_games:LooseKuhnAdapter"


class LooseKuhnAdapter(KuhnAdapter):
    simulator = "tests.helpers.search_games:LooseKuhn"

    def rules(self):  # noqa: ANN201
        return loose_rules


class BlindGamble(Gamble):
    """The gamble without worlds: a simulator that cannot set a table from a seat's view
    (every shipped game can), for the refusals' tests."""

    adapter = "tests.helpers.search_games:BlindGambleAdapter"
    resample = Simulator.resample


class BlindGambleAdapter(GambleAdapter):
    name = "blind-gamble"
    simulator = "tests.helpers.search_games:BlindGamble"
