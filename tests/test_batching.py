"""Dynamic batching: concurrent learned decisions share forward passes."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import torch

from croupier.games.leduc import LeducAdapter
from croupier.policies.learned import PolicyVersions
from croupier.sessions.batcher import InferenceBatcher

N_GAMES = 200


@pytest.fixture(scope="module")
def versions() -> PolicyVersions:
    torch.set_num_threads(1)
    return PolicyVersions(LeducAdapter(), seed=0)


def random_inputs(n: int, adapter, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, adapter.obs_size)).astype(np.float32)
    mask = (rng.random((n, adapter.num_actions)) < 0.5).astype(np.float32)
    mask[np.arange(n), rng.integers(0, adapter.num_actions, n)] = 1.0  # never empty
    return obs, mask


def test_concurrent_http_decides_are_batched(inprocess, leduc_states):
    states = [leduc_states[i % len(leduc_states)] for i in range(N_GAMES)]

    async def body(client, service):
        games = []
        for _ in range(N_GAMES):
            r = await client.post(
                "/v1/games", json={"game": "leduc-holdem", "seats": {"0": "learned", "1": "rules"}}
            )
            assert r.status_code == 201
            games.append(r.json()["game_id"])
        before = service.batcher.stats()
        responses = await asyncio.gather(
            *(
                client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
                for gid, state in zip(games, states, strict=True)
            )
        )
        health = (await client.get("/healthz")).json()
        return before, responses, health

    before, responses, health = inprocess(body)
    assert before["decisions"] == 0
    for r, state in zip(responses, states, strict=True):
        assert r.status_code == 200, r.text
        assert r.json()["action"] in state["legal_actions"]
        assert r.json()["policy"] == "learned"
    batcher = health["batcher"]
    assert batcher["decisions"] == N_GAMES
    assert health["decisions"]["learned"] == N_GAMES
    assert batcher["forward_passes"] <= N_GAMES // 2, batcher
    assert batcher["max_batch_seen"] > 1


def _run_batcher(versions, requests, **kwargs):
    """Start a batcher, submit every (obs, mask, version) at once, return (results, stats)."""

    async def main():
        batcher = InferenceBatcher(versions, **kwargs)
        await batcher.start()
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(batcher.decide(o, m, v) for o, m, v in requests)), 30
            )
        finally:
            await batcher.stop()
        return results, batcher.stats()

    return asyncio.run(main())


def assert_legal(results, masks):
    for res, mask in zip(results, masks, strict=True):
        assert mask[res.action] == 1.0
        assert res.logp <= 0.0 and np.isfinite(res.logp)
        logp_all = torch.log_softmax(torch.from_numpy(res.logits), -1).numpy()
        assert res.logp == pytest.approx(float(logp_all[res.action]), abs=1e-5)


def test_batcher_batches_simultaneous_requests(versions):
    obs, mask = random_inputs(64, versions.adapter, seed=1)
    results, stats = _run_batcher(versions, [(o, m, None) for o, m in zip(obs, mask, strict=True)])
    assert len(results) == 64
    assert_legal(results, mask)
    assert stats["decisions"] == 64
    assert stats["forward_passes"] < 64
    assert stats["max_batch_seen"] > 1
    assert all(r.version == 0 for r in results)


def test_batcher_respects_max_batch(versions):
    obs, mask = random_inputs(64, versions.adapter, seed=2)
    results, stats = _run_batcher(
        versions, [(o, m, None) for o, m in zip(obs, mask, strict=True)], max_batch=8
    )
    assert_legal(results, mask)
    assert stats["max_batch_seen"] <= 8
    assert stats["forward_passes"] >= 8


def test_batcher_max_wait_collects_staggered_requests(versions):
    obs, mask = random_inputs(16, versions.adapter, seed=3)

    async def main(max_wait_ms):
        batcher = InferenceBatcher(versions, max_wait_ms=max_wait_ms)
        await batcher.start()

        async def late(i):
            await asyncio.sleep(0.002 * i)  # arrive one by one, 2 ms apart
            return await batcher.decide(obs[i], mask[i], None)

        try:
            results = await asyncio.wait_for(asyncio.gather(*(late(i) for i in range(16))), 30)
        finally:
            await batcher.stop()
        return results, batcher.stats()

    results, stats = asyncio.run(main(300.0))
    assert_legal(results, mask)
    assert stats["decisions"] == 16
    assert stats["max_wait_ms"] == pytest.approx(300.0)
    # Everything arrives within ~30 ms, well inside one 300 ms wait.
    assert stats["forward_passes"] <= 2, stats

    # A lone request with a wait configured is still answered (after about the wait).
    async def lone():
        batcher = InferenceBatcher(versions, max_wait_ms=5.0)
        await batcher.start()
        try:
            return await asyncio.wait_for(batcher.decide(obs[0], mask[0], None), 10)
        finally:
            await batcher.stop()

    assert mask[0][asyncio.run(lone()).action] == 1.0


def test_batcher_groups_pinned_versions():
    adapter = LeducAdapter()
    versions = PolicyVersions(adapter, seed=0)
    weights = versions.weights(0)
    rng = np.random.default_rng(5)
    changed = {k: (v + rng.standard_normal(v.shape).astype(v.dtype)) for k, v in weights.items()}
    assert versions.install(1, changed)
    assert versions.versions() == [0, 1] and versions.latest == 1

    obs, mask = random_inputs(64, adapter, seed=6)
    pinned = [0 if i % 2 == 0 else None for i in range(64)]
    results, stats = _run_batcher(versions, list(zip(obs, mask, pinned, strict=True)))
    assert_legal(results, mask)
    assert [r.version for r in results] == [0 if p == 0 else 1 for p in pinned]
    # Submitted together, they form one batch: one forward per version present in it.
    assert stats["max_batch_seen"] == 64, stats
    assert stats["forward_passes"] == 2, stats

    # Each row got the logits of the weights it was served with.
    for v in (0, 1):
        rows = [i for i, r in enumerate(results) if r.version == v]
        _, module = versions.resolve(v)
        want = versions.act(module, obs[rows], mask[rows]).logits
        got = np.stack([results[i].logits for i in rows])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        # ... and not those of the other version (the two do differ).
        _, other = versions.resolve(1 - v)
        wrong = versions.act(other, obs[rows], mask[rows]).logits
        legal = mask[rows].astype(bool)
        assert not np.allclose(got[legal], wrong[legal], atol=1e-3)


def test_small_batches_run_on_the_forward_thread_big_ones_inline(versions):
    """The forward thread keeps the event loop answering during a forward; a batch as big as
    `forward_inline_from` means a saturated loop, where it runs inline instead. A batch
    request's items are forwarded at once on the caller's thread, `max_batch` at a time, and
    answered in order."""
    adapter = versions.adapter
    act = versions.act
    threads: list[tuple[int, str]] = []

    def recording_act(module, obs, mask, *args, **kwargs):
        threads.append((len(obs), threading.current_thread().name))
        return act(module, obs, mask, *args, **kwargs)

    async def main():
        batcher = InferenceBatcher(
            versions, max_batch=16, forward_thread=True, forward_inline_from=8
        )
        versions.act = recording_act
        await batcher.start()
        try:
            obs, mask = random_inputs(20, adapter, seed=5)
            await batcher.decide(obs[0], mask[0], None)  # alone: the thread
            pairs = zip(obs, mask, strict=True)
            await asyncio.gather(*(batcher.decide(o, m, None) for o, m in pairs))
            rows = [(o, m, None) for o, m in zip(obs, mask, strict=True)]
            now = batcher.forward_now(rows)  # a batch request's items
            _, module = versions.resolve(None)
            alone = [act(module, obs[i : i + 1], mask[i : i + 1]).logits[0] for i in range(20)]
            return now, alone, mask
        finally:
            await batcher.stop()
            del versions.act

    now, alone, mask = asyncio.run(main())
    assert threads[0] == (1, threads[0][1]) and threads[0][1].startswith("croupier-forward")
    assert threads[1] == (16, threading.main_thread().name)  # max_batch 16 of 20: inline
    assert threads[2] == (4, threads[2][1]) and threads[2][1].startswith("croupier-forward")
    here = threading.main_thread().name
    assert threads[3:] == [(16, here), (4, here)]  # forward_now: two chunks, this thread
    assert len(now) == 20
    for decision, logits, m in zip(now, alone, mask, strict=True):  # in the rows' order
        np.testing.assert_allclose(decision.logits, logits, rtol=1e-5, atol=1e-5)
        assert m[decision.action] == 1


def test_a_batch_of_few_scored_rows_runs_inline(versions):
    """A candidate game's batch of fewer than `forward_thread_from_candidates` candidates costs less
    than the thread's round trip: it runs inline; from there to `forward_inline_from`
    decisions, on the thread; past that, inline again. A fixed action set's batch (leduc) is
    not counted in rows: the thread, as before."""
    from croupier.sessions.batcher import _Request

    batcher = InferenceBatcher(
        versions, forward_thread=True, forward_inline_from=8, forward_thread_from_candidates=5
    )
    try:
        obs = np.zeros(3, np.float32)

        def batch(*rows: int) -> list[_Request]:  # per decision: candidates (0: a mask)
            return [
                _Request(obs, np.zeros((k, 2), np.float32) if k else np.ones(4, np.float32),
                         None, None, 0.0)  # type: ignore[arg-type]
                for k in rows
            ]  # fmt: skip

        assert not batcher._on_thread(batch(4))  # one decision, 4 candidates
        assert batcher._on_thread(batch(5))  # 5 candidates
        assert batcher._on_thread(batch(2, 3))  # 5 candidates in two decisions
        assert batcher._on_thread(batch(0))  # a fixed action set's decision: as before
        assert batcher._on_thread(batch(0, 0, 0, 0, 0, 0, 0))
        assert not batcher._on_thread(batch(*[9] * 8))  # forward_inline_from decisions
        batcher.forward_thread = False
        assert not batcher._on_thread(batch(50))
    finally:
        batcher._executor.shutdown(wait=False)
