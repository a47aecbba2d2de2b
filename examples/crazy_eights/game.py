"""Crazy eights, two seats, as OpenSpiel plays it (`pip install 'croupier[games]'`: the
`open-spiel` package), wrapped from scratch as a studio wraps its engine: the hands are
followed from OpenSpiel's deals, draws and plays; chance is drawn from the table's seed.

OpenSpiel's rules: 7 cards each; play a card of the suit in force or of the top card's rank,
or an 8 and then name a suit; else draw (up to 5 a turn), then pass. The first out wins what
the other holds in points (8: 50, court cards: 10, others their rank); OpenSpiel ends a game
at 100 turns, every seat then paying its own points. Payoffs are OpenSpiel's / 100.
"""

from __future__ import annotations

import random
from typing import Any

from croupier.games.simulator import Simulator

SCALE = 100.0  # OpenSpiel's points per payoff unit: a hand of points is ~0.5 to 4


def _spiel() -> Any:
    try:
        import pyspiel  # the optional `games` extra
    except ImportError:
        raise ValueError("crazy eights is OpenSpiel's: pip install 'croupier[games]'") from None
    return pyspiel.load_game("crazy_eights", {"players": 2})


class CrazyEightsSimulator(Simulator):
    name = "crazy-eights"
    adapter = "examples.crazy_eights.adapter:CrazyEights"
    zero_sum = False  # a game stopped at 100 turns costs both seats

    def __init__(self) -> None:
        self.game, self.rng = _spiel(), random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng.seed(seed)
        self.s = self.game.new_initial_state()
        self.hands: list[list[str]] = [[], []]
        self.top: str | None = None
        self.moves: list[list[Any]] = []
        self.dealer, self.dealt, self.drawer = 0, 0, -1
        self._chance()

    def _chance(self) -> None:
        """Deal, as OpenSpiel asks, following where each card goes."""
        while self.s.is_chance_node():
            action = self.rng.choice(self.s.chance_outcomes())[0]
            text = self.s.action_to_string(action)
            if text.startswith("Decide Player"):
                self.dealer = int(text.split()[2])
            elif self.drawer >= 0:
                self.hands[self.drawer].append(text[5:])
            elif self.dealt < 14:  # 7 each, from the seat after the dealer
                self.hands[(self.dealer + 1 + self.dealt) % 2].append(text[5:])
                self.dealt += 1
            else:
                self.top = text[5:]
            self.s.apply_action(action)
        self.drawer = -1

    def current_player(self) -> int:
        return int(self.s.current_player())

    def _legal(self) -> dict[str, int]:
        """The legal moves by name: "play C4", "draw", "pass", "suit:H" (name a suit)."""
        out = {}
        for a in self.s.legal_actions():
            text = self.s.action_to_string(a)
            if text.startswith("Play "):
                out["play " + text[5:]] = a
            else:
                out["suit:" + text[-1] if text.startswith("Nominate") else text.lower()] = a
        return out

    def state(self, seat: int) -> dict[str, Any]:
        hands = self.hands
        suit = self.s.observation_string(seat).split("Previous suit: ")[1][0]
        legal = list(self._legal())
        return {"seat": seat, "hand": list(hands[seat]), "top": self.top, "suit": suit,
                "phase": "nominate" if legal[0].startswith("suit") else "play",
                "num_cards": [len(h) for h in hands], "moves": self.moves[-16:],
                "legal_actions": legal}  # fmt: skip

    def step(self, action: Any) -> None:
        legal = self._legal()
        if self.is_over() or action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {list(legal)}")
        seat = self.current_player()
        self.moves.append([seat, action])
        if action.startswith("play "):
            self.top = action[5:]
            self.hands[seat].remove(self.top)
        self.drawer = seat if action == "draw" else -1
        self.s.apply_action(legal[action])
        self._chance()

    def is_over(self) -> bool:
        return bool(self.s.is_terminal())

    def payoffs(self) -> list[float]:
        return [r / SCALE for r in self.s.returns()]
