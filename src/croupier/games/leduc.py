"""Leduc Hold'em, as RLCard plays it (`leduc-holdem`).

State: RLCard's raw observation, and what the built-in engine adds to it (the moves so far,
`[seat, action, betting round]` each, and the small blind's seat), e.g.
    {"hand": "SJ", "public_card": null, "all_chips": [2, 1], "my_chips": 1,
     "legal_actions": ["call", "raise", "fold"], "current_player": 1,
     "moves": [], "small_blind": 1}
Observation (`LeducAdapter`, the default): RLCard's own 36-slot encoding (see
`LeducholdemEnv._extract_state`): [0:3] hand rank, [3:6] public card rank, [6:21] my chips,
[21:36] opponent's chips. It has neither the betting history nor the blinds, and the added
keys are not required (a state without them, as engines sent before, is accepted): every
version trained so far reads these 36 floats.
`LeducHistoryAdapter` (`--game croupier.games.leduc:LeducHistoryAdapter`, the same game)
adds the seat's blind and every move: no policy on RLCard's 36 floats can be less exploitable
than 0.18 a hand (CFR+ restricted to them, docs/robustness.md); on these, 0.
`LeducNoFreeFoldAdapter` is the history observation with `fold` masked where `check` is legal.
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


def _is_int(x: Any) -> bool:
    # bool is an int subclass; True as a chip count is a malformed state, not 1 (nor is
    # np.bool_ an np.integer). `type(x) is int` first: JSON gives plain ints, and it is cheap.
    return type(x) is int or isinstance(x, np.integer)


def _is_seat(x: Any) -> bool:
    """0 or 1 (a seat, a betting round), as a JSON integer."""
    return _is_int(x) and 0 <= x <= 1


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


# The history block: per betting round, up to 4 moves (call, raise, raise, call), each the
# action's one-hot and whether the seat to act made it.
MOVES_PER_ROUND = 4
_MOVE_SIZE = len(ACTIONS) + 1
HISTORY_OBS_SIZE = OBS_SIZE + 2 + 2 * MOVES_PER_ROUND * _MOVE_SIZE


class LeducHistoryAdapter(LeducAdapter):
    """RLCard's 36 floats, then the seat's blind ([36] small, [37] big) and the betting
    history ([38:78]: 2 rounds x 4 moves x (call, raise, fold, check, mine)). Needs the
    `moves`, `small_blind` and `current_player` the built-in engine sends."""

    obs_size = HISTORY_OBS_SIZE

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        base, mask = super().encode(state)
        moves, small_blind, me = (state.get(k) for k in ("moves", "small_blind", "current_player"))
        if not (_is_seat(small_blind) and _is_seat(me)):
            raise InvalidState("'small_blind' and 'current_player' must be seats 0 or 1")
        if not isinstance(moves, list) or len(moves) > 2 * MOVES_PER_ROUND:
            raise InvalidState(f"'moves' must be a list of at most {2 * MOVES_PER_ROUND} moves")
        obs = np.zeros(HISTORY_OBS_SIZE, np.float32)
        obs[:OBS_SIZE] = base
        obs[OBS_SIZE + (me != small_blind)] = 1.0
        count = [0, 0]
        last_round = 0
        for move in moves:
            if not (isinstance(move, list) and len(move) == 3):
                raise InvalidState(f"a move is [seat, action, round], got {move!r}")
            seat, action, round_ = move
            ok = _is_seat(seat) and _is_seat(round_) and isinstance(action, str)
            if not (ok and action in self._action_ids and last_round <= round_):
                raise InvalidState(f"not a move of this game: {move!r}")
            if count[round_] >= MOVES_PER_ROUND:
                raise InvalidState(f"more than {MOVES_PER_ROUND} moves in round {round_}")
            last_round = round_
            at = OBS_SIZE + 2 + (round_ * MOVES_PER_ROUND + count[round_]) * _MOVE_SIZE
            obs[at + self._action_ids[action]] = 1.0
            obs[at + len(ACTIONS)] = float(seat == me)
            count[round_] += 1
        return obs, mask


_FOLD, _CHECK = ACTIONS.index("fold"), ACTIONS.index("check")


class LeducNoFreeFoldAdapter(LeducHistoryAdapter):
    """The history observation, with `fold` masked out wherever `check` is legal: folding
    when checking is free is never better than checking (a check keeps every later choice,
    folding to a bet included), so a policy on this adapter cannot have the habit at all
    (`croupier eval --exploitability` reports it; docs/robustness.md has the measurements).
    The engine's state is unchanged: only what the policy may choose is."""

    def legal_mask(self, legal: Any) -> np.ndarray:
        mask = super().legal_mask(legal)
        if not (mask[_FOLD] and mask[_CHECK]):
            return mask
        kept = mask.copy()  # the base's masks are cached and shared: never written to
        kept[_FOLD] = 0.0
        kept.flags.writeable = False
        return kept


def rule_v2(state: dict[str, Any]) -> str:
    """RLCard's `leduc-holdem-rule-v2` (a second reference bot, not croupier's rules: it folds
    every hand before the flop), for `croupier eval --exploitability --a
    croupier.games.leduc:rule_v2`."""
    return str(_rule_agent("leduc-holdem-rule-v2").step(rlcard_view(state)))


def rlcard_view(state: dict[str, Any]) -> dict[str, Any]:
    """The slice of RLCard's extracted state that its rule agents read."""
    return {"raw_obs": state, "raw_legal_actions": list(state["legal_actions"])}


@functools.cache
def _rule_agent(model: str = "leduc-holdem-rule-v1") -> Any:
    # rlcard.models registers its model ids on import; `rlcard.models.load` needs that first.
    import rlcard.models

    return rlcard.models.load(model).agents[0]
