"""Every RLlib internal croupier relies on (`croupier.rllib_private`), checked against
the installed RLlib: an upgrade that moves one fails here, by name, not in a training run.
And no other module names one."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from croupier import rllib_private
from croupier.link import protocol

SRC = Path(__file__).resolve().parents[1] / "src" / "croupier"


def test_increase_sampled_metrics_logs_rllibs_step_counts():
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.metrics import (
        NUM_AGENT_STEPS_SAMPLED,
        NUM_ENV_STEPS_SAMPLED,
        NUM_MODULE_STEPS_SAMPLED,
    )
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    assert callable(getattr(SingleAgentEnvRunner, "_increase_sampled_metrics", None))

    class Runner:  # what the unbound call may touch: `metrics`, nothing else of ours
        metrics = MetricsLogger(root=False)

    runner = Runner()
    rllib_private.increase_sampled_metrics(runner, 12, 3)
    rllib_private.increase_sampled_metrics(runner, 8, 1)
    reduced = runner.metrics.reduce()
    assert reduced[NUM_ENV_STEPS_SAMPLED].peek() == 20
    assert NUM_AGENT_STEPS_SAMPLED in reduced and NUM_MODULE_STEPS_SAMPLED in reduced


def test_impala_still_injects_its_state_server_where_the_runner_looks():
    from ray.rllib.algorithms.impala import impala
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    attr = rllib_private.STATE_SERVER_ATTR
    # IMPALA (and APPO, its subclass) sets it on every runner; RLlib's runners read it.
    assert f"env_runner.{attr} = server" in inspect.getsource(impala)
    assert f"self.{attr}" in inspect.getsource(SingleAgentEnvRunner.__init__)

    class Runner:
        pass

    runner = Runner()
    assert rllib_private.env_runner_state_server(runner) is None
    setattr(runner, attr, "actor")
    assert rllib_private.env_runner_state_server(runner) == "actor"


def test_episode_from_arrays_matches_rllibs_episode_state_layout():
    """`from_state` takes exactly the keys `get_state` gives: a new or renamed key in RLlib's
    private layout fails here."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    n, obs_size, num_actions = 3, 4, 2
    episode = rllib_private.episode_from_arrays(
        episode_id="e1",
        observations=np.arange((n + 1) * obs_size, dtype=np.float32).reshape(n + 1, obs_size),
        action_masks=np.ones((n + 1, num_actions), np.float32),
        actions=np.asarray([0, 1, 0], np.int64),
        rewards=np.asarray([0.0, 0.5, 1.0], np.float32),
        logp=np.full(n, -0.7, np.float32),
        logits=np.zeros((n, num_actions), np.float32),
        custom_data={"versions": [1, 1, 2]},
        terminated=True,
        truncated=False,
    )
    assert len(episode) == n and episode.is_done and episode.is_numpy
    assert episode.get_return() == pytest.approx(1.5)
    assert episode.get_observations(-1)["observations"][0] == 12.0
    np.testing.assert_allclose(episode.get_extra_model_outputs("action_logp"), -0.7)
    assert episode.custom_data["versions"] == [1, 1, 2]
    assert set(episode.get_state()) == set(SingleAgentEpisode(id_="x").get_state())


def test_the_prelearner_hook_is_still_the_one_rllib_calls():
    from ray.rllib.offline.offline_prelearner import OfflinePreLearner

    assert "self._map_to_episodes(" in inspect.getsource(OfflinePreLearner.__call__)
    params = inspect.signature(OfflinePreLearner._map_to_episodes).parameters
    assert list(params)[:2] == ["self", "batch"]
    cls = rllib_private.prelearner_class(lambda batch: [batch["n"]], "Probe")
    assert issubclass(cls, OfflinePreLearner)
    assert cls._map_to_episodes(object(), {"n": 7}, to_numpy=True) == {"episodes": [7]}


def test_the_stock_runner_keeps_its_version_where_the_compat_tests_read_it():
    from ray.rllib.env.external.env_runner_server_for_external_inference import (
        EnvRunnerServerForExternalInference,
    )

    assert "self._weights_seq_no = 0" in inspect.getsource(
        EnvRunnerServerForExternalInference.__init__
    )

    class Runner:
        _weights_seq_no = 4

    assert rllib_private.stock_runner_weights_seq_no(Runner()) == 4


def test_the_deprecation_logger_module_exists():
    module = importlib.import_module(rllib_private.DEPRECATION_LOGGER)
    assert module.__name__ == rllib_private.DEPRECATION_LOGGER


def test_the_link_state_keys_are_rllibs_names():
    """A stock RLlib peer reads and writes SET_STATE with these."""
    from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    assert protocol.STATE_MODULE == COMPONENT_RL_MODULE
    assert protocol.DEFAULT_POLICY == DEFAULT_MODULE_ID
    assert protocol.WEIGHTS_SEQ_NO == WEIGHTS_SEQ_NO


# Private RLlib names croupier uses; only rllib_private.py may spell them.
_PRIVATE = re.compile(
    r"_increase_sampled_metrics|_env_runner_state_server|_map_to_episodes|ray\._common"
    r"|SingleAgentEpisode\.from_state|\.algo\.env_runner\._"
    r"|(?<!super\(\))(?<!self)\._forward\("  # a module's _forward called from outside its class
)


def test_no_module_but_rllib_private_names_an_rllib_internal():
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        if path.name != "rllib_private.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _PRIVATE.search(line)
    ]
    assert offenders == []


def test_forward_logits_is_the_modules_own_masked_forward():
    import torch

    from croupier.games.leduc import LeducAdapter
    from croupier.policies.module import ModelSpec, build_inference_module

    adapter = LeducAdapter()
    module = build_inference_module(ModelSpec(), adapter.observation_space, adapter.action_space)
    obs = torch.randn(3, adapter.obs_size)
    mask = torch.ones(3, adapter.num_actions)
    mask[:, 0] = 0.0
    batch = {"obs": {"observations": obs, "action_mask": mask}}
    with torch.inference_mode():
        got = rllib_private.forward_logits(module, batch)
        want = module.forward_inference({"obs": {"observations": obs, "action_mask": mask}})
    assert torch.equal(got, want["action_dist_inputs"])
    assert (got[:, 0] < -1e30).all()  # masked: the illegal action is far below the rest


def test_candidate_arrays_are_the_episodes_own_and_replace_changes_their_width():
    """`InfiniteLookbackBuffer.data` is where a finalized episode keeps its arrays: replaced
    with wider ones, the episode's public getters and RLlib's one-step extension see them."""
    from ray.rllib.utils.postprocessing.episodes import add_one_ts_to_episodes_and_truncate

    n, k, wider = 2, 3, 5
    obs = {"observations": np.zeros((n + 1, 4), np.float32),
           "candidates": np.ones((n + 1, k, 2), np.float32),
           "candidate_mask": np.ones((n + 1, k), np.float32)}  # fmt: skip
    episode = rllib_private.episode_from_arrays(
        episode_id="c1", observations=obs, action_masks=None,
        actions=np.zeros(n, np.int64), rewards=np.zeros(n, np.float32),
        logp=np.zeros(n, np.float32), logits=np.zeros((n, k), np.float32),
        custom_data={}, terminated=True, truncated=False,
    )  # fmt: skip
    got, logits = rllib_private.candidate_arrays(episode)
    assert got["candidates"] is obs["candidates"] and logits.shape == (n, k)
    padded = {**obs, "candidates": np.ones((n + 1, wider, 2), np.float32),
              "candidate_mask": np.ones((n + 1, wider), np.float32)}  # fmt: skip
    rllib_private.replace_candidate_arrays(episode, padded, np.zeros((n, wider), np.float32))
    assert episode.get_observations(0)["candidates"].shape == (wider, 2)
    assert episode.get_extra_model_outputs("action_dist_inputs", 1).shape == (wider,)
    add_one_ts_to_episodes_and_truncate([episode])
    assert episode.get_observations(-1)["candidate_mask"].shape == (wider,)
