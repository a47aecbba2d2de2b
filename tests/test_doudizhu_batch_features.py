"""Doudizhu's features over a whole batch equal the per-state ones, and the served candidate
forward in ONNX Runtime agrees with the module's torch forward (`logits_agree`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from croupier.engine.rlcard_games import RLCardTable
from croupier.games.doudizhu import SERVED_FEATURES, DoudizhuAdapter, FeatureSpec
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import logits_agree

SPECS = (SERVED_FEATURES, FeatureSpec(), FeatureSpec(history=3, move_context=True))


@pytest.fixture(scope="module")
def states() -> list[dict[str, Any]]:
    """Real states of every seat (landlord and peasants, leading and answering), random play."""
    table, out = RLCardTable("doudizhu"), []
    table.reset(3)
    rng = np.random.default_rng(3)
    while len(out) < 120:
        if table.is_over():
            table.reset()
            continue
        state = table.state_json(table.current_player())
        out.append(state)
        table.step(state["legal_actions"][rng.integers(len(state["legal_actions"]))])
    return out


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_batch_features_equal_the_per_state_features(states, spec):
    adapter = DoudizhuAdapter(spec)
    parsed = [adapter.parse(s) for s in states]
    for lo, hi in ((0, 1), (0, 7), (7, 120)):  # one state, a few, many
        batch = parsed[lo:hi]
        np.testing.assert_array_equal(
            adapter.state_features_many(batch), np.stack([adapter.state_features(p) for p in batch])
        )
        np.testing.assert_array_equal(
            adapter.move_features_many(batch),
            np.concatenate([adapter.move_features(p) for p in batch]),
        )
    # What is compared is not trivially equal: states differ, and so do their candidates.
    assert len({adapter.state_features(p).tobytes() for p in parsed}) > 100
    assert adapter.move_features_many(parsed).any()


def test_a_wrong_batch_row_would_be_seen(states):
    """The comparison above can fail: a row built from another seat's view differs."""
    adapter = DoudizhuAdapter(SERVED_FEATURES)
    p = adapter.parse(states[5])
    other = {**p, "self": (p["self"] + 1) % 3}
    assert not np.array_equal(adapter.state_features_many([other])[0], adapter.state_features(p))


@pytest.fixture(scope="module")
def served() -> tuple[PolicyVersions, PolicyVersions, Any]:
    torch.set_num_threads(1)
    adapter = load_adapter("doudizhu")
    pytest.importorskip("onnxruntime")
    onnx = PolicyVersions(adapter, seed=1)
    plain = PolicyVersions(adapter, seed=1, onnx_forward=False)
    return onnx, plain, adapter


def test_onnx_forward_serves_the_module_scores(states, served):
    onnx, plain, adapter = served
    _, module = onnx.resolve(None)
    assert onnx._scorer(module) is not None  # ONNX Runtime serves here
    assert plain._scorer(plain.resolve(None)[1]) is None
    encoded = [adapter.encode(s) for s in states]
    for lo, hi in ((0, 1), (0, 8), (8, 72)):
        obs, cands = [e[0] for e in encoded[lo:hi]], [e[1] for e in encoded[lo:hi]]
        a = onnx.act_rows(module, obs, cands, explore=False)
        b = plain.act_rows(plain.resolve(None)[1], obs, cands, explore=False)
        for x, y in zip(a.logits, b.logits, strict=True):
            assert logits_agree(x, y)  # the exactness decision: float32 rounding
        assert (a.actions == b.actions).all()


def test_onnx_scorer_of_other_weights_is_refused(served):
    """`CandidateScorer.matches` holds a scorer to its module: one made from other weights
    fails it, so a scorer that does not reproduce the module is never served."""
    from croupier.policies.onnx_scorer import CandidateScorer

    onnx, _, adapter = served
    module = onnx.resolve(None)[1]
    other = PolicyVersions(adapter, seed=2, onnx_forward=False).resolve(None)[1]
    scorer = CandidateScorer.of(other)
    assert scorer is not None and scorer.matches(other.net)
    assert not scorer.matches(module.net)


def test_a_batch_request_builds_its_items_features_together(states, tmp_path):
    """decide:batch's learned items are encoded together (`encode_many`); each recorded step
    holds its own copy of what was built (not a view keeping the batch's arrays), equal to
    the item's encode alone; a refused item fails alone."""
    import asyncio

    from croupier.api.components import build_components
    from croupier.config import ServerConfig
    from croupier.sessions.errors import Unprocessable

    torch.set_num_threads(1)
    parts = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path))
    adapter = parts.adapter
    many = [s for s in states if len(s["legal_actions"]) > 1][:6]
    encode_many = adapter.encode_many
    calls: list[int] = []
    adapter.encode_many = lambda xs: calls.append(len(xs)) or encode_many(xs)
    bad = {**many[0], "num_cards_left": [0, 0, 0]}

    async def run() -> list:
        await parts.start()
        try:
            for i, state in enumerate(many):
                seats = dict.fromkeys(("0", "1", "2"), "rules") | {str(state["self"]): "learned"}
                parts.service.create_game("doudizhu", f"g{i}", seats)
            items = [(f"g{i}", str(s["self"]), s, None) for i, s in enumerate(many)]
            return await parts.service.decide_many(
                [*items, ("g0", str(many[0]["self"]), bad, None)]
            )
        finally:
            await parts.stop()

    out = asyncio.run(run())
    assert calls == [len(many) + 1]
    assert isinstance(out[-1], Unprocessable)
    for i, state in enumerate(many):
        assert out[i].policy == "learned" and out[i].action in state["legal_actions"]
        recorder = parts.service.decider.games.get(f"g{i}").recorders[str(state["self"])]
        obs, cands = adapter.encode(state)
        np.testing.assert_array_equal(recorder.obs[0], obs)
        np.testing.assert_array_equal(recorder.masks[0], cands)
        assert recorder.obs[0].base is None and recorder.masks[0].base is None


def _remove(hand: str, move: str) -> str:
    """The hand's card string after `move` (RLCard spells both from low to high)."""
    left = list(hand)
    for card in move:
        left.remove(card)
    return "".join(left)


def test_served_candidates_and_state_match_rlcards_own_card_vectors(states):
    """The served features (the checks' card counts reused: `parse`'s `after`, one bincount
    for all five card strings) against RLCard's own `_cards2array`, string by string: a
    candidate's cards, the hand it leaves and that hand's size; the state's own hand, the
    others' hands and each relative seat's played cards."""
    from rlcard.envs.doudizhu import _cards2array

    adapter = DoudizhuAdapter(SERVED_FEATURES)
    kind = SERVED_FEATURES.candidate_size - 54 - 21 - 54  # cards | kind | hand after | size
    checked = 0
    for state in states:
        p = adapter.parse(state)
        rows = adapter.move_features(p)
        obs = adapter.state_features(p)
        np.testing.assert_array_equal(obs[:54], _cards2array(state["current_hand"]))
        np.testing.assert_array_equal(obs[54:108], _cards2array(state["others_hand"]))
        me = state["self"]
        for r in range(3):
            played = state["played_cards"][(me + r) % 3]
            np.testing.assert_array_equal(obs[163 + 54 * r : 217 + 54 * r], _cards2array(played))
        for row, move in zip(rows, state["legal_actions"], strict=True):
            cards = "" if move == "pass" else move
            left = _remove(state["current_hand"], cards)
            np.testing.assert_array_equal(row[:54], _cards2array(cards))
            np.testing.assert_array_equal(row[54 + kind : 108 + kind], _cards2array(left))
            size = row[108 + kind :]
            assert size.sum() == 1.0 and size[len(left)] == 1.0
            checked += 1
    assert checked > 500  # real lists, many moves: a wrong column would show


def test_the_one_gather_card_vectors_equal_the_row_by_row_ones():
    from croupier.games.doudizhu import _hot_columns, _multi_hot_many

    rng = np.random.default_rng(0)
    counts = np.concatenate([rng.integers(0, 5, (500, 13)), rng.integers(0, 2, (500, 2))], 1)
    np.testing.assert_array_equal(_hot_columns(counts), _multi_hot_many(counts))
    assert not np.array_equal(_hot_columns(counts[::-1]), _multi_hot_many(counts))
