"""The learned policy never picks an illegal action: illegal actions have probability 0."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
import torch

from croupier.engine.runner import run_engine
from croupier.games.leduc import LeducAdapter
from croupier.games.uno import UnoAdapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import apply_mask


def random_masks(rng: np.random.Generator, n: int, num_actions: int) -> np.ndarray:
    """Random nonempty masks, many with a single legal action, some with all legal."""
    p = rng.choice([0.05, 0.3, 0.7, 1.0], size=(n, 1))
    mask = (rng.random((n, num_actions)) < p).astype(np.float32)
    mask[np.arange(n), rng.integers(0, num_actions, n)] = 1.0
    return mask


@pytest.fixture(scope="module", params=[LeducAdapter, UnoAdapter], ids=["leduc", "uno"])
def versions(request) -> PolicyVersions:
    torch.set_num_threads(1)
    return PolicyVersions(request.param(), seed=3)


def test_thousands_of_learned_decisions_are_legal(versions):
    adapter = versions.adapter
    _, module = versions.resolve(None)
    rng = np.random.default_rng(0)
    total = 0
    torch.manual_seed(0)
    for _ in range(30):
        n = 100
        # Wide observations too: large logits must not leak probability to masked actions.
        obs = (rng.standard_normal((n, adapter.obs_size)) * rng.choice([1, 100])).astype(np.float32)
        mask = random_masks(rng, n, adapter.num_actions)
        for explore in (True, False):
            res = versions.act(module, obs, mask, explore=explore)
            assert res.actions.shape == (n,)
            assert (mask[np.arange(n), res.actions] == 1.0).all()
            assert np.isfinite(res.logp).all() and (res.logp <= 0).all()
            probs = torch.softmax(torch.from_numpy(res.logits), -1).numpy()
            assert (probs[mask == 0] == 0.0).all()  # exactly zero, not just small
            np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
            logp_all = torch.log_softmax(torch.from_numpy(res.logits), -1).numpy()
            np.testing.assert_allclose(
                res.logp, logp_all[np.arange(n), res.actions], rtol=1e-5, atol=1e-5
            )
            total += n
    assert total == 6000
    # A single legal action is taken with certainty.
    one = np.zeros((1, adapter.num_actions), np.float32)
    one[0, adapter.num_actions - 1] = 1.0
    res = versions.act(module, np.zeros((1, adapter.obs_size), np.float32), one)
    assert res.actions[0] == adapter.num_actions - 1 and res.logp[0] == pytest.approx(0.0)


def test_apply_mask_gives_zero_probability():
    logits = torch.tensor([[50.0, -50.0, 3.0, 1e6], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    masked = apply_mask(logits, mask)
    probs = torch.softmax(masked, -1)
    assert (probs[mask == 0] == 0).all()
    assert torch.isfinite(torch.log_softmax(masked, -1)[mask == 1]).all()
    assert probs[1, 0] == 1.0
    # Legal logits are unchanged.
    assert torch.equal(masked[mask == 1], logits[mask == 1])


def test_learned_decisions_over_http_are_legal(leduc_server):
    """~1000 learned decisions through the real engine (it fails a hand on an illegal action)."""
    before = httpx.get(leduc_server + "/healthz").json()["decisions"].get("learned", 0)
    summary = asyncio.run(
        run_engine(leduc_server, "leduc-holdem", 16, ["learned", "learned"], 420, None, seed=9)
    )
    assert summary.errors == 0, summary.error_samples
    assert summary.hands == 420
    after = httpx.get(leduc_server + "/healthz").json()["decisions"]["learned"]
    assert after - before == summary.decisions
    assert summary.decisions >= 900
