"""Candidate episodes padded to their own largest count, then every episode of an update to
the update's (`trainer/candidate_slots.py`): the same learner update as padding every step to
the game's bound, at a fraction of the bytes."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier import rllib_private
from croupier.policies.candidates import candidate_module_spec
from croupier.trainer.algo import learner_pieces
from croupier.trainer.candidate_slots import CandidateSlots, pad_slots

pytestmark = pytest.mark.integration  # builds an RLlib learner in-process, no Ray session

OBS, FEAT, BOUND = 6, 3, 16


def _episode(i: int, counts: list[int], rng: np.random.Generator, width: int):
    """A finished candidate episode whose steps list `counts` candidates, padded to `width`."""
    n = len(counts) - 1
    mask = (np.arange(width)[None, :] < np.asarray(counts)[:, None]).astype(np.float32)
    # Sixteenths: exact in float16 too, as the trainer may keep them (`trainer/episodes.py`).
    cands = (np.round(rng.normal(size=(n + 1, width, FEAT)) * 16) / 16).astype(np.float32)
    cands *= mask[..., None]
    logits = np.where(mask[:n] > 0, rng.normal(size=(n, width)), FLOAT_MIN).astype(np.float32)
    actions = np.asarray([rng.integers(c) for c in counts[:n]], np.int64)
    logp = torch.log_softmax(torch.from_numpy(logits), -1).numpy()[np.arange(n), actions]
    return rllib_private.episode_from_arrays(
        episode_id=f"e{i}",
        observations={
            "observations": rng.normal(size=(n + 1, OBS)).astype(np.float32),
            "candidates": cands,
            "candidate_mask": mask,
        },  # fmt: skip
        action_masks=None,
        actions=actions,
        rewards=np.r_[np.zeros(n - 1), 1.0 if i % 2 else -1.0].astype(np.float32),
        logp=logp.astype(np.float32),
        logits=logits,
        custom_data={},
        terminated=True,
        truncated=False,
    )


def _episodes(width: int | None, half: bool = False) -> list:
    """The same three episodes (K up to 2, 5 and 9), at their own width or at `width`, their
    candidates float32 or (`half`) float16."""
    out = []
    for i, counts in enumerate(([2, 1, 2, 1], [5, 3, 4, 1], [9, 2, 1])):
        own = _episode(i, counts, np.random.default_rng(i), max(counts))
        obs, logits = rllib_private.candidate_arrays(own)
        if half:
            obs = {**obs, "candidates": obs["candidates"].astype(np.float16)}
        if width is not None:  # the same arrays padded to the bound
            obs, logits = pad_slots(obs, logits, width)
        rllib_private.replace_candidate_arrays(own, obs, logits)
        out.append(own)
    return out


def test_an_update_pads_every_episode_to_its_largest_count():
    episodes = _episodes(None)
    CandidateSlots()(rl_module=None, batch={}, episodes=episodes)
    for e, counts in zip(episodes, ([2, 1, 2, 1], [5, 3, 4, 1], [9, 2, 1]), strict=True):
        obs, logits = rllib_private.candidate_arrays(e)
        assert obs["candidates"].shape == (len(counts), 9, FEAT) and logits.shape[1] == 9
        np.testing.assert_array_equal(obs["candidate_mask"].sum(1), counts)
        assert (logits[obs["candidate_mask"][:-1] == 0] == FLOAT_MIN).all()
        assert not obs["candidates"][obs["candidate_mask"] == 0].any()
    # What it replaces must keep the episode's length.
    obs, logits = rllib_private.candidate_arrays(episodes[0])
    with pytest.raises(ValueError):
        rllib_private.replace_candidate_arrays(episodes[0], obs, logits[:-1])


def _learner(connector: bool):
    space = gym.spaces.Dict({
        "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
        "candidates": gym.spaces.Box(-np.inf, np.inf, (BOUND, FEAT), np.float32),
        "candidate_mask": gym.spaces.Box(0.0, 1.0, (BOUND,), np.float32),
    })  # fmt: skip
    action = gym.spaces.Discrete(BOUND)
    config = (
        PPOConfig()
        .rl_module(rl_module_spec=candidate_module_spec("ppo", space, action, [8], 8))
        .training(
            lr=1e-2,
            gamma=1.0,
            lambda_=0.95,
            use_kl_loss=False,
            train_batch_size_per_learner=12,
            num_epochs=1,
            minibatch_size=12,
        )  # fmt: skip
        .learners(
            learner_connector=partial(learner_pieces, candidate_slots=True) if connector else None
        )
    )
    torch.manual_seed(0)
    return config.build_learner(spaces={"default_policy": (space, action)})


def test_the_learner_update_is_the_same_as_at_the_games_bound():
    torch.set_num_threads(1)
    weights = []
    # At the bound; padded by the update; padded by the update with float16 candidates.
    for connector, width, half in ((False, BOUND, False), (True, None, False), (True, None, True)):
        learner = _learner(connector)
        np.random.seed(0)
        learner.update(episodes=_episodes(width, half), num_epochs=1, minibatch_size=12)
        weights.append({k: v.detach().clone() for k, v in learner.module["default_policy"]
                        .state_dict().items()})  # fmt: skip
    before, after, after_half = weights
    assert before.keys() == after.keys() == after_half.keys()
    for k in before:
        torch.testing.assert_close(after[k], before[k], rtol=1e-5, atol=1e-6)
        assert torch.equal(after_half[k], after[k])  # the same values, half the bytes
    start = _learner(False).module["default_policy"].state_dict()
    assert any(not torch.equal(start[k], before[k]) for k in before)  # it did train
