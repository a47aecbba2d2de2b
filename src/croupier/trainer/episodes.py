"""Check an episode state received over the link and rebuild it as an RLlib episode.

A peer's dict is never passed on as it came: every field the learner uses is checked for type,
shape, range and finiteness, and a clean state is rebuilt from those fields alone before
`SingleAgentEpisode.from_state`. Anything off raises `EpisodeRejected` (counted by the runner).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from croupier.trainer.ingest_log import SAFE_EPISODE_ID
from croupier.trajectories.recorder import MAX_EPISODE_STEPS, episode_state

# Servers cut their learned seats' episodes at this length (truncated), so none is lost here.
MAX_EPISODE_LEN = MAX_EPISODE_STEPS


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


def _buffer_data(state: dict[str, Any], key: str) -> Any:
    buf = state.get(key)
    if not isinstance(buf, dict) or "data" not in buf:
        raise EpisodeRejected(f"missing buffer {key!r}")
    return buf["data"]


def validate_episode(state: Any, obs_size: int, num_actions: int) -> SingleAgentEpisode:
    """A clean, finished `SingleAgentEpisode` from an untrusted state dict."""
    if not isinstance(state, dict):
        raise EpisodeRejected("an episode must be a map")
    try:
        t, t0 = int(state["t"]), int(state["t_started"])
        episode_id = state["id_"]
    except (KeyError, TypeError, ValueError) as e:
        raise EpisodeRejected(f"bad episode header: {e}") from None
    n = t - t0
    if not isinstance(episode_id, str) or not SAFE_EPISODE_ID.fullmatch(episode_id):
        raise EpisodeRejected("id_ must be 1-128 letters, digits or . _ ~ : -")
    if not 1 <= n <= MAX_EPISODE_LEN or t0 != 0:
        raise EpisodeRejected(f"episode length {n} out of range (t_started must be 0)")
    if state.get("is_terminated") is not True and state.get("is_truncated") is not True:
        raise EpisodeRejected("only finished episodes are accepted")

    obs = _buffer_data(state, "observations")
    if not isinstance(obs, dict) or set(obs) != {"observations", "action_mask"}:
        raise EpisodeRejected("observations must hold 'observations' and 'action_mask'")
    o = _array(obs["observations"], np.float32, (n + 1, obs_size), "observations")
    m = _array(obs["action_mask"], np.float32, (n + 1, num_actions), "action_mask")
    if not np.isin(m, (0.0, 1.0)).all() or not (m.sum(axis=1) > 0).all():
        raise EpisodeRejected("action_mask must be 0/1 with a legal action at every step")
    a = _array(_buffer_data(state, "actions"), np.int64, (n,), "actions")
    if a.min() < 0 or a.max() >= num_actions or not m[np.arange(n), a].all():
        raise EpisodeRejected("an action is out of range or illegal under its mask")
    r = _array(_buffer_data(state, "rewards"), np.float32, (n,), "rewards")

    extra = state.get("extra_model_outputs")
    if not isinstance(extra, dict):
        raise EpisodeRejected("missing extra_model_outputs")
    logp = _array(_buffer_data(extra, "action_logp"), np.float32, (n,), "action_logp")
    if (logp > 1e-4).any():
        raise EpisodeRejected("action_logp must be log-probabilities (<= 0)")
    logits = _array(
        _buffer_data(extra, "action_dist_inputs"), np.float32, (n, num_actions), "logits"
    )

    custom = state.get("custom_data") or {}
    versions = custom.get("versions") if isinstance(custom, dict) else None
    if not isinstance(versions, list) or len(versions) != n:
        raise EpisodeRejected("custom_data.versions must give one weights version per step")
    try:
        versions = [int(v) for v in versions]
    except (TypeError, ValueError):
        raise EpisodeRejected("versions must be integers") from None

    terminated = bool(state.get("is_terminated"))
    clean = episode_state(
        episode_id=episode_id,
        observations=o,
        action_masks=m,
        actions=a,
        rewards=r,
        logp=logp,
        logits=logits,
        custom_data={
            "versions": versions,
            "game_id": str(custom.get("game_id", ""))[:128],
            "seat": str(custom.get("seat", ""))[:64],
        },
        terminated=terminated,
        truncated=bool(state.get("is_truncated")) and not terminated,
    )
    return SingleAgentEpisode.from_state(clean)
