"""The generic adapter: the engine already encodes its state as floats and action ids.

State: {"obs": [float, ...], "legal_actions": [int, ...]}; an action's engine value is its id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.games.base import GameAdapter, InvalidState, mask_from_indices

# The largest magnitude a float32 observation holds; beyond it a number becomes infinite.
FLOAT32_MAX = float(np.finfo(np.float32).max)


_NUMBER_TYPES = {int, float}


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
        numbers = state["obs"]
        # JSON numbers only (numpy would take booleans and numeric strings), checked in C.
        if type(numbers) is list and not set(map(type, numbers)) <= _NUMBER_TYPES:
            raise InvalidState("'obs' must be a list of numbers")
        try:
            wide = np.asarray(numbers, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidState(f"'obs' must be a list of numbers: {e}") from None
        if wide.shape != (self.obs_size,):
            raise InvalidState(f"'obs' must have {self.obs_size} numbers, got shape {wide.shape}")
        if not (np.abs(wide) <= FLOAT32_MAX).all():  # NaN, inf, or inf once a float32
            raise InvalidState(f"'obs' must be finite numbers within +/-{FLOAT32_MAX:g}")
        obs = wide.astype(np.float32)
        return obs, mask_from_indices(state["legal_actions"], self.num_actions)

    def state_schema(self) -> dict[str, Any]:
        last = self.num_actions - 1
        return {
            "type": "object",
            "description": "The engine's own encoding: the observation and the legal ids.",
            "required": ["obs", "legal_actions"],
            "properties": {
                "obs": {
                    "type": "array",
                    "items": {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX},
                    "minItems": self.obs_size,
                    "maxItems": self.obs_size,
                    "description": f"The observation: {self.obs_size} numbers.",
                },
                "legal_actions": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": last},
                    "minItems": 1,
                    "maxItems": self.num_actions,
                    "uniqueItems": True,
                    "description": "The legal action ids.",
                },
            },
        }

    def action_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": 0, "maximum": self.num_actions - 1}

    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        return int(index)

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        index = int(value)
        if not 0 <= index < self.num_actions:
            raise InvalidState(f"action id {value!r} out of range")
        return index
