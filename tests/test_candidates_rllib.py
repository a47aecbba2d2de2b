"""The candidate-scoring RLModule trains on RLlib's own PPO and APPO learners (in-process
doudizhu landlord vs the rule peasants): a short run updates the weights, nothing NaN."""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_session():
    import ray

    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("algo", ["ppo", "appo"])
def test_short_rllib_run_trains_the_candidate_module(ray_session, algo):
    from experiments.candidate_rllib import candidate_config

    config = candidate_config(algo, hiddens=[32, 32], train_batch_size=128, minibatch_size=64,
                              num_envs=2, env_config={"history": 0})  # fmt: skip
    config = config.env_runners(rollout_fragment_length=64)
    algo_ = config.build_algo()
    try:
        module = algo_.get_module()
        before = {k: v.clone() for k, v in module.state_dict().items()}
        steps = 0
        for _ in range(6):
            result = algo_.train()
            steps = result["num_env_steps_sampled_lifetime"]
            if steps >= 256 and result["env_runners"].get("num_episodes_lifetime", 0) > 0:
                break
        assert steps >= 128
        after = algo_.get_module().state_dict()
        changed = [k for k in before if not torch.equal(before[k], after[k])]
        assert any(k.startswith("net.") for k in changed), "the learner did not update the net"
        assert all(torch.isfinite(v).all() for v in after.values())
        ret = result["env_runners"].get("episode_return_mean", 0.0)
        assert math.isnan(ret) or -1.0 <= ret <= 1.0
    finally:
        algo_.stop()
