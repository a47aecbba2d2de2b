"""Doudizhu's adapter: real RLCard states in, features out; malformed states refused."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
from rlcard.envs.doudizhu import _cards2array
from rlcard.games.doudizhu.game import DoudizhuGame

from croupier.engine.rlcard_games import to_json
from croupier.games.base import CandidateAdapter, GameAdapter, InvalidState
from croupier.games.doudizhu import (
    ACTION_2_ID,
    ACTION_KINDS,
    MAX_CANDIDATES,
    MOVE_KINDS,
    DoudizhuAdapter,
    FeatureSpec,
)

ADAPTER = DoudizhuAdapter()


def states(games: int, seed: int):
    """JSON states of every decision of random-play games, as the engine would send them."""
    rng = random.Random(seed)
    game = DoudizhuGame()
    game.np_random = np.random.RandomState(seed)
    for _ in range(games):
        state, _ = game.init_game()
        while not game.is_over():
            js = to_json(state)
            js["legal_actions"] = js["actions"]
            yield js
            state, _ = game.step(rng.choice(state["actions"]))


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    return list(states(3, seed=3))


def test_is_a_fixed_size_and_a_candidate_adapter():
    assert isinstance(ADAPTER, GameAdapter) and isinstance(ADAPTER, CandidateAdapter)
    assert ADAPTER.num_actions == 27472 and ADAPTER.num_players == 3
    assert ADAPTER.obs_size == FeatureSpec(15).size == 396 + 15 * 58
    assert DoudizhuAdapter(FeatureSpec(history=0)).obs_size == 396


def test_candidates_are_the_legal_moves_as_rlcard_encodes_them(sample):
    for state in sample:
        obs, cands = ADAPTER.encode_candidates(state)
        assert obs.shape == (ADAPTER.obs_size,) and obs.dtype == np.float32
        assert cands.shape == (len(state["legal_actions"]), 54) and cands.dtype == np.float32
        for k, move in enumerate(state["legal_actions"]):
            np.testing.assert_array_equal(cands[k], _cards2array(move))
            assert ADAPTER.candidate_value(k, state) == move
        # The state's own parts, in RLCard's encoding.
        np.testing.assert_array_equal(obs[:54], _cards2array(state["current_hand"]))
        np.testing.assert_array_equal(obs[54:108], _cards2array(state["others_hand"]))
        me, landlord = state["self"], state["landlord"]
        assert obs[396 - 8 + (landlord - me) % 3] == 1.0  # role: the landlord's relative seat


def test_state_features_follow_the_trace(sample):
    later = [s for s in sample if len(s["trace"]) >= 3]
    for state in later[:50]:
        obs = ADAPTER.encode_candidates(state)[0]
        trace = state["trace"]
        real = [m for _, m in trace[-2:] if m != "pass"]
        if real:  # the move to beat: the last real move of the last two
            np.testing.assert_array_equal(obs[108:162], _cards2array(real[-1]))
            assert obs[162] == 0.0
        else:
            assert obs[162] == 1.0 and not obs[108:162].any()
        # History slot 0: the newest move, its pass flag, its relative seat.
        seat, move = trace[-1]
        slot = obs[396 : 396 + 58]
        np.testing.assert_array_equal(slot[:54], _cards2array(move))
        assert slot[54] == (move == "pass")
        assert slot[55 + (seat - state["self"]) % 3] == 1.0
        left = obs[163 + 162 : 163 + 162 + 63].reshape(3, 21)
        for r in range(3):
            assert left[r].argmax() == state["num_cards_left"][(state["self"] + r) % 3]


CONTEXT = DoudizhuAdapter(FeatureSpec(history=0, move_context=True))


def _count(cards: str) -> dict[str, int]:
    return {c: cards.count(c) for c in set(cards)}


def test_move_context_says_what_each_move_is_and_leaves(sample):

    assert CONTEXT.obs_size == 396 + 3 and CONTEXT.candidate_size == 54 + 32 + 54 + 21
    kinds = {"3": "solo", "33": "pair", "3334": "trio_solo", "34567": "solo_chain",
             "33334455": "four_two_pair", "3333": "bomb", "BR": "rocket",
             "pass": "pass"}  # fmt: skip

    for move, kind in kinds.items():  # the table itself, moves random play rarely reaches
        assert MOVE_KINDS[int(ACTION_KINDS[ACTION_2_ID[move]][:15].argmax())] == kind
    checked = set()
    for state in sample:
        obs, cands = CONTEXT.encode_candidates(state)
        plain_obs, plain = ADAPTER.encode_candidates(state)
        np.testing.assert_array_equal(obs[:396], plain_obs[:396])  # the same state, then more
        hand = state["current_hand"]
        for k, move in enumerate(state["legal_actions"]):
            row = cands[k]
            np.testing.assert_array_equal(row[:54], plain[k])
            kind = MOVE_KINDS[int(row[54:69].argmax())]
            assert row[54:69].sum() == 1 and kind == kinds.get(move, kind)
            checked |= {move} & kinds.keys()
            after = dict(_count(hand))
            for c in "" if move == "pass" else move:
                after[c] -= 1
            left = "".join(c * n for c, n in after.items())
            np.testing.assert_array_equal(row[86:140], _cards2array(left))
            assert row[140:161].argmax() == len(left) and row[140:161].sum() == 1
            if move != "pass":  # the main rank: its lowest rank held most often in the move
                counts = _count(move)
                top = max(counts.values())
                main = min((c for c in counts if counts[c] == top), key="3456789TJQKA2BR".index)
                assert row[69:84].argmax() == "3456789TJQKA2BR".index(main)
                assert row[85] == len(move) / 32  # a power of two: exact in float16
        # Who played the move to beat, by relative seat (nothing when leading).
        trace = state["trace"]
        real = [(s, m) for s, m in trace[-2:] if m != "pass"]
        if real:
            assert obs[396 + (real[-1][0] - state["self"]) % 3] == 1.0 and obs[396:].sum() == 1
        else:
            assert not obs[396:].any()
    assert {"pass", "3"} <= checked


def test_mask_path_matches_the_candidates(sample):
    for state in sample[:40]:
        obs, mask = ADAPTER.encode(state)
        assert int(mask.sum()) == len(state["legal_actions"])
        for move in state["legal_actions"]:
            assert mask[ADAPTER.action_index(move, state)] == 1.0
        np.testing.assert_array_equal(obs, ADAPTER.encode_candidates(state)[0])


def test_padding_for_fixed_shape_spaces(sample):
    state = sample[0]
    padded = ADAPTER.pad_candidates(*ADAPTER.encode_candidates(state))
    space = ADAPTER.candidate_observation_space
    assert space.contains(padded)
    k = len(state["legal_actions"])
    assert padded["candidate_mask"].sum() == k and padded["candidate_mask"][:k].all()
    assert space.contains(ADAPTER.terminal_candidates())
    assert ADAPTER.candidate_action_space.n == MAX_CANDIDATES


def test_rules_answer_a_legal_move(sample):
    rules = ADAPTER.rules()
    for state in sample[:60]:
        assert rules(state) in state["legal_actions"]


def _broken(state: dict) -> list[dict]:
    out = []

    def with_(**kw):
        s = copy.deepcopy(state)
        s.update(kw)
        out.append(s)

    with_(current_hand="3333345")  # five threes
    with_(current_hand="33X")  # no such card
    with_(current_hand=17)
    with_(self=3)
    with_(self=True)
    with_(landlord="0")
    with_(played_cards=["", ""])
    with_(num_cards_left=[20, 17])
    with_(num_cards_left=[21, 17, 17])
    with_(trace=[[0, "33"], [5, "pass"]])
    with_(trace=[[0, "3Z"]])
    with_(trace="33")
    with_(legal_actions=[])
    with_(legal_actions=["pass", "pass"])
    with_(legal_actions=["not-a-move"])
    with_(legal_actions=["BR", "2222"])  # cards the hand does not hold (unless it does)
    with_(legal_actions=["3"] * (MAX_CANDIDATES + 1))
    with_(legal_actions={"pass": 1})
    with_(actions=["pass", "3"])  # disagrees with legal_actions
    s = copy.deepcopy(state)
    del s["current_hand"]
    out.append(s)
    return out


def test_malformed_states_are_refused(sample):
    state = next(s for s in sample if "BR" not in s["current_hand"])
    state = {**state, "current_hand": state["current_hand"]}
    for bad in _broken(state):
        with pytest.raises(InvalidState):
            ADAPTER.encode_candidates(bad)
        with pytest.raises(InvalidState):
            ADAPTER.encode(bad)
        with pytest.raises(InvalidState):
            ADAPTER.rules()(bad)
    with pytest.raises(InvalidState):
        ADAPTER.encode_candidates([])  # not an object
    with pytest.raises(InvalidState):
        ADAPTER.candidate_value(len(state["legal_actions"]), state)


def test_rlcard_key_for_legal_moves_is_read_too(sample):
    state = dict(sample[5])
    del state["legal_actions"]  # RLCard's raw state names them "actions"
    obs, cands = ADAPTER.encode_candidates(state)
    assert len(cands) == len(state["actions"])


def test_any_trace_form_encodes_alike_and_odd_cards_are_refused(sample):
    """JSON lists, RLCard's tuples and numpy seats take different checks (a fast path for
    what the engine sends, entry by entry for the rest): the features must not differ."""
    for state in [s for s in sample if s["trace"]][:30]:
        obs = ADAPTER.encode_candidates(state)[0]
        as_tuples = {**state, "trace": [tuple(t) for t in state["trace"]]}
        numpy_seats = {**state, "trace": [[np.int64(s), m] for s, m in state["trace"]]}
        for other in (as_tuples, numpy_seats):
            np.testing.assert_array_equal(ADAPTER.encode_candidates(other)[0], obs)
    state = sample[10]
    for bad in ({"current_hand": state["current_hand"] + "é"},
                {"others_hand": state["others_hand"] + "1"},
                {"played_cards": ["", "3", 5]},
                {"trace": [[True, "pass"]]},
                {"trace": [[0, ["33"]]]},
                {"legal_actions": [["33"]]}):  # fmt: skip
        with pytest.raises(InvalidState):
            ADAPTER.encode_candidates({**state, **bad})


def test_the_moves_playable_on_a_trace_are_exactly_rlcards(sample):
    """`BEATS` is RLCard's `get_gt_cards` as a table: on every state of random play, the moves
    of the hand it allows are exactly the state's legal moves (pass included or not)."""
    from croupier.games.doudizhu import ACTION_CODES, ACTION_COUNTS, BEATS, move_to_beat

    for state in sample:
        p = ADAPTER.parse(state)
        playable = np.flatnonzero((p["cards"][0][None, :] >= ACTION_COUNTS).all(1))
        beat = move_to_beat(p["trace_moves"])
        allowed = BEATS[0 if beat is None else ACTION_CODES[beat]][ACTION_CODES[playable]]
        assert set(playable[allowed].tolist()) == {ACTION_2_ID[a] for a in state["legal_actions"]}


def test_a_listed_move_the_seat_cannot_play_on_this_trace_is_refused(sample):
    """The review's probe: an engine listed moves the state does not allow (up to 512), each
    kept as a candidate for the whole game. Now every listed move must be playable from the
    hand *on this trace*: pass only when following, a move of the led kind and higher, a bomb
    or the rocket."""
    leading = next(s for s in sample if not s["trace"])  # the landlord's first move
    following = next(
        s for s in sample
        if s["trace"] and s["trace"][-1][1] not in ("pass", "BR")
        and len(s["trace"][-1][1]) == 1 and "3" in s["current_hand"]
    )  # fmt: skip
    cases = [
        (leading, ["pass", *leading["legal_actions"]], "the seat leads"),
        (following, [*following["legal_actions"], "3"], "does not beat"),  # a lower solo
    ]
    hand = following["current_hand"]
    if len(set(hand)) >= 2:  # a pair answering a solo, where the hand has one
        pair = next((c + c for c in hand if hand.count(c) >= 2 and c not in "BR"), None)
        if pair is not None:
            cases.append((following, [*following["legal_actions"], pair], "does not beat"))
    for state, legal, why in cases:
        bad = {**state, "legal_actions": legal}
        bad.pop("actions", None)
        for encode in (ADAPTER.encode_candidates, ADAPTER.encode, ADAPTER.rules()):
            with pytest.raises(InvalidState, match=why):
                encode(bad)
    # The real lists still pass, however long (a 20-card hand leading lists 380 moves).
    for state in sample[:50]:
        ADAPTER.encode_candidates(state)
