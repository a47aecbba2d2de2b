"""One RLCard table: deal a hand, hand out JSON states, apply raw actions: the built-in games'
`Simulator` (`games/simulator.py`).

Each table owns its own env (RLCard envs keep the hand in mutable state); under asyncio one
table is driven by one task, so no locking is needed.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import rlcard

from croupier.games.simulator import Simulator

GAMES = ("leduc-holdem", "uno", "doudizhu")
# UNO: how many of the latest moves a state carries (what a real table shows: the discard pile's
# recent cards, who drew). RLCard's raw state has neither the moves nor a recoloured wild's
# colour (its `target` keeps the wild's printed colour), so the table adds both.
UNO_MOVES_SENT = 16


def to_json(x: Any) -> Any:
    """RLCard's raw observation as plain JSON types: no numpy scalars, no tuples."""
    if isinstance(x, dict):
        return {str(k): to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_json(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_json(x.tolist())
    if isinstance(x, np.generic):  # np.int64, np.str_, np.bool_, ...
        return x.item()
    return x


class UnknownGame(ValueError):
    """A game the engine cannot play (the CLI says so in one line)."""


class RLCardTable(Simulator):
    """A single-hand-at-a-time wrapper around one RLCard env."""

    def __init__(self, game: str):
        if game not in GAMES:
            raise UnknownGame(f"unsupported game {game!r}; expected one of {GAMES}")
        self.game = self.name = self.adapter = game
        self.env = rlcard.make(game)
        self.num_players = int(self.env.num_players)
        # RLCard's doudizhu pays 1 to each seat of the winning side, 0 to the others.
        self.zero_sum = game != "doudizhu"
        self._dealt = False
        self._moves: deque[list[Any]] = deque(maxlen=UNO_MOVES_SENT)

    def reset(self, seed: int | None = None) -> None:
        """Deal a new hand; the same seed deals the same cards. Without a seed the table's
        generator goes on (re-seeding costs more than a whole leduc hand)."""
        if seed is not None:
            self.env.seed(seed)
        # The game, not the env: env.reset would also encode RLCard's observation arrays,
        # which nothing here reads (the same for env.step below).
        self.env.game.init_game()
        self._dealt = True
        self._moves.clear()

    def current_player(self) -> int:
        return int(self.env.get_player_id())

    def legal_actions(self) -> list[str]:
        if self.game == "doudizhu":  # its game has no get_legal_actions: the state lists them
            return [str(a) for a in self._current_state()["actions"]]
        return [str(a) for a in self.env.game.get_legal_actions()]

    def state(self, seat: int) -> dict[str, Any]:
        return self.state_json(seat)

    def teams(self) -> list[list[int]]:
        if self.game == "doudizhu":  # the landlord against the two peasants; drawn per deal
            landlord = int(self.env.game.round.landlord_id)
            return [[landlord], [s for s in range(self.num_players) if s != landlord]]
        return super().teams()

    def roles(self) -> list[str] | None:
        """Each seat's side in this deal (doudizhu: landlord or peasant); None: no sides."""
        if self.game != "doudizhu":
            return None
        landlord = int(self.env.game.round.landlord_id)
        return ["landlord" if s == landlord else "peasant" for s in range(self.num_players)]

    def _current_state(self) -> dict[str, Any]:
        """The player to act's raw state. Doudizhu's game keeps it from its last step (building
        one lists every legal move and the others' cards: in the reference engine, building
        it three times a decision and RLCard's observation arrays once were ~60% of its CPU)."""
        if self.game == "doudizhu":
            return self.env.game.state
        return self.env.game.get_state(self.current_player())

    def state_json(self, player: int) -> dict[str, Any]:
        # game.get_state is the raw observation; env.get_state would also build the obs array.
        mine = player == self.current_player()
        state = to_json(self._current_state() if mine else self.env.game.get_state(player))
        if self.game == "doudizhu":
            # croupier's engines list the legal moves as "legal_actions" (RLCard: "actions").
            state["legal_actions"] = state.pop("actions")
        if self.game == "uno":
            # Added keys only: RLCard's own keys keep their meaning for its rule agents.
            state["color"] = str(self.env.game.round.target.color)
            state["moves"] = [list(m) for m in self._moves]
        return state

    def step(self, action_value: str) -> None:
        # RLCard applies whatever it is given; an illegal action corrupts the hand silently.
        if not self._dealt or self.is_over():
            raise RuntimeError("no hand in progress")
        if action_value not in self.legal_actions():
            raise ValueError(f"illegal action {action_value!r}; legal: {self.legal_actions()}")
        if self.game == "uno":
            # [seat, action, the colour that seat faced]: a draw facing red says it had no red.
            color = str(self.env.game.round.target.color)
            self._moves.append([self.current_player(), action_value, color])
        self.env.game.step(action_value)

    def is_over(self) -> bool:
        return bool(self.env.is_over())

    def payoffs(self) -> list[float]:
        return [float(p) for p in self.env.get_payoffs()]


# The built-in games' simulators by import path (what their adapters name: `simulator`).
class LeducTable(RLCardTable):
    name = adapter = "leduc-holdem"

    def __init__(self) -> None:
        super().__init__("leduc-holdem")


class UnoTable(RLCardTable):
    name = adapter = "uno"

    def __init__(self) -> None:
        super().__init__("uno")


class DoudizhuTable(RLCardTable):
    name = adapter = "doudizhu"

    def __init__(self) -> None:
        super().__init__("doudizhu")
