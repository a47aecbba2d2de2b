"""Expert iteration's pieces: a search's labels recorded with the steps, carried to the learner
batch, checked on the way in, and the learner's cross-entropy toward them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from croupier.policies.module import ModelSpec
from croupier.trainer.algo import Hyper, base_config
from croupier.trainer.distill import AGREE_KEY, CE_KEY, distill_terms, teacher_rows
from croupier.trainer.episodes import TEACHER_COLUMN, EpisodeRejected, validate_episode
from croupier.trajectories.codec import decode_value, encode_value
from croupier.trajectories.record import TEACHER
from croupier.trajectories.recorder import SeatRecorder

OBS, ACTIONS = 4, 3


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _recorded(steps: int = 4, labels: dict[int, int] | None = None) -> dict:
    rec = SeatRecorder("g", "0", "learned")
    mask = np.array([1, 1, 0], np.float32)
    for t in range(steps):
        rec.add_decision(np.full(OBS, t, np.float32), mask, t % 2, -0.7, np.zeros(ACTIONS), 1)
    for step, choice in (labels or {}).items():
        rec.label(step, choice)
    record = rec.close(1.0, (np.zeros(OBS, np.float32), mask))
    assert record is not None
    return record


@pytest.mark.unit
def test_labels_go_with_their_steps_and_reach_the_episode_column():
    record = _recorded(labels={1: 0, 3: 1, 9: 1})  # step 9 is not one of the episode's
    assert record["extra"][TEACHER].tolist() == [-1, 0, -1, 1]
    episode = validate_episode(record, OBS, ACTIONS)
    column = episode.get_extra_model_outputs(TEACHER_COLUMN, slice(0, len(episode)))
    assert np.asarray(column).tolist() == [-1, 0, -1, 1]
    # A record without labels (every server before them) still batches alike: all -1.
    plain = validate_episode(_recorded(), OBS, ACTIONS)
    column = plain.get_extra_model_outputs(TEACHER_COLUMN, slice(0, len(plain)))
    assert np.asarray(column).tolist() == [-1] * 4


@pytest.mark.unit
def test_labels_survive_the_spool_and_link_codec():
    record = decode_value(encode_value(_recorded(labels={0: 1})))
    episode = validate_episode(record, OBS, ACTIONS)
    column = episode.get_extra_model_outputs(TEACHER_COLUMN, slice(0, len(episode)))
    assert np.asarray(column).tolist() == [1, -1, -1, -1]


@pytest.mark.unit
def test_a_candidate_games_label_is_one_of_its_steps_candidates():
    rec = SeatRecorder("g", "0", "learned")
    for t, k in enumerate((3, 1, 2)):
        rec.add_decision(np.zeros(OBS, np.float32), np.ones((k, 2), np.float32), 0, -0.5,
                         np.zeros(k, np.float32), 1)  # fmt: skip
        rec.label(t, k - 1)
    record = rec.close(0.0, (np.zeros(OBS, np.float32), np.ones((2, 2), np.float32)))
    episode = validate_episode(record, OBS, 4, candidate_size=2)
    column = episode.get_extra_model_outputs(TEACHER_COLUMN, slice(0, len(episode)))
    assert np.asarray(column).tolist() == [2, 0, 1]
    record["extra"][TEACHER] = np.array([2, 1, 1], np.int64)  # step 1 lists one candidate
    with pytest.raises(EpisodeRejected, match="candidates"):
        validate_episode(record, OBS, 4, candidate_size=2)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("labels", "why"),
    [
        ([-1, 2, -1, -1], "illegal"),
        ([-1, 5, -1, -1], "out of range"),
        ([-1, -3, -1, -1], "index"),
        ([0, 0], "shape"),
    ],  # fmt: skip
)
def test_a_label_that_is_not_a_legal_choice_is_refused(labels, why):
    record = _recorded()
    record["extra"] = {TEACHER: np.asarray(labels, np.int64)}
    with pytest.raises(EpisodeRejected, match=why):
        validate_episode(record, OBS, ACTIONS)


@pytest.mark.unit
def test_the_cross_entropy_is_the_labelled_rows_own_and_skips_the_rest():
    logits = torch.tensor([[2.0, 0.0, -1e30], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0], [0.0, 0.0, 3.0]])
    teacher = torch.tensor([0, 1, -1, 0])
    batch = {TEACHER_COLUMN: teacher, Columns.LOSS_MASK: torch.tensor([True, True, True, False])}
    rows = teacher_rows(batch)
    assert rows.tolist() == [True, True, False, False]  # no label; RLlib's padding
    ce, agree = distill_terms(logits, teacher, rows)
    expected = -(torch.log_softmax(logits[0], -1)[0] + torch.log_softmax(logits[1], -1)[1]) / 2
    assert float(ce) == pytest.approx(float(expected), rel=1e-6)
    assert float(agree) == 1.0


def _learner(coeff: float) -> object:
    space = gym.spaces.Dict({
        "observations": gym.spaces.Box(-10.0, 10.0, (OBS,), np.float32),
        "action_mask": gym.spaces.Box(0.0, 1.0, (ACTIONS,), np.float32),
    })  # fmt: skip
    action = gym.spaces.Discrete(ACTIONS)
    hyper = Hyper(train_batch_size=32, minibatch_size=32, distill_coeff=coeff, lr=1e-2)
    config = base_config(ModelSpec(algo="ppo", hiddens=[16]), hyper, space, action)
    torch.manual_seed(0)
    return config.build_learner(spaces={DEFAULT_MODULE_ID: (space, action)})


def _labelled_batch(module: object, rows: int = 32) -> dict:
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.normal(size=(rows, OBS)).astype(np.float32))
    batch = {Columns.OBS: {"observations": obs, "action_mask": torch.ones(rows, ACTIONS)}}
    with torch.no_grad():
        logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    # The search's choice: move 2 where the first feature is positive, else move 1; half the
    # rows labelled. Zero advantages: PPO's own term pulls nowhere, the labels alone teach.
    teacher = torch.where(obs[:, 0] > 0, 2, 1)
    teacher[::2] = -1
    return batch | {
        Columns.ACTIONS: torch.zeros(rows, dtype=torch.int64),
        Columns.ACTION_DIST_INPUTS: logits,
        Columns.ACTION_LOGP: torch.log_softmax(logits, -1)[:, 0],
        Postprocessing.ADVANTAGES: torch.zeros(rows),
        Postprocessing.VALUE_TARGETS: torch.zeros(rows),
        TEACHER_COLUMN: teacher,
    }


@pytest.mark.integration  # builds RLlib learners in-process (no Ray session)
def test_the_learner_adds_coeff_times_the_cross_entropy_and_learns_the_labels():
    learner = _learner(0.5)
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = _labelled_batch(module)
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)

    def loss(with_labels: bool) -> torch.Tensor:
        b = batch if with_labels else {k: v for k, v in batch.items() if k != TEACHER_COLUMN}
        fwd = module.forward_train(b)
        return learner.compute_loss_for_module(
            module_id=DEFAULT_MODULE_ID, config=config, batch=b, fwd_out=fwd
        )

    with torch.no_grad():
        fwd = module.forward_train(batch)
        ce, _ = distill_terms(
            fwd[Columns.ACTION_DIST_INPUTS], batch[TEACHER_COLUMN], teacher_rows(batch)
        )
        assert float(loss(True) - loss(False)) == pytest.approx(0.5 * float(ce), rel=1e-4)
    # Gradient steps on this loss alone teach the labelled rows' moves (and generalise to the
    # unlabelled half: the same rule).
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)
    for _ in range(150):
        optimizer.zero_grad()
        loss(True).backward()
        optimizer.step()
    with torch.no_grad():
        logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    rule = torch.where(batch[Columns.OBS]["observations"][:, 0] > 0, 2, 1)
    assert float((logits.argmax(-1) == rule).float().mean()) >= 0.9
    logged = learner.metrics.peek((DEFAULT_MODULE_ID, AGREE_KEY))
    assert float(logged) >= 0.9 and float(learner.metrics.peek((DEFAULT_MODULE_ID, CE_KEY))) < 0.5


@pytest.mark.integration
def test_without_a_coefficient_the_labels_change_nothing():
    learner = _learner(0.0)
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = _labelled_batch(module)
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)
    fwd = module.forward_train(batch)
    with_labels = learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID, config=config, batch=batch, fwd_out=fwd
    )
    plain = {k: v for k, v in batch.items() if k != TEACHER_COLUMN}
    without = learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID, config=config, batch=plain, fwd_out=fwd
    )
    assert float(with_labels.detach()) == pytest.approx(float(without.detach()), rel=1e-6)
