"""Leduc Hold'em, as RLCard plays it (`leduc-holdem`).

State: RLCard's raw observation, e.g.
    {"hand": "SJ", "public_card": null, "all_chips": [2, 1], "my_chips": 1,
     "legal_actions": ["call", "raise", "fold"], "current_player": 1}
Observation: RLCard's own 36-slot encoding (see `LeducholdemEnv._extract_state`):
    [0:3] hand rank, [3:6] public card rank, [6:21] my chips, [21:36] opponent's chips.
Actions: RLCard's order, ["call", "raise", "fold", "check"]; an action's engine value is its name.
The state's JSON Schema (`LeducAdapter.state_schema`) says all of what `encode` checks.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import rlcard

from croupier.games.base import InvalidState, NamedActionsAdapter, RulesFn, json_int

ACTIONS: tuple[str, ...] = ("call", "raise", "fold", "check")

# RLCard's own card -> rank index table (suit is ignored: "SJ" and "HJ" are both 0).
CARD_INDEX: dict[str, int] = json.loads(
    (Path(rlcard.__path__[0]) / "games/leducholdem/card2index.json").read_text()
)

OBS_SIZE = 36
_PUBLIC_OFFSET = 3
_MY_CHIPS_OFFSET = 6
_OPP_CHIPS_OFFSET = 21
# Each chip one-hot has 15 slots; more chips would bleed into the next block or off the end.
MAX_CHIPS = 14

_REQUIRED = ("hand", "public_card", "all_chips", "my_chips", "legal_actions")
_REQUIRED_KEYS = frozenset(_REQUIRED)


def _card(state: dict[str, Any], key: str) -> int:
    card = state[key]
    if not isinstance(card, str) or card not in CARD_INDEX:
        raise InvalidState(f"{key!r} must be one of {sorted(CARD_INDEX)}, got {card!r}")
    return CARD_INDEX[card]


class LeducAdapter(NamedActionsAdapter):
    name = "leduc-holdem"
    # The engine that deals it for the arena, league and benchmarks (`games/registry.py`
    # `load_simulator`): named, not imported, since the engine is a later stage.
    simulator = "croupier.engine.rlcard_games:LeducTable"
    obs_size = OBS_SIZE
    action_names = ACTIONS
    num_players = 2
    # RLCard's units (chips / big blind): at most 2 + 2 raises of 2 before the flop and 2 of 4
    # after it, 14 chips a player, so a hand wins or loses at most 14 / 2 = 7.
    payoff_range = (-7.0, 7.0)

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a JSON object, got {type(state).__name__}")
        if not state.keys() >= _REQUIRED_KEYS:
            raise InvalidState(f"state is missing {[k for k in _REQUIRED if k not in state]}")

        hand = _card(state, "hand")
        public = None if state["public_card"] is None else _card(state, "public_card")

        chips, mine = state["all_chips"], state["my_chips"]
        if not isinstance(chips, list) or len(chips) != self.num_players:
            raise InvalidState(f"'all_chips' must be a list of {self.num_players} integers")
        if not (json_int(chips[0]) and json_int(chips[1]) and json_int(mine)):  # two players
            raise InvalidState("'all_chips' and 'my_chips' must be integers")
        if mine not in chips:
            raise InvalidState(f"'my_chips' ({mine}) is not one of 'all_chips' {chips}")
        opp = sum(chips) - mine
        if not (0 <= mine <= MAX_CHIPS and 0 <= opp <= MAX_CHIPS):
            raise InvalidState(f"chips must lie in 0..{MAX_CHIPS}, got mine={mine} opp={opp}")

        mask = self.legal_mask(state["legal_actions"])

        # One-hot slots set one by one: indexing with a list costs more than the four stores.
        obs = np.zeros(OBS_SIZE, np.float32)
        obs[hand] = 1.0
        obs[_MY_CHIPS_OFFSET + int(mine)] = 1.0
        obs[_OPP_CHIPS_OFFSET + int(opp)] = 1.0
        if public is not None:
            obs[_PUBLIC_OFFSET + public] = 1.0
        return obs, mask

    def state_schema(self) -> dict[str, Any]:
        cards = sorted(CARD_INDEX)
        chips = {"type": "integer", "minimum": 0, "maximum": MAX_CHIPS}
        return {
            "type": "object",
            "description": "RLCard's raw Leduc observation for the seat to act.",
            "required": list(_REQUIRED),
            "properties": {
                "hand": {"type": "string", "enum": cards, "description": "Your card."},
                "public_card": {
                    "anyOf": [{"type": "string", "enum": cards}, {"type": "null"}],
                    "description": "The board card; null before it is dealt.",
                },
                "all_chips": {
                    "type": "array",
                    "prefixItems": [chips, chips],
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "Chips in the pot by seat, yours among them.",
                },
                "my_chips": {**chips, "description": "Your chips in the pot (one of all_chips)."},
                "legal_actions": self.legal_actions_schema(),
                "current_player": {"description": "RLCard's seat to act (not read)."},
            },
            # my_chips is one of all_chips (the other is the opponent's). `dependentSchemas`,
            # not a bare `anyOf`: openapi-typescript reads an `anyOf` beside `properties` as a
            # union of loose objects, and leaves this one out of the type.
            "dependentSchemas": {
                "my_chips": {
                    "anyOf": [
                        {
                            "properties": {
                                "my_chips": {"const": c},
                                "all_chips": {"contains": {"const": c}},
                            }
                        }
                        for c in range(MAX_CHIPS + 1)
                    ]
                }
            },
        }

    def warm_up(self) -> None:
        _rule_agent()

    def rules(self) -> RulesFn:
        return self.checking(self.checked_rules())

    def checked_rules(self) -> RulesFn:
        # describe() calls rules() just to ask whether there is one: don't load RLCard here.
        def rule_action(state: dict[str, Any]) -> str:
            return str(_rule_agent().step(rlcard_view(state)))

        return rule_action


def rlcard_view(state: dict[str, Any]) -> dict[str, Any]:
    """The slice of RLCard's extracted state that its rule agents read."""
    return {"raw_obs": state, "raw_legal_actions": list(state["legal_actions"])}


@functools.cache
def _rule_agent() -> Any:
    # rlcard.models registers its model ids on import; `rlcard.models.load` needs that first.
    import rlcard.models

    return rlcard.models.load("leduc-holdem-rule-v1").agents[0]
