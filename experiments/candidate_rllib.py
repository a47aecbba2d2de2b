"""The candidate-scoring RLModule trained by RLlib's own PPO/APPO learner, in-process.

Proves `policies/candidates.py` trains on RLlib 2.60's learners: a gymnasium env in which the
agent is doudizhu's landlord against two `doudizhu-rule-v1` peasants, its observation the
padded candidate space of `DoudizhuAdapter` (action = candidate slot). The external path
(engine -> server -> link -> trainer) is the lead's integration; this is its in-process anchor.

The padded observation is large (512 slots x 54 floats per step): fine in-process for short
runs; for the link, candidates should travel unpadded (see docs/strength.md).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

from croupier.games.doudizhu import DoudizhuAdapter, FeatureSpec, rule_move


class LandlordVsRulesEnv(gym.Env):
    """One doudizhu game per episode; the agent plays the landlord; reward +1 won, -1 lost."""

    def __init__(self, config: dict[str, Any] | None = None):
        from rlcard.games.doudizhu.game import DoudizhuGame

        config = config or {}
        self.adapter = DoudizhuAdapter(FeatureSpec(history=int(config.get("history", 15))))
        self.observation_space = self.adapter.candidate_observation_space
        self.action_space = self.adapter.candidate_action_space
        self.game = DoudizhuGame()
        self.game.np_random = np.random.RandomState(int(config.get("seed", 0)))
        self._state: dict[str, Any] = {}

    def _advance(self) -> None:
        g = self.game
        while not g.is_over() and g.round.current_player != g.round.landlord_id:
            self._state, _ = g.step(rule_move(self._state))

    def _obs(self) -> dict[str, np.ndarray]:
        return self.adapter.pad_candidates(*self.adapter.encode_candidates(self._state))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.game.np_random = np.random.RandomState(seed)
        self._state, _ = self.game.init_game()
        self._advance()  # the landlord moves first: nothing to advance, kept for clarity
        return self._obs(), {}

    def step(self, action: int):
        legal = self._state["actions"]
        if not 0 <= int(action) < len(legal):
            raise ValueError(f"candidate {action} of {len(legal)}: the mask was not honoured")
        self._state, _ = self.game.step(legal[int(action)])
        self._advance()
        g = self.game
        if g.is_over():
            won = g.winner_id == g.round.landlord_id
            return self.adapter.terminal_candidates(), (1.0 if won else -1.0), True, False, {}
        return self._obs(), 0.0, False, False, {}


def candidate_config(
    algo: str = "ppo",
    hiddens: list[int] | None = None,
    train_batch_size: int = 1024,
    minibatch_size: int = 256,
    lr: float = 3e-4,
    entropy_coeff: float = 0.01,
    num_envs: int = 8,
    env_config: dict[str, Any] | None = None,
) -> Any:
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.ppo import PPOConfig

    from croupier.policies.candidates import candidate_module_spec

    env = LandlordVsRulesEnv(env_config)
    spec = candidate_module_spec(
        algo, env.observation_space, env.action_space, hiddens=hiddens or [256, 256]
    )
    if algo == "ppo":
        config: Any = PPOConfig()
        training: dict[str, Any] = {"num_epochs": 4, "minibatch_size": minibatch_size,
                                    "use_kl_loss": False, "lambda_": 0.95}  # fmt: skip
    else:
        config = APPOConfig()
        training = {"vtrace": True, "use_kl_loss": False}
    return (
        config.environment(LandlordVsRulesEnv, env_config=env_config or {})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs)
        .rl_module(rl_module_spec=spec)
        .training(
            lr=lr,
            gamma=1.0,
            train_batch_size_per_learner=train_batch_size,
            entropy_coeff=entropy_coeff,
            vf_loss_coeff=0.5,
            **training,
        )  # fmt: skip
    )


def run(algo: str, seconds: float, **kwargs: Any) -> list[dict[str, float]]:
    """Train for about `seconds`; per iteration: env steps sampled, mean episode return.
    (Ray must be initialised by the caller.)"""
    algo_ = candidate_config(algo, **kwargs).build_algo()
    try:
        t0, curve = time.monotonic(), []
        while time.monotonic() - t0 < seconds:
            r = algo_.train()
            curve.append(
                {
                    "s": round(time.monotonic() - t0, 1),
                    "env_steps": r.get("num_env_steps_sampled_lifetime", 0),
                    "return": r["env_runners"].get("episode_return_mean", float("nan")),
                }
            )
        return curve
    finally:
        algo_.stop()
