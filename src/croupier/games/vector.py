"""The generic adapter: the engine already encodes its state as floats and action ids.

State: {"obs": [float, ...], "legal_actions": [int, ...]}; an action's engine value is its id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.games.base import GameAdapter, InvalidState, mask_from_indices


class VectorAdapter(GameAdapter):
    def __init__(self, obs_size: int, num_actions: int, num_players: int = 2, name: str = "vector"):
        if obs_size < 1 or num_actions < 1 or num_players < 1:
            raise ValueError("obs_size, num_actions and num_players must be positive")
        self.name = name
        self.obs_size = obs_size
        self.num_actions = num_actions
        self.num_players = num_players

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        if "obs" not in state or "legal_actions" not in state:
            raise InvalidState("state needs 'obs' (floats) and 'legal_actions' (action ids)")
        try:
            obs = np.asarray(state["obs"], dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise InvalidState(f"'obs' must be a list of numbers: {e}") from None
        if obs.shape != (self.obs_size,):
            raise InvalidState(f"'obs' must have {self.obs_size} numbers, got shape {obs.shape}")
        if not np.isfinite(obs).all():
            raise InvalidState("'obs' must be finite")
        return obs, mask_from_indices(state["legal_actions"], self.num_actions)

    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        return int(index)

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        index = int(value)
        if not 0 <= index < self.num_actions:
            raise InvalidState(f"action id {value!r} out of range")
        return index
