"""Doudizhu (fight the landlord) for three seats, as RLCard plays it (`doudizhu`).

State: RLCard's raw state for the seat to act, as the engine sends it, e.g.
    {"self": 0, "landlord": 0, "current_hand": "3445566799TJQKA22BR",
     "others_hand": "...", "played_cards": ["", "", ""], "num_cards_left": [20, 17, 17],
     "trace": [[0, "33"], [1, "pass"]], "seen_cards": "9TQ",
     "legal_actions": ["pass", "44", "55", ...]}
(RLCard names the legal moves "actions"; croupier's engine sends them as "legal_actions".
Either key is read; both present and different is refused.)

Moves are card strings ("33344", "pass"). Seats are read relative to the one acting (0 self,
1 next, 2 previous), so one layout serves the landlord and both peasants: a single
role-conditioned policy can play every seat.

State features (float32, `FeatureSpec(history=N)`):
    own hand 54 | cards not seen yet (others' hands) 54 | move to beat 54 | leading 1 |
    cards played per relative seat 3x54 | cards left per relative seat 3x21 (one-hot 0..20) |
    landlord's relative seat 3 | bombs played so far 5 (one-hot 0..4+) |
    the last N moves, newest first: N x (54 cards + pass + relative seat 3)
A move is RLCard's 54-card multi-hot (4 rows per rank 3..2 for the count held, then the two
jokers): the same vector is each candidate's feature (`candidate_features`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from rlcard.games.doudizhu.utils import ACTION_2_ID, ID_2_ACTION

from croupier.games.base import CandidateAdapter, InvalidState, NamedActionsAdapter, RulesFn

NUM_SEATS = 3
CARD_SIZE = 54
_RANKS = "3456789TJQKA2BR"
_RANK_INDEX = {c: i for i, c in enumerate(_RANKS)}
_MAX_COPIES = np.array([4] * 13 + [1, 1], np.int64)
MAX_HAND = 20  # the landlord's 17 + 3
# The most legal moves a state can list: ~244 seen in 3,000 random-play games (99.99th
# percentile far lower); a 20-card hand with many trios can list more, so the bound is
# generous. A state above it is refused rather than silently cut.
MAX_CANDIDATES = 512
_SLOT = CARD_SIZE + 1 + NUM_SEATS  # one history slot: move, pass flag, relative seat


def _counts(cards: str) -> np.ndarray:
    """Cards per rank (15: 3..2, black joker, red joker) of a card string; raises KeyError."""
    return np.bincount([_RANK_INDEX[c] for c in cards], minlength=15)


def _multi_hot(counts: np.ndarray) -> np.ndarray:
    """RLCard's 54-card vector (`_cards2array`) from counts per rank."""
    out = np.zeros(CARD_SIZE, np.float32)
    out[:52] = (np.arange(4)[None, :] < counts[:13, None]).reshape(-1)
    out[52:] = counts[13:] > 0
    return out


def _action_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = np.zeros((len(ID_2_ACTION), 15), np.int8)
    for i, a in enumerate(ID_2_ACTION):
        if a != "pass":
            counts[i] = _counts(a)
    c = counts.astype(np.int64)
    feats = np.zeros((len(ID_2_ACTION), CARD_SIZE), np.float32)
    feats[:, :52] = (np.arange(4)[None, None, :] < c[:, :13, None]).reshape(len(c), 52)
    feats[:, 52:] = c[:, 13:] > 0
    # A bomb: four of a rank and nothing else; the rocket: both jokers.
    four = ((c == 4).sum(1) == 1) & (c.sum(1) == 4)
    rocket = (c[:, 13] == 1) & (c[:, 14] == 1) & (c.sum(1) == 2)
    bomb = four | rocket
    return counts, feats, bomb


# Per action id: cards per rank, the 54-card vector, whether it is a bomb (computed once,
# ~6 MB: a decision then costs table lookups, not string parsing).
ACTION_COUNTS, ACTION_FEATURES, ACTION_IS_BOMB = _action_tables()
PASS_ID = ACTION_2_ID["pass"]


@dataclass(frozen=True)
class FeatureSpec:
    """Which state features: `history` last moves (0 = none)."""

    history: int = 15

    @property
    def size(self) -> int:
        fixed = 3 * CARD_SIZE + 1 + NUM_SEATS * (CARD_SIZE + 21) + 3 + 5
        return fixed + self.history * _SLOT


def _int(x: Any, lo: int, hi: int, what: str) -> int:
    if not (type(x) is int or isinstance(x, np.integer)) or not lo <= int(x) <= hi:
        raise InvalidState(f"{what} must be an integer in {lo}..{hi}, got {x!r}")
    return int(x)


def _cards(x: Any, what: str) -> np.ndarray:
    if not isinstance(x, str) or len(x) > MAX_HAND * 3:
        raise InvalidState(f"{what} must be a card string, got {x!r}")
    try:
        c = _counts(x)
    except KeyError:
        raise InvalidState(f"{what} holds an unknown card: {x!r}") from None
    if (c > _MAX_COPIES).any():
        raise InvalidState(f"{what} holds more copies of a card than the deck has: {x!r}")
    return c


def _move_id(x: Any, what: str) -> int:
    i = ACTION_2_ID.get(x, -1) if isinstance(x, str) else -1
    if i < 0:
        raise InvalidState(f"{what}: unknown doudizhu move {x!r}")
    return i


class DoudizhuAdapter(NamedActionsAdapter, CandidateAdapter):
    """Doudizhu's state in, features out: the fixed 27,472-move mask for the old path, and
    each legal move's 54-card vector for candidate-scoring policies."""

    name = "doudizhu"
    # The engine that deals it for the arena, league and benchmarks (`games/registry.py`
    # `load_simulator`): named, not imported, since the engine is a later stage.
    simulator = "croupier.engine.rlcard_games:DoudizhuTable"
    action_names = tuple(ID_2_ACTION)
    num_players = NUM_SEATS
    candidate_size = CARD_SIZE
    max_candidates = MAX_CANDIDATES
    # A doudizhu mask is 27,472 floats (110 KB): cache few (states rarely repeat a legal set).
    MASKS_CACHED = 64

    def __init__(self, features: FeatureSpec | None = None):
        self.features = features or FeatureSpec()
        self.obs_size = self.features.size

    # --- validation -----------------------------------------------------------------------

    def _legal_ids(self, state: dict[str, Any]) -> tuple[list[str], np.ndarray]:
        legal = state.get("legal_actions", state.get("actions"))
        if "legal_actions" in state and "actions" in state and state["actions"] != legal:
            raise InvalidState("'legal_actions' and 'actions' differ")
        if type(legal) is not list or not legal:
            raise InvalidState("the state must list its legal moves in 'legal_actions'")
        if len(legal) > MAX_CANDIDATES:
            raise InvalidState(f"{len(legal)} legal moves; at most {MAX_CANDIDATES}")
        ids = np.fromiter((_move_id(a, "legal_actions") for a in legal), np.int64, len(legal))
        if len(np.unique(ids)) != len(ids):
            raise InvalidState("a move is listed twice in 'legal_actions'")
        return legal, ids

    def parse(self, state: dict[str, Any]) -> dict[str, Any]:
        """The validated parts of a state (raises InvalidState on anything malformed)."""
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a JSON object, got {type(state).__name__}")
        missing = [
            k
            for k in ("self", "landlord", "current_hand", "others_hand", "played_cards",
                      "num_cards_left", "trace")
            if k not in state
        ]  # fmt: skip
        if missing:
            raise InvalidState(f"state is missing {missing}")
        me = _int(state["self"], 0, NUM_SEATS - 1, "'self'")
        landlord = _int(state["landlord"], 0, NUM_SEATS - 1, "'landlord'")
        hand = _cards(state["current_hand"], "'current_hand'")
        others = _cards(state["others_hand"], "'others_hand'")
        played, left = state["played_cards"], state["num_cards_left"]
        if type(played) is not list or len(played) != NUM_SEATS:
            raise InvalidState("'played_cards' must list 3 card strings")
        if type(left) is not list or len(left) != NUM_SEATS:
            raise InvalidState("'num_cards_left' must list 3 counts")
        played_c = [_cards(p, "'played_cards'") for p in played]
        left_n = [_int(n, 0, MAX_HAND, "'num_cards_left'") for n in left]
        if int(hand.sum()) != left_n[me] or left_n[me] == 0:
            raise InvalidState("'current_hand' does not hold 'num_cards_left'[self] cards")
        if ((hand + others) > _MAX_COPIES).any():
            raise InvalidState("'current_hand' and 'others_hand' share a card")
        trace = state["trace"]
        if type(trace) is not list or len(trace) > 200:
            raise InvalidState("'trace' must be a list of [seat, move] pairs")
        moves: list[tuple[int, int]] = []
        for t in trace:
            if not isinstance(t, list | tuple) or len(t) != 2:
                raise InvalidState(f"'trace' entry must be [seat, move], got {t!r}")
            moves.append((_int(t[0], 0, NUM_SEATS - 1, "trace seat"), _move_id(t[1], "trace")))
        legal, ids = self._legal_ids(state)
        if (ACTION_COUNTS[ids] > hand[None, :]).any():
            raise InvalidState("a legal move holds cards that are not in 'current_hand'")
        return {"self": me, "landlord": landlord, "hand": hand, "others": others,
                "played": played_c, "left": left_n, "trace": moves, "legal": legal,
                "ids": ids}  # fmt: skip

    # --- features --------------------------------------------------------------------------

    def state_features(self, p: dict[str, Any]) -> np.ndarray:
        me, trace = p["self"], p["trace"]
        rel = [(me + r) % NUM_SEATS for r in range(NUM_SEATS)]  # self, next, previous
        obs = np.zeros(self.obs_size, np.float32)
        obs[0:54] = _multi_hot(p["hand"])
        obs[54:108] = _multi_hot(p["others"])
        # The move to beat: the last real move unless both others passed after it.
        beat = next((m for _, m in reversed(trace[-2:]) if m != PASS_ID), None)
        if beat is None:
            obs[162] = 1.0  # leading: any move goes
        else:
            obs[108:162] = ACTION_FEATURES[beat]
        o = 163
        for s in rel:
            obs[o : o + 54] = _multi_hot(p["played"][s])
            o += 54
        for s in rel:
            obs[o + p["left"][s]] = 1.0
            o += 21
        obs[o + (p["landlord"] - me) % NUM_SEATS] = 1.0
        o += 3
        bombs = sum(bool(ACTION_IS_BOMB[m]) for _, m in trace)
        obs[o + min(bombs, 4)] = 1.0
        o += 5
        for seat, m in reversed(trace[-self.features.history :] if self.features.history else []):
            obs[o : o + 54] = ACTION_FEATURES[m]
            obs[o + 54] = m == PASS_ID
            obs[o + 55 + (seat - me) % NUM_SEATS] = 1.0
            o += _SLOT
        return obs

    def encode_candidates(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.parse(state)
        return self.state_features(p), ACTION_FEATURES[p["ids"]]

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.parse(state)
        return self.state_features(p), self.legal_mask(p["legal"])

    def candidate_value(self, k: int, state: dict[str, Any]) -> str:
        legal, _ = self._legal_ids(state)
        if not 0 <= int(k) < len(legal):
            raise InvalidState(f"candidate {k!r} out of range 0..{len(legal) - 1}")
        return legal[int(k)]

    def teams(self, state: dict[str, Any]) -> list[list[str]]:
        """The landlord alone against the two peasants, who share their result."""
        if not isinstance(state, dict) or "landlord" not in state:
            raise InvalidState("state is missing 'landlord'")
        landlord = _int(state["landlord"], 0, NUM_SEATS - 1, "'landlord'")
        return [[str(landlord)], [str(s) for s in range(NUM_SEATS) if s != landlord]]

    # --- rules -------------------------------------------------------------------------------

    def warm_up(self) -> None:
        _rule_agent()

    def rules(self) -> RulesFn:
        def rule_action(state: dict[str, Any]) -> str:
            p = self.parse(state)
            raw = dict(state)
            raw["actions"] = list(p["legal"])  # what doudizhu-rule-v1 reads
            # The rule agent tests `trace[-1][1]`; JSON gives lists, RLCard tuples: both index.
            action = str(_rule_agent().step({"raw_obs": raw, "raw_legal_actions": raw["actions"]}))
            return action if action in p["legal"] else p["legal"][0]

        return rule_action


def rule_move_unchecked(state: dict[str, Any]) -> str:
    """doudizhu-rule-v1's move for an RLCard state this process made itself (in-process
    training: the engine's own states need no validation, which would cost more than the
    rule agent). Anything from outside goes through `DoudizhuAdapter.rules()`."""
    return str(_rule_agent().step({"raw_obs": state, "raw_legal_actions": state["actions"]}))


@functools.cache
def _rule_agent() -> Any:
    import rlcard.models  # registers the model ids `rlcard.models.load` needs

    return rlcard.models.load("doudizhu-rule-v1").agents[0]
