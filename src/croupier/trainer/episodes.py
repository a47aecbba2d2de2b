"""Check an episode record received over the link and convert it to an RLlib episode.

A peer's record is never passed on as it came: every field the learner uses is checked for
type, shape, range and finiteness, and a clean RLlib episode is built from those fields alone
(`rllib_private.episode_from_arrays`). Anything off raises `EpisodeRejected` (counted by the
runner).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier.rllib_private import episode_from_arrays
from croupier.trainer.ingest_log import SAFE_EPISODE_ID
from croupier.trajectories.record import (
    NO_TEACHER,
    TEACHER,
    RecordError,
    read_record,
    record_table,
)
from croupier.trajectories.recorder import MAX_EPISODE_STEPS

# Servers cut their learned seats' episodes at this length (truncated), so none is lost here.
MAX_EPISODE_LEN = MAX_EPISODE_STEPS
# The train batch's column of a search's labels (`trainer/distill.py`): every episode has it
# (-1 where no search labelled a step), so an update's episodes batch alike.
TEACHER_COLUMN = "teacher_action"


class EpisodeRejected(ValueError):
    pass


def _array(value: Any, dtype: type, shape: tuple[int, ...], name: str) -> np.ndarray:
    if isinstance(value, list):
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise EpisodeRejected(f"{name}: {e}") from None
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        raise EpisodeRejected(f"{name} must be a numeric array")
    if value.shape != shape:
        raise EpisodeRejected(f"{name} has shape {value.shape}, expected {shape}")
    value = value.astype(dtype, copy=False)
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise EpisodeRejected(f"{name} has non-finite values")
    return value


def validate_episode(
    value: Any, obs_size: int, num_actions: int, candidate_size: int | None = None
) -> SingleAgentEpisode:
    """A clean, finished `SingleAgentEpisode` from an untrusted episode record (croupier's
    own, `croupier.trajectories.record`; a server of the version before it sends the old
    layout, migrated first). With `candidate_size`, the game scores candidates: the record
    must be a candidate record, at most `num_actions` (= max candidates) a step, padded here
    to its own largest count (`trainer/candidate_slots.py` pads a whole update alike)."""
    try:
        record = read_record(value)
    except RecordError as e:
        raise EpisodeRejected(str(e)) from None
    episode_id = record["id"]
    if not SAFE_EPISODE_ID.fullmatch(episode_id):
        raise EpisodeRejected("id must be 1-128 letters, digits or . _ ~ : -")
    actions = record.get("actions")
    n = len(actions) if isinstance(actions, np.ndarray | list) else 0
    if not 1 <= n <= MAX_EPISODE_LEN:
        raise EpisodeRejected(f"episode length {n} out of range")
    if record.get("terminated") is not True and record.get("truncated") is not True:
        raise EpisodeRejected("only finished episodes are accepted")

    o = _array(record.get("obs"), np.float32, (n + 1, obs_size), "observations")
    if candidate_size is not None or "candidate_counts" in record:
        if candidate_size is None:
            raise EpisodeRejected("a candidate record for a game of fixed-size actions")
        obs, a, logits = _candidates(record, o, n, num_actions, candidate_size)
        counts = obs["candidate_mask"][:n].sum(axis=1).astype(np.int64)
        return _episode(record, obs, None, a, n, logits, _teacher(record, n, counts=counts))
    m = _array(record.get("mask"), np.float32, (n + 1, num_actions), "action_mask")
    if not np.isin(m, (0.0, 1.0)).all() or not (m.sum(axis=1) > 0).all():
        raise EpisodeRejected("action_mask must be 0/1 with a legal action at every step")
    a = _array(actions, np.int64, (n,), "actions")
    if a.min() < 0 or a.max() >= num_actions or not m[np.arange(n), a].all():
        raise EpisodeRejected("an action is out of range or illegal under its mask")
    logits = _array(record.get("logits"), np.float32, (n, num_actions), "logits")
    return _episode(record, o, m, a, n, logits, _teacher(record, n, mask=m))


def _teacher(
    record: dict[str, Any],
    n: int,
    mask: np.ndarray | None = None,
    counts: np.ndarray | None = None,
) -> np.ndarray:
    """The record's search labels (`extra["teacher"]`), each -1 or a legal choice at its
    step (under the step's `mask`, or below its count of candidates); all -1 without."""
    extra = record.get("extra")
    value = extra.get(TEACHER) if isinstance(extra, dict) else None
    if value is None:
        return np.full(n, NO_TEACHER, np.int64)
    t = _array(value, np.int64, (n,), "teacher")
    labelled = t != NO_TEACHER
    steps = np.flatnonzero(labelled)
    if (t[labelled] < 0).any():
        raise EpisodeRejected("a teacher label is -1 (none) or a choice's index")
    if mask is not None:
        if (t[labelled] >= mask.shape[1]).any() or not mask[steps, t[labelled]].all():
            raise EpisodeRejected("a teacher label is out of range or illegal under its mask")
    elif counts is not None and (t[labelled] >= counts[steps]).any():
        raise EpisodeRejected("a teacher label is not one of its step's candidates")
    return t


def _candidates(
    record: dict[str, Any], o: np.ndarray, n: int, slots: int, size: int
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """A candidate record's observation padded to its largest count of candidates (at most
    `slots`), its actions and its logits (padded slots at the most negative float, as the
    module gives them)."""
    counts = _array(record.get("candidate_counts"), np.int64, (n + 1,), "candidate_counts")
    if counts.min() < 1 or counts.max() > slots:
        raise EpisodeRejected(f"candidate counts must be 1..{slots}")
    total = int(counts.sum())
    cands = _array(record.get("candidates"), np.float32, (total, size), "candidates")
    a = _array(record.get("actions"), np.int64, (n,), "actions")
    if a.min() < 0 or (a >= counts[:n]).any():
        raise EpisodeRejected("an action is not one of its step's candidates")
    acting = int(counts[:n].sum())
    flat_logits = _array(record.get("logits"), np.float32, (acting,), "logits")
    width = int(counts.max())
    real = np.arange(width)[None, :] < counts[:, None]  # [n+1, width]
    # Float16 where it holds every feature exactly (doudizhu's: 0/1, sixteenths, 32nds): RLlib
    # copies the whole [N, K_max, F] batch at every epoch's shuffle and every minibatch (~45%
    # of a doudizhu trainer's time, py-spy), and the module scores the real candidates in
    # float32, so the logits are the served ones. The check is a cast and a comparison, exact
    # IEEE arithmetic on every CPU (no kernel choice in it): a game whose features float16
    # cannot hold keeps float32 (tests/test_candidates_served.py).
    half = cands.astype(np.float16)
    exact = bool(np.array_equal(half, cands))
    padded = np.zeros((n + 1, width, size), np.float16 if exact else np.float32)
    padded[real] = half if exact else cands
    logits = np.full((n, width), FLOAT_MIN, np.float32)
    logits[real[:n]] = flat_logits
    obs = {"observations": o, "candidates": padded, "candidate_mask": real.astype(np.float32)}
    return obs, a, logits


def _episode(
    record: dict[str, Any],
    o: np.ndarray | dict[str, np.ndarray],
    m: np.ndarray | None,
    a: np.ndarray,
    n: int,
    logits: np.ndarray,
    teacher: np.ndarray,
) -> SingleAgentEpisode:
    r = _array(record.get("rewards"), np.float32, (n,), "rewards")
    logp = _array(record.get("logp"), np.float32, (n,), "action_logp")
    if (logp > 1e-4).any():
        raise EpisodeRejected("action_logp must be log-probabilities (<= 0)")
    versions = record.get("versions")
    if not isinstance(versions, list) or len(versions) != n:
        raise EpisodeRejected("versions must give one weights version per step")
    try:
        versions = [int(v) for v in versions]
    except (TypeError, ValueError):
        raise EpisodeRejected("versions must be integers") from None

    terminated = record.get("terminated") is True
    return episode_from_arrays(
        episode_id=record["id"],
        observations=o,
        action_masks=m,
        actions=a,
        rewards=r,
        logp=logp,
        logits=logits,
        custom_data={
            "versions": versions,
            "game_id": str(record.get("game_id", ""))[:128],
            "seat": str(record.get("seat", ""))[:64],
            "table": record_table(record),  # the rules anchor judges "rules" tables alone
        },
        terminated=terminated,
        truncated=record.get("truncated") is True and not terminated,
        extra_outputs={TEACHER_COLUMN: teacher},
    )
