"""Episodes for RLlib's stock `EnvRunnerServerForExternalInference` (`serve --rllib-compat`).

That runner rebuilds each episode from RLlib's own episode state (the `get_state()` layout),
so it needs that rather than croupier's record. Built here through RLlib's public API (the
episode's constructor, `to_numpy`, `get_state`), never by writing RLlib's private layout by
hand: a per-step conversion, but only on this compatibility path, never croupier's own link.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode


def rllib_episode_state(record: dict[str, Any]) -> dict[str, Any]:
    """RLlib's `SingleAgentEpisode.get_state()` of an episode record."""
    obs, mask = np.asarray(record["obs"]), np.asarray(record["mask"])
    episode = SingleAgentEpisode(
        id_=record["id"],
        observations=[
            {"observations": o, "action_mask": m} for o, m in zip(obs, mask, strict=True)
        ],
        actions=list(np.asarray(record["actions"])),
        rewards=list(np.asarray(record["rewards"], np.float32)),
        extra_model_outputs={
            "action_logp": list(np.asarray(record["logp"], np.float32)),
            "action_dist_inputs": list(np.asarray(record["logits"], np.float32)),
        },
        terminated=bool(record["terminated"]),
        truncated=bool(record["truncated"]),
        len_lookback_buffer=0,
    )
    episode.custom_data.update(
        game_id=record["game_id"],
        seat=record["seat"],
        policy=record["policy"],
        table=record.get("table", ""),
        versions=list(record["versions"]),
    )
    episode.to_numpy()
    return episode.get_state()
