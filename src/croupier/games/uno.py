"""UNO for two players, as RLCard plays it (`uno`).

State: RLCard's raw observation plus what the reference engine adds (`color`, `moves`), e.g.
    {"hand": ["r-1", "b-wild"], "target": "b-5", "played_cards": ["b-5"],
     "legal_actions": ["b-wild", "draw"], "num_cards": [2, 7], "num_players": 2,
     "current_player": 0, "color": "b", "moves": [[1, "b-5", "b"], [0, "draw", "b"]]}
`color` is the colour in force (RLCard's `target` keeps a recoloured wild's printed colour);
`moves` the latest moves, oldest first, each [seat, action, colour that seat faced]. Both are
optional: without them the colour is the target's and the history is empty.

Observation (`UnoAdapter`, 353 floats; see `_LAYOUT`): own hand and cards played so far as
counts per card, the colour in force and the target's trait, both seats' card counts, and the
opponent as the moves show it: the colours it drew on (it had none of them), the colours it
chose for wilds, and the last 8 moves. `UnoBasicAdapter` keeps RLCard's own 240 floats (own
hand and target only: 0/1/2-copy planes and a target plane, `encode_hand`/`encode_target`);
it learned nothing against `uno-rule-v1` (docs/strength.md) and stays for comparison, as
`--game croupier.games.uno:UnoBasicAdapter`.
Actions: RLCard's 61 action ids (`ACTION_SPACE`); an action's engine value is its string.
The state's JSON Schema (`state_schema`) says all of what the adapters check.

Why ~440 lines in one module: the state's checks, its schema and the three observations built
on them are one definition of the game's wire format; split, a field would be checked in one
file and described in another.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from rlcard.games.uno.utils import ACTION_LIST, TRAIT_MAP, encode_hand, encode_target

from croupier import stages
from croupier.games.base import (
    CandidateAdapter,
    InvalidState,
    NamedActionsAdapter,
    RulesFn,
    json_int,
)
from croupier.games.leduc import rlcard_view

_CARDS = frozenset(a for a in ACTION_LIST if a != "draw")
_WILD_CARDS = frozenset(c for c in _CARDS if c.split("-", 1)[1] in ("wild", "wild_draw_4"))
# encode_hand puts k copies of a card on plane k; a third copy would index past plane 2.
# (The deck holds at most two of each coloured card; wild copies are not counted.)
MAX_COPIES = 2
_PLANES = (4, 4, 15)
OBS_SIZE = int(np.prod(_PLANES))

_REQUIRED = ("hand", "target", "legal_actions")


class UnoBasicAdapter(NamedActionsAdapter):
    """RLCard's own 240-float observation: own hand and target card only."""

    name = "uno"
    # The engine that deals it for the arena, league and benchmarks (`games/registry.py`
    # `load_simulator`): named, not imported, since the engine is a later stage.
    simulator = "croupier.engine.rlcard_games:UnoTable"
    obs_size = OBS_SIZE
    action_names = tuple(ACTION_LIST)  # RLCard's ids: ACTION_SPACE[name] == position here
    num_players = 2
    payoff_range = (-1.0, 1.0)  # RLCard's: +1 the winner, -1 the loser (0 each on a draw)
    # RLCard lists a playable card once per copy held (["r-7", "r-7", "b-0"]).
    REPEATED_LEGAL_ACTIONS = True

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        hand, target, mask = self._checked(state, _REQUIRED)

        planes = np.zeros(_PLANES, np.float32)
        encode_hand(planes[:3], hand)
        encode_target(planes[3], target)
        return planes.reshape(-1), mask

    def _checked(self, state: Any, required: tuple[str, ...]) -> tuple[list[str], str, np.ndarray]:
        """(hand, target, legal mask) of a state, validated."""
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a JSON object, got {type(state).__name__}")
        missing = [k for k in required if k not in state]
        if missing:
            raise InvalidState(f"state is missing {missing}")

        hand, target = state["hand"], state["target"]
        if not isinstance(hand, list) or not all(isinstance(c, str) for c in hand):
            raise InvalidState(f"'hand' must be a list of card strings, got {hand!r}")
        counts = Counter(hand)
        unknown = counts.keys() - _CARDS
        if unknown:
            raise InvalidState(f"unknown card(s) in 'hand': {sorted(unknown)}")
        too_many = [c for c, n in counts.items() if n > MAX_COPIES and c not in _WILD_CARDS]
        if too_many:
            raise InvalidState(f"more than {MAX_COPIES} copies of {sorted(too_many)} in 'hand'")
        if not isinstance(target, str) or target not in _CARDS:
            raise InvalidState(f"'target' must be a card string, got {target!r}")
        return hand, target, self.legal_mask(state["legal_actions"])

    def state_schema(self) -> dict[str, Any]:
        card = {"type": "string", "enum": sorted(_CARDS)}
        return {
            "type": "object",
            "description": "RLCard's raw UNO observation for the seat to act.",
            "required": list(_REQUIRED),
            "properties": {
                "hand": {"type": "array", "items": card, "description": "Your cards."},
                "target": {**card, "description": "The card to play on (as printed)."},
                "legal_actions": {
                    **self.legal_actions_schema(),
                    "description": "The actions legal now: RLCard lists a playable card once "
                    "per copy held.",
                },
            },
            # At most two copies of a coloured card in a hand (the deck's count; RLCard's
            # encoding has no plane for a third). Under `dependentSchemas`, which client
            # generators leave out of the type (an `allOf` beside `items` would add 52
            # `& unknown` to it).
            "dependentSchemas": {
                "hand": {
                    "properties": {
                        "hand": {
                            "allOf": [
                                {"contains": {"const": c}, "minContains": 0, "maxContains": 2}
                                for c in sorted(_CARDS - _WILD_CARDS)
                            ]
                        }
                    }
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
            legal = state["legal_actions"]
            try:
                action = str(_rule_agent().step(rlcard_view(state)))
            except ValueError:
                # uno-rule-v1 picks a wild_draw_4 colour from the hand's non-wild cards and
                # fails on a hand that cannot hold the legal wild card.
                action = legal[0]
            # It can also name a colour that is not listed as legal: never answer that.
            return action if action in legal else legal[0]

        return rule_action


# --- the richer observation -----------------------------------------------------------------

_COLORS = ("r", "g", "b", "y")
_COLOR_IDS = {c: i for i, c in enumerate(_COLORS)}
_TRAITS = tuple(TRAIT_MAP)  # RLCard's order: 0-9, skip, reverse, draw_2, wild, wild_draw_4
_TRAIT_IDS = dict(TRAIT_MAP)
_COLORED_TRAITS = 13  # traits before the two wilds
# A card's slot in the per-card counts: coloured cards by (colour, trait), wilds by trait only
# (a wild's colour in the hand is just where it sat in the deck).
_WILD_TRAITS = ("wild", "wild_draw_4")


def _slot(card: str) -> int:
    trait = card[2:]
    if trait in _WILD_TRAITS:
        return 4 * _COLORED_TRAITS + _WILD_TRAITS.index(trait)
    return _COLOR_IDS[card[0]] * _COLORED_TRAITS + _TRAIT_IDS[trait]


_CARD_SLOT = {c: _slot(c) for c in _CARDS}
_CARD_SLOTS = 4 * _COLORED_TRAITS + 2
# Copies of each slot in the deck (one 0 per colour, two of the other coloured cards, four of
# each wild): played counts are divided by these, so 1.0 means "all of them are out".
_DECK_COPIES = np.array(
    [1.0 if t == 0 else 2.0 for _ in _COLORS for t in range(_COLORED_TRAITS)] + [4.0, 4.0],
    np.float32,
)
_MAX_COUNT = 17  # card counts one-hot up to here; the last slot means "this many or more"
_RECENT = 8  # moves encoded one by one (the rest count only towards the opponent summary)
_MOVE_SIZE = 2 + 4 + len(_TRAITS) + 1  # by me / by opponent, colour, trait, draw
MAX_MOVES = 64  # a longer `moves` list is refused (the engine sends 16)
MAX_PLAYED = 108  # the deck

# Where each feature lives in the observation (start, size).
_LAYOUT: dict[str, tuple[int, int]] = {}


def _block(name: str, size: int) -> None:
    start = sum(n for _, n in _LAYOUT.values())
    _LAYOUT[name] = (start, size)


for _name, _size in (
    ("hand", _CARD_SLOTS),  # copies held / 2 (wilds / 4)
    ("played", _CARD_SLOTS),  # copies played so far / copies in the deck (capped at 1)
    ("color", 4),  # colour in force
    ("trait", len(_TRAITS)),  # target's trait
    ("my_count", _MAX_COUNT + 1),  # one-hot
    ("opp_count", _MAX_COUNT + 1),  # one-hot
    ("counts", 2),  # mine / 20, opponent's / 20
    ("hand_colors", 4),  # coloured cards held per colour / 10
    ("opp_drew_on", 4),  # 1 / (1 + opponent moves since it drew facing this colour)
    ("opp_wild_color", 4),  # 1 / (1 + opponent moves since it chose this colour for a wild)
    ("recent", _RECENT * _MOVE_SIZE),  # the last moves, newest first
):
    _block(_name, _size)
RICH_OBS_SIZE = sum(n for _, n in _LAYOUT.values())

_RICH_REQUIRED = ("hand", "target", "legal_actions", "num_cards", "current_player", "played_cards")


@dataclass(slots=True)
class _Parsed:
    """The validated parts of a state (`UnoAdapter.parse`)."""

    hand: list[str]
    target: str
    mask: np.ndarray
    me: int
    counts: list[int]
    played: list[int]  # card slots
    color: str
    moves: list[tuple[int, str, str]]  # oldest first: (seat, action, colour faced)


class UnoAdapter(UnoBasicAdapter):
    """Own hand, cards played, both seats' card counts and the opponent's recent moves."""

    obs_size = RICH_OBS_SIZE

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.parse(state)
        return self.features(p), p.mask

    def state_schema(self) -> dict[str, Any]:
        schema = super().state_schema()
        card = schema["properties"]["target"]["enum"]
        seat = {"type": "integer", "minimum": 0, "maximum": self.num_players - 1}
        color = {"type": "string", "enum": list(_COLORS)}
        count = {"type": "integer", "minimum": 0, "maximum": MAX_PLAYED}
        schema["required"] = list(_RICH_REQUIRED)
        schema["properties"].update(
            {
                "num_cards": {
                    "type": "array",
                    "prefixItems": [count] * self.num_players,
                    "minItems": self.num_players,
                    "maxItems": self.num_players,
                    "description": "Cards held, by seat.",
                },
                "current_player": {**seat, "description": "Your seat."},
                "played_cards": {
                    "type": "array",
                    "items": {"type": "string", "enum": card},
                    "maxItems": MAX_PLAYED,
                    "description": "The cards played so far, oldest first.",
                },
                "color": {
                    **color,
                    "description": "The colour in force (a wild's chosen one); default: the "
                    "target's.",
                },
                "moves": {
                    "type": "array",
                    "maxItems": MAX_MOVES,
                    "items": {
                        "type": "array",
                        "prefixItems": [seat, self.action_schema(), color],
                        "minItems": 3,
                        "maxItems": 3,
                    },
                    "description": "The latest moves, oldest first: [seat, action, the colour "
                    "that seat faced]. Default: none.",
                },
                "num_players": {"description": "RLCard's player count (not read)."},
            }
        )
        return schema

    def check(self, state: dict[str, Any]) -> np.ndarray:
        # The checks without the features: what a rules seat's decision needs.
        return self.parse(state).mask

    def parse(self, state: dict[str, Any]) -> _Parsed:
        """The validated parts of a state (raises InvalidState on anything malformed)."""
        hand, target, mask = self._checked(state, _RICH_REQUIRED)
        me = state["current_player"]
        if not json_int(me) or not 0 <= me < self.num_players:
            raise InvalidState(f"'current_player' must be a seat 0..{self.num_players - 1}")
        counts = state["num_cards"]
        if (
            not isinstance(counts, list)
            or len(counts) != self.num_players
            or not all(json_int(n) and 0 <= n <= MAX_PLAYED for n in counts)
        ):
            raise InvalidState(f"'num_cards' must be {self.num_players} counts 0..{MAX_PLAYED}")
        played = state["played_cards"]
        if not isinstance(played, list) or len(played) > MAX_PLAYED:
            raise InvalidState(f"'played_cards' must be a list of at most {MAX_PLAYED} cards")
        slots = [_CARD_SLOT.get(c) if isinstance(c, str) else None for c in played]
        if None in slots:
            bad = next(c for c, i in zip(played, slots, strict=True) if i is None)
            raise InvalidState(f"unknown card in 'played_cards': {bad!r}")
        color = state.get("color", target[0])
        if not isinstance(color, str) or color not in _COLOR_IDS:
            raise InvalidState(f"'color' must be one of {_COLORS}, got {color!r}")
        moves = state.get("moves", [])
        if not isinstance(moves, list) or len(moves) > MAX_MOVES:
            raise InvalidState(f"'moves' must be a list of at most {MAX_MOVES} moves")
        return _Parsed(hand, target, mask, int(me), [int(n) for n in counts], slots, color,
                       [self._move(m) for m in moves])  # fmt: skip

    def _move(self, move: Any) -> tuple[int, str, str]:
        if not (isinstance(move, list) and len(move) == 3):
            raise InvalidState(f"a move must be [seat, action, colour], got {move!r}")
        seat, action, faced = move
        if not json_int(seat) or not 0 <= seat < self.num_players:
            raise InvalidState(f"a move's seat must be 0..{self.num_players - 1}")
        if not isinstance(action, str) or action not in self._action_ids:
            raise InvalidState(f"unknown action in 'moves': {action!r}")
        if not isinstance(faced, str) or faced not in _COLOR_IDS:
            raise InvalidState(f"a move's colour must be one of {_COLORS}, got {faced!r}")
        return int(seat), action, faced

    def features(self, p: _Parsed) -> np.ndarray:
        """The observation of a parsed state (cannot fail: `parse` checked everything)."""
        obs = np.zeros(RICH_OBS_SIZE, np.float32)
        slot = _CARD_SLOT
        o = _LAYOUT["hand"][0]
        for c in p.hand:
            obs[o + slot[c]] += 0.25 if c[2:] in _WILD_TRAITS else 0.5
        o = _LAYOUT["played"][0]
        played_counts = np.zeros(_CARD_SLOTS, np.float32)
        for i in p.played:
            played_counts[i] += 1.0
        obs[o : o + _CARD_SLOTS] = np.minimum(played_counts / _DECK_COPIES, 1.0)
        obs[_LAYOUT["color"][0] + _COLOR_IDS[p.color]] = 1.0
        obs[_LAYOUT["trait"][0] + _TRAIT_IDS[p.target[2:]]] = 1.0
        mine, theirs = p.counts[p.me], p.counts[1 - p.me]  # two seats
        obs[_LAYOUT["my_count"][0] + min(mine, _MAX_COUNT)] = 1.0
        obs[_LAYOUT["opp_count"][0] + min(theirs, _MAX_COUNT)] = 1.0
        o = _LAYOUT["counts"][0]
        obs[o], obs[o + 1] = mine / 20.0, theirs / 20.0
        o = _LAYOUT["hand_colors"][0]
        for c in p.hand:
            if c[2:] not in _WILD_TRAITS:
                obs[o + _COLOR_IDS[c[0]]] += 0.1
        self._encode_moves(obs, p.moves, p.me)
        return obs

    def _encode_moves(self, obs: np.ndarray, moves: list[tuple[int, str, str]], me: int) -> None:
        drew = _LAYOUT["opp_drew_on"][0]
        wild = _LAYOUT["opp_wild_color"][0]
        recent = _LAYOUT["recent"][0]
        opp_moves_since = 0  # newest first: how many opponent moves came after this one
        for k, (seat, action, faced) in enumerate(reversed(moves)):
            if k < _RECENT:
                o = recent + k * _MOVE_SIZE
                obs[o + (0 if seat == me else 1)] = 1.0
                if action == "draw":
                    obs[o + _MOVE_SIZE - 1] = 1.0
                else:
                    obs[o + 2 + _COLOR_IDS[action[0]]] = 1.0
                    obs[o + 6 + _TRAIT_IDS[action[2:]]] = 1.0
            if seat == me:
                continue
            weight = 1.0 / (1.0 + opp_moves_since)
            if action == "draw":
                i = drew + _COLOR_IDS[faced]
                obs[i] = max(obs[i], weight)
            elif action[2:] in _WILD_TRAITS:
                i = wild + _COLOR_IDS[action[0]]
                obs[i] = max(obs[i], weight)
            opp_moves_since += 1


# --- scored candidates ----------------------------------------------------------------------

# One row per legal action, what it is and how it sits with the hand and the opponent:
#   [0] draw; [1:5] the colour it plays or calls (a wild's chosen colour); [5:20] its trait;
#   [20] my coloured cards of that colour left after it / 10; [21] my other coloured cards of
#   the same trait / 4 (0 for wilds); [22], [23] the state's opp_drew_on and opp_wild_color
#   for that colour (the opponent had none of it / asked for it).
CANDIDATE_SIZE = 24
# The most legal actions a state can list: every coloured card of the deck (copies listed
# once each, as RLCard does) and the four colours of a wild.
MAX_CANDIDATES = 4 * (2 * _COLORED_TRAITS - 1) + 4


class UnoCandidatesAdapter(UnoAdapter, CandidateAdapter):
    """`UnoAdapter`'s state, and each legal action scored as a candidate (its colour and
    trait, and what the hand and the opponent's moves say of that colour), so what is learned
    of one card carries to the others: a skip is a skip in any colour."""

    candidate_size = CANDIDATE_SIZE
    max_candidates = MAX_CANDIDATES

    def encode_candidates(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        t0 = stages.clock() if stages.ON else 0
        p = self.parse(state)  # validates the state and its legal actions
        if stages.ON:
            t0 = stages.add(stages.VALIDATE, t0)
        obs = self.features(p)
        if stages.ON:
            t0 = stages.add(stages.STATE_FEATURES, t0)
        cands = self._candidates(state, obs)
        if stages.ON:
            stages.add(stages.CANDIDATE_FEATURES, t0)
        return obs, cands

    def _candidates(self, state: dict[str, Any], obs: np.ndarray) -> np.ndarray:
        legal = state["legal_actions"]
        colored = [c for c in state["hand"] if c[2:] not in _WILD_TRAITS]
        per_color = Counter(c[0] for c in colored)
        per_trait = Counter(c[2:] for c in colored)
        drew, wild = _LAYOUT["opp_drew_on"][0], _LAYOUT["opp_wild_color"][0]
        cands = np.zeros((len(legal), CANDIDATE_SIZE), np.float32)
        for k, action in enumerate(legal):
            row = cands[k]
            if action == "draw":
                row[0] = 1.0
                continue
            color, trait = _COLOR_IDS[action[0]], action[2:]
            row[1 + color] = 1.0
            row[5 + _TRAIT_IDS[trait]] = 1.0
            if trait in _WILD_TRAITS:
                row[20] = per_color[action[0]] / 10.0
            else:
                row[20] = (per_color[action[0]] - 1) / 10.0
                row[21] = (per_trait[trait] - 1) / 4.0
            row[22] = obs[drew + color]
            row[23] = obs[wild + color]
        return cands

    def candidate_count(self, state: dict[str, Any]) -> int:
        t0 = stages.clock() if stages.ON else 0
        self.parse(state)  # the checks alone: a rules seat needs no features
        if stages.ON:
            stages.add(stages.VALIDATE, t0)
        return len(state["legal_actions"])

    def candidate_value(self, k: int, state: dict[str, Any]) -> str:
        legal = state["legal_actions"]
        if not 0 <= k < len(legal):
            raise InvalidState(f"candidate {k!r} out of range of the state's legal actions")
        return str(legal[k])


@functools.cache
def _rule_agent() -> Any:
    # rlcard.models registers its model ids on import; `rlcard.models.load` needs that first.
    import rlcard.models

    return rlcard.models.load("uno-rule-v1").agents[0]
