"""Limit hold'em as a studio's engine would hand it to croupier: RLCard's game, its raw state
for the seat to act with the seat and the moves so far added (`Simulator`)."""

from __future__ import annotations

from typing import Any

import rlcard

from croupier.engine.rlcard_games import to_json
from croupier.games.simulator import Simulator


class LimitHoldemSimulator(Simulator):
    name = "limit-holdem"
    adapter = "examples.limit_holdem.adapter:LimitHoldem"

    def __init__(self) -> None:
        self.env = rlcard.make("limit-holdem")
        self.moves: list[list[Any]] = []

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.env.seed(seed)
        self.env.game.init_game()
        self.moves = []

    def current_player(self) -> int:
        return int(self.env.game.get_player_id())

    def state(self, seat: int) -> dict[str, Any]:
        state = to_json(self.env.game.get_state(seat))
        state["seat"] = seat
        state["moves"] = [list(m) for m in self.moves]
        return state

    def step(self, action: Any) -> None:
        legal = [str(a) for a in self.env.game.get_legal_actions()]
        if self.is_over() or action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {legal}")
        self.moves.append([self.current_player(), action])
        self.env.game.step(action)

    def is_over(self) -> bool:
        return bool(self.env.game.is_over())

    def payoffs(self) -> list[float]:
        return [float(p) for p in self.env.game.get_payoffs()]
