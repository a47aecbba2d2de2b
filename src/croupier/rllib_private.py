"""Every RLlib (2.60) internal croupier relies on (trainer and serving), in one place.

RLlib's public API does not cover everything an EnvRunner fed over a socket needs. Each use
below names what it touches; tests/test_rllib_private.py checks each against the installed
RLlib, so an upgrade that moves one fails there, loudly, instead of somewhere in a training run.
Nothing else in croupier may name a private RLlib attribute or module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

# The logger RLlib's deprecation warnings go to (a private module's name).
DEPRECATION_LOGGER = "ray._common.deprecation"


def increase_sampled_metrics(runner: Any, num_steps: int, num_episodes: int) -> None:
    """Log a `sample()`'s env/agent/module step counts the way RLlib's own runners do
    (`num_env_steps_sampled_lifetime` and friends, which the Algorithm sums). The method is
    private to `SingleAgentEnvRunner`; it only uses `runner.metrics`, so it is called unbound
    on our runner rather than copied."""
    SingleAgentEnvRunner._increase_sampled_metrics(runner, num_steps, num_episodes)


# Where IMPALA/APPO put the `EnvRunnerStateServer` actor on each remote runner (when
# `use_env_runner_state_server` is on): an attribute the Algorithm sets, private to RLlib.
STATE_SERVER_ATTR = "_env_runner_state_server"


def env_runner_state_server(runner: Any) -> Any:
    """The `EnvRunnerStateServer` actor injected into `runner`, or None. Runners pull the
    newest weights from it at the top of `sample()`, as RLlib's own runners do."""
    return getattr(runner, STATE_SERVER_ATTR, None)


def stock_runner_weights_seq_no(runner: Any) -> int:
    """The weights version RLlib's stock `EnvRunnerServerForExternalInference` holds (kept in
    a private attribute; the compat tests read it)."""
    return int(runner._weights_seq_no)


def episode_from_arrays(
    *,
    episode_id: str,
    observations: np.ndarray | dict[str, np.ndarray],
    action_masks: np.ndarray | None,
    actions: np.ndarray,
    rewards: np.ndarray,
    logp: np.ndarray,
    logits: np.ndarray,
    custom_data: dict[str, Any],
    terminated: bool,
    truncated: bool,
    extra_outputs: dict[str, np.ndarray] | None = None,
) -> SingleAgentEpisode:
    """A finished, numpy-ised `SingleAgentEpisode` of `len(actions)` steps, built in one go
    from whole arrays through `SingleAgentEpisode.from_state`: the state layout (buffers,
    `_observation_space`, `_start_time`, ...) is RLlib's private one. The public constructor
    would take per-step lists and re-batch them step by step: a per-step Python loop on the
    trainer's ingest path, which this avoids. `extra_outputs`: more per-step columns (one row
    an action) that RLlib's learner connector copies into the train batch beside the
    log-probs; every episode of an update must have the same ones."""
    n = len(actions)
    return SingleAgentEpisode.from_state(
        {
            "id_": episode_id,
            "agent_id": None,
            "module_id": None,
            "multi_agent_episode_id": None,
            # A dict: the observation as it stands (a candidate game's padded candidates).
            "observations": _buffer(
                observations
                if isinstance(observations, dict)
                else {"observations": observations, "action_mask": action_masks}
            ),
            "actions": _buffer(actions),
            "rewards": _buffer(rewards),
            "infos": {
                "data": [{} for _ in range(n + 1)],
                "lookback": 0,
                "finalized": False,
                "space": None,
            },
            "extra_model_outputs": {
                "action_logp": _buffer(logp),
                "action_dist_inputs": _buffer(logits),
                **{name: _buffer(column) for name, column in (extra_outputs or {}).items()},
            },
            "is_terminated": terminated,
            "is_truncated": truncated,
            "t_started": 0,
            "t": n,
            "_observation_space": None,
            "_action_space": None,
            "_start_time": None,
            "_last_step_time": None,
            "custom_data": custom_data,
        }
    )


def candidate_arrays(episode: SingleAgentEpisode) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A finalized candidate episode's whole observation dict and action-distribution inputs,
    lookback included (`InfiniteLookbackBuffer.data`: not public; its `set()` cannot change
    a shape, and padding the candidate slots does)."""
    return episode.observations.data, episode.extra_model_outputs["action_dist_inputs"].data


def replace_candidate_arrays(
    episode: SingleAgentEpisode, observations: dict[str, np.ndarray], logits: np.ndarray
) -> None:
    """Put arrays of the same length in place of `candidate_arrays(episode)`."""
    old_obs, old_logits = candidate_arrays(episode)
    if len(logits) != len(old_logits) or any(
        len(observations[k]) != len(v) for k, v in old_obs.items()
    ):
        raise ValueError("replacement arrays must keep the episode's length")
    episode.observations.data = observations
    episode.extra_model_outputs["action_dist_inputs"].data = logits


def _buffer(data: Any) -> dict[str, Any]:
    return {"data": data, "lookback": 0, "finalized": True, "space": None}


def prelearner_class(
    map_rows: Callable[[dict[str, Any]], list[SingleAgentEpisode]], name: str
) -> type:
    """An `OfflinePreLearner` that turns a batch of rows into episodes with `map_rows`. The
    hook RLlib calls for that, `_map_to_episodes`, is private: it is overridden here only."""
    from ray.rllib.offline.offline_prelearner import OfflinePreLearner

    def _map_to_episodes(self: Any, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"episodes": map_rows(batch)}

    return type(name, (OfflinePreLearner,), {"_map_to_episodes": _map_to_episodes})


def forward_logits(module: Any, batch: dict[str, Any]) -> Any:
    """The module's action-distribution inputs for `batch` through its own `_forward`: what
    RLlib's `forward_inference` computes without its ~80 us of wrapping checks. Subclasses
    override `_forward` (RLlib's documented extension point); calling it from outside is not
    public API, so it happens only here."""
    return module._forward(batch)["action_dist_inputs"]
