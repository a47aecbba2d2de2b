"""A lone candidate decision's sampling (`PolicyVersions._sample_row`) draws what the batch
path (`_sample` over a padded [1, K] block) draws: the same action, log-prob, logits and
validity, and the same random numbers used, for sampled, greedy and unfit rows."""

from __future__ import annotations

import numpy as np
import pytest

from croupier.games.registry import load_adapter
from croupier.policies.learned import FLOAT_MIN, PolicyVersions


@pytest.fixture(scope="module")
def adapter():
    return load_adapter("doudizhu")


def _both(adapter, scores: np.ndarray, explore: bool, greedy: np.ndarray | None):
    fast, slow = PolicyVersions(adapter, seed=11), PolicyVersions(adapter, seed=11)
    one = fast._sample_row(scores, explore, greedy)
    mask = np.ones((1, len(scores)), bool)
    logits = np.full(mask.shape, FLOAT_MIN, np.float32)
    logits[mask] = scores
    many = slow._sample(logits, mask, explore, greedy)
    # The generators moved alike: the next draws agree.
    assert fast._rng.random() == slow._rng.random()
    return one, many


def _rows() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    rows = [(rng.standard_normal(k) * s).astype(np.float32) for k in (2, 3, 17, 60, 400)
            for s in (0.1, 3.0, 40.0)]  # fmt: skip
    rows.append(np.array([1.0, 1.0, 1.0], np.float32))  # a tie
    return rows


@pytest.mark.parametrize("explore", [True, False])
@pytest.mark.parametrize("greedy", [None, False, True])
def test_a_lone_row_samples_as_the_batch_path(adapter, explore, greedy):
    g = None if greedy is None else np.array([greedy])
    for scores in _rows():
        one, many = _both(adapter, scores, explore, g)
        assert one.actions.tolist() == many.actions.tolist()
        np.testing.assert_array_equal(one.logp, many.logp)
        np.testing.assert_array_equal(one.logits[0], many.logits[0])
        assert one.valid is None and many.valid is None


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_lone_unfit_row_is_refused_as_in_the_batch(adapter, bad):
    scores = np.array([0.5, bad, -1.0], np.float32)
    one, many = _both(adapter, scores, True, None)
    assert many.valid is not None and not many.valid[0]
    assert one.valid is not None and one.valid.tolist() == many.valid.tolist()
    assert one.actions.tolist() == many.actions.tolist()


def test_the_comparison_can_fail(adapter):
    """Another seed draws other actions somewhere: the equality above is not trivial."""
    a, b = PolicyVersions(adapter, seed=11), PolicyVersions(adapter, seed=12)
    scores = np.zeros(50, np.float32)
    picks_a = [a._sample_row(scores, True, None).actions[0] for _ in range(5)]
    picks_b = [b._sample_row(scores, True, None).actions[0] for _ in range(5)]
    assert picks_a != picks_b
