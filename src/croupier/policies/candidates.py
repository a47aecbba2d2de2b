"""Candidate scoring: one network scores every (state, legal action) pair; the policy is the
softmax over the legal candidates only (DouZero's representation, here in an actor-critic).

A doudizhu state lists ~6 legal moves on average (up to a few hundred) out of 27,472 possible
ones: a fixed softmax head over all of them does not scale, a scored candidate does.

Network (`CandidateNet`): the state goes through an MLP to h; each candidate c is scored by
    score(c) = w3 . relu(W2 relu(Ws h + Wa c + b1) + b2)
(the first layer of an MLP over [h, c], split so that Ws h is computed once per state, not once
per candidate). The value head reads h. Padded candidates get the most negative float, as the
fixed-size masked module does: probability zero, never sampled.

`CandidatePPOModule` / `CandidateAPPOModule` wrap it as RLlib new-API-stack RLModules over the
padded space of `CandidateAdapter.candidate_observation_space` (the action is the candidate
index); the learner recomputes logits from the same padded observation, so the behaviour
log-probability and the learner's agree to float32 rounding (`policies.module.LOGITS_RTOL`,
tested).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import torch
from ray.rllib.algorithms.appo.default_appo_rl_module import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import TargetNetworkAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.torch_utils import FLOAT_MIN
from torch import nn
from torch.nn import functional as F

_KEYS = {"observations", "candidates", "candidate_mask"}


class Dot(nn.Module):
    """A linear layer to one output as a row-wise dot product (the parameter layout of every
    saved candidate network: `weight` [size], `bias` [])."""

    def __init__(self, size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size).uniform_(-(size**-0.5), size**-0.5))
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.weight).sum(-1) + self.bias


class CandidateNet(nn.Module):
    """State MLP, candidate scorer, value head. Inputs padded: state [B, S], candidates
    [B, K, F], mask [B, K] (1 = a real candidate). A row's logits in any batch agree with
    what it gets alone to float32 rounding, not bit for bit: torch picks matmul kernels by
    shape and CPU (see `policies.module.LOGITS_RTOL` for why that is enough for PPO/APPO)."""

    def __init__(self, obs_size: int, cand_size: int, hiddens: list[int], score_hidden: int):
        super().__init__()
        layers: list[nn.Module] = []
        last = obs_size
        for h in hiddens:
            layers += [nn.Linear(last, h), nn.ReLU()]
            last = h
        # The layers are called by the `forward`s below; the containers keep the parameter
        # names of saved weights.
        self.state = nn.Sequential(*layers)
        self.state_in = nn.Linear(last, score_hidden)
        self.cand_in = nn.Linear(cand_size, score_hidden, bias=False)
        self.score = nn.Sequential(nn.ReLU(), nn.Linear(score_hidden, score_hidden), nn.ReLU(),
                                   Dot(score_hidden))  # fmt: skip
        self.value = Dot(last)
        self._state_layers = [m for m in self.state if isinstance(m, nn.Linear)]

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """[B, S] -> h [B, hiddens[-1]]."""
        x = obs
        for layer in self._state_layers:
            x = F.relu(F.linear(x, layer.weight, layer.bias))
        return x

    def score_pairs(self, h: torch.Tensor, cands: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """[C]: the score of candidate i (cands [C, F], float32) in the state h[rows[i]]."""
        s = F.linear(h, self.state_in.weight, self.state_in.bias)
        z = F.relu(s[rows] + F.linear(cands, self.cand_in.weight))  # [C, H]
        hidden = self.score[1]
        z = F.relu(F.linear(z, hidden.weight, hidden.bias))
        return self.score[3](z)

    def logits(self, h: torch.Tensor, cands: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, K]: real candidates scored, padded slots the most negative float. Only the
        real (state, candidate) pairs go through the scorer: a batch padded to its longest
        list (doudizhu: ~6 legal moves on average, a few hundred at most) would cost ~30x."""
        rows, cols = torch.nonzero(mask > 0, as_tuple=True)
        # The learner's candidates may be float16 (exact values, half the bytes to move):
        # the real ones are scored in float32, as served.
        scores = self.score_pairs(h, cands[rows, cols].float(), rows)
        out = torch.full(mask.shape, FLOAT_MIN, dtype=scores.dtype, device=scores.device)
        return out.index_put((rows, cols), scores)

    def forward(
        self, obs: torch.Tensor, cands: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.embed(obs)
        return self.logits(h, cands, mask), self.value(h)


def _parts(batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    obs = batch[Columns.OBS]
    return obs["observations"], obs["candidates"], obs["candidate_mask"]


class CandidatePPOModule(TorchRLModule, ValueFunctionAPI):
    """PPO's RLModule over candidate observations: logits over the padded candidate slots.

    model_config: {"hiddens": [256, 256], "score_hidden": 128}.
    """

    def __init__(self, *, observation_space: gym.spaces.Dict | None = None, **kwargs: Any):
        if not isinstance(observation_space, gym.spaces.Dict) or set(observation_space) != _KEYS:
            raise ValueError(f"a candidate module needs a Dict observation space with {_KEYS}")
        super().__init__(observation_space=observation_space, **kwargs)

    def setup(self) -> None:
        space = self.observation_space
        k, f = space["candidates"].shape
        if not isinstance(self.action_space, gym.spaces.Discrete) or self.action_space.n != k:
            raise ValueError(f"the action space must be Discrete({k}): one action per slot")
        cfg = self.model_config or {}
        self.net = CandidateNet(
            obs_size=space["observations"].shape[0],
            cand_size=f,
            hiddens=[int(h) for h in cfg.get("hiddens", [256, 256])],
            score_hidden=int(cfg.get("score_hidden", 128)),
        )

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, cands, mask = _parts(batch)
        h = self.net.embed(obs)
        return {Columns.ACTION_DIST_INPUTS: self.net.logits(h, cands, mask)}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, cands, mask = _parts(batch)
        h = self.net.embed(obs)
        return {
            Columns.ACTION_DIST_INPUTS: self.net.logits(h, cands, mask),
            Columns.EMBEDDINGS: h,
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            embeddings = self.net.embed(_parts(batch)[0])
        return self.net.value(embeddings)


class CandidateAPPOModule(CandidatePPOModule, TargetNetworkAPI):
    """APPO's: the same, plus the target copy of the policy that V-trace's ratio needs."""

    def make_target_networks(self) -> None:
        self._old_net = copy.deepcopy(self.net)
        for p in self._old_net.parameters():
            p.requires_grad = False

    def get_target_network_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        return [(self.net, self._old_net)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        obs, cands, mask = _parts(batch)
        logits = self._old_net.logits(self._old_net.embed(obs), cands, mask)
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: logits}


CANDIDATE_MODULES: dict[str, type] = {"ppo": CandidatePPOModule, "appo": CandidateAPPOModule}


def candidate_module_spec(
    algo: str,
    observation_space: gym.spaces.Dict,
    action_space: gym.spaces.Discrete,
    hiddens: list[int] | None = None,
    score_hidden: int = 128,
) -> RLModuleSpec:
    if algo not in CANDIDATE_MODULES:
        raise ValueError(f"unknown algorithm {algo!r}; one of {sorted(CANDIDATE_MODULES)}")
    return RLModuleSpec(
        module_class=CANDIDATE_MODULES[algo],
        observation_space=observation_space,
        action_space=action_space,
        model_config={"hiddens": list(hiddens or [256, 256]), "score_hidden": score_hidden},
    )
