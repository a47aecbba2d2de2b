"""A forced move (one legal action) of a model's seat: answered at once, no forward, not
recorded; its reward lands on the seat's last recorded step."""

from __future__ import annotations

import asyncio

import numpy as np

from croupier.api.components import build_components
from croupier.config import ServerConfig


def _state(legal: list[int]) -> dict:
    return {"obs": [0.1, -0.2, 0.3], "legal_actions": legal}


def test_a_forced_move_is_answered_without_the_model_and_not_recorded(tmp_path) -> None:
    parts = build_components(
        ServerConfig(game="vector", obs_size=3, num_actions=4, data_dir=tmp_path, seed=0)
    )
    service = parts.service

    async def play() -> tuple[list, dict, list]:
        await parts.start()
        try:
            service.create_game("vector", "g", {"0": "learned", "1": "random"})
            answers = [await service.decide("g", "0", _state([2]))]  # forced, first: no step
            answers.append(await service.decide("g", "0", _state([0, 1, 3]), reward=0.25))
            answers.append(await service.decide("g", "0", _state([3]), reward=0.5))  # forced
            answers.append(await service.decide("g", "0", _state([0, 1]), reward=1.0))
            stats = parts.batcher.stats()
            await service.end_game("g", {"0": 2.0, "1": -2.0})
            return answers, stats, parts.outbox.take()
        finally:
            await parts.stop()

    answers, stats, episodes = asyncio.run(play())
    assert [a.action for a in answers[::2]] == [2, 3]  # the only legal action
    assert all(a.policy == "learned" and not a.fallback for a in answers)
    assert answers[0].version == answers[1].version  # the version the seat plays
    assert stats["decisions"] == 2  # only the two real choices went through the model
    assert service.health()["forced_moves"] == 2
    (episode,) = episodes
    assert len(episode["actions"]) == 2  # the forced moves are not steps
    # rewards: step 1 got the forced move's 0.5 and the next decision's 1.0; step 2 the end
    np.testing.assert_allclose(episode["rewards"], [1.5, 2.0])
