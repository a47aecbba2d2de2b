"""Whole hands' returns beside their first steps (`trainer/hand_returns.py`), and the rules
anchor's gain read from them through a real PPO update: one row a whole hand, its return less
the clone's value at its first step; a chunk that began mid-hand or ends unfinished adds none."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from croupier.policies.learned import module_weights
from croupier.policies.module import ModelSpec
from croupier.policies.tables import RULES_TABLE as RULES
from croupier.trainer import rules_anchor as ra
from croupier.trainer.algo import Hyper, base_config, learner_pieces
from croupier.trainer.candidate_slots import CandidateSlots
from croupier.trainer.hand_returns import HAND_RETURN, HandReturns, hand_return_column
from croupier.trainer.rules_tables import RulesTables

OBS, SLOTS = 5, 3
SPACE = gym.spaces.Dict({
    "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
    "action_mask": gym.spaces.Box(0.0, 1.0, (SLOTS,), np.float32),
})  # fmt: skip
ACTION = gym.spaces.Discrete(SLOTS)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_the_column_holds_the_discounted_return_at_the_first_step_only():
    column = hand_return_column(np.array([0.0, 1.0, 2.0]), 0.5, whole=True, steps=4)
    assert column[0] == pytest.approx(0.5 * 1.0 + 0.25 * 2.0)
    assert np.isnan(column[1:]).all()
    assert np.isnan(hand_return_column(np.array([1.0]), 1.0, whole=False, steps=2)).all()
    assert hand_return_column(np.array([]), 1.0, whole=True, steps=0).shape == (0,)


def _episode(
    seed: int,
    steps: int,
    payoff: float,
    t_started: int = 0,
    done: bool = True,
    table: str | None = RULES,
):
    rng = np.random.default_rng(seed)
    mask = np.ones((steps + 1, SLOTS), np.float32)
    logits = rng.normal(size=(steps, SLOTS)).astype(np.float32)
    actions = rng.integers(SLOTS, size=steps)
    logp = torch.log_softmax(torch.from_numpy(logits), -1).numpy()[np.arange(steps), actions]
    episode = SingleAgentEpisode(
        observations=[
            {"observations": o, "action_mask": m}
            for o, m in zip(rng.normal(size=(steps + 1, OBS)).astype(np.float32), mask, strict=True)
        ],
        actions=list(actions),
        rewards=[0.0] * (steps - 1) + [payoff],
        extra_model_outputs={
            Columns.ACTION_LOGP: list(logp.astype(np.float32)),
            Columns.ACTION_DIST_INPUTS: list(logits),
        },
        terminated=done,
        t_started=t_started,
        len_lookback_buffer=0,
    ).to_numpy()
    if table is not None:  # as `trainer/episodes.py` keeps a record's table
        episode.custom_data["table"] = table
    return episode


def test_the_piece_marks_whole_hands_only():
    episodes = [
        _episode(0, 3, 2.0),
        _episode(1, 2, 1.0, t_started=4),
        _episode(2, 2, 1.0, done=False),
    ]
    batch: dict = {}
    HandReturns(gamma=0.9)(rl_module=None, batch=batch, episodes=episodes)
    columns = [np.concatenate(v) for v in batch[HAND_RETURN].values()]
    assert [len(c) for c in columns] == [3, 2, 2]
    assert columns[0][0] == pytest.approx(0.81 * 2.0) and np.isnan(columns[0][1:]).all()
    assert np.isnan(columns[1]).all() and np.isnan(columns[2]).all()


def test_the_trainers_pieces():
    assert [type(p) for p in learner_pieces(gamma=1.0)] == [HandReturns, RulesTables]
    pieces = partial(learner_pieces, gamma=0.9, candidate_slots=True)(None, None)
    assert [type(p) for p in pieces] == [CandidateSlots, HandReturns, RulesTables]
    assert pieces[1].gamma == 0.9 and pieces[2].untagged == ""


@pytest.mark.integration  # builds an RLlib learner in-process (no Ray session)
def test_a_ppo_update_measures_the_gain_on_whole_hands_first_steps():
    spec = ModelSpec(algo="ppo", hiddens=[8])
    hyper = Hyper(train_batch_size=20, minibatch_size=20, num_epochs=2, gamma=1.0)
    torch.manual_seed(0)
    learner = base_config(spec, hyper, SPACE, ACTION).build_learner(
        spaces={DEFAULT_MODULE_ID: (SPACE, ACTION)}
    )
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    clone = module_weights(module)
    learner.set_rules_reference(clone, DEFAULT_MODULE_ID)
    whole = [_episode(i, 2 + i, payoff) for i, payoff in enumerate((1.0, -2.0, 3.0))]
    # Pieces of hands, and whole hands at other tables (a best response's, a past version's,
    # one that does not say): none is the gain's row.
    others = [_episode(7, 3, 5.0, t_started=3), _episode(8, 3, 5.0, done=False),
              _episode(9, 2, -9.0, table="best-response"), _episode(10, 3, -9.0, table="league"),
              _episode(11, 2, -9.0, table=None)]  # fmt: skip
    firsts = {
        "observations": torch.from_numpy(
            np.stack([e.get_observations(0)["observations"] for e in whole])
        ),
        "action_mask": torch.ones(3, SLOTS),
    }
    with torch.no_grad():  # the clone's values at the hands' first steps, before the update
        batch = {Columns.OBS: firsts}
        values = module.compute_values(batch).numpy()
    result = learner.update(episodes=[*whole, *others], num_epochs=2, minibatch_size=20)
    stats = {k: float(v.peek()) for k, v in result[DEFAULT_MODULE_ID].items()}
    learned = ra.learner_stats({"learners": {DEFAULT_MODULE_ID: stats}}, epochs=2)
    assert stats[ra.GAIN_ROWS_KEY] == 6  # three whole hands, each seen in both epochs
    diff = np.array([1.0, -2.0, 3.0]) - values
    assert learned["gain"] == pytest.approx(diff.mean(), abs=1e-5)
    assert learned["gain_se"] == pytest.approx(diff.std() / 3**0.5, rel=1e-4)
    # Scaled by the clone's `value_scale`: return - scale * value, its spread likewise.
    scaled = ra.learner_stats({"learners": {DEFAULT_MODULE_ID: stats}}, 2, value_scale=0.25)
    diff = np.array([1.0, -2.0, 3.0]) - 0.25 * values
    assert scaled["gain"] == pytest.approx(diff.mean(), abs=1e-5)
    assert scaled["gain_se"] == pytest.approx(diff.std() / 3**0.5, rel=1e-4)
