"""The action-masking RLModule: the one network class that is served and trained.

The observation space is a Dict {"observations": Box, "action_mask": Box}. The module runs
RLlib's default PPO/APPO networks on "observations" and pushes illegal actions' logits to
the most negative float, so an illegal action gets probability zero and is never sampled.

The batch passed in is never mutated (RLlib's example pops the mask out of the caller's dict,
which breaks anyone reusing that dict).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.appo.default_appo_rl_module import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import (
    DefaultAPPOTorchRLModule,
)
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier.games.presets import DEFAULT_ALGO
from croupier.rllib_private import forward_logits

log = logging.getLogger(__name__)

# How close a served logit and the learner's recomputation of it are held: float32 rounding,
# not bit for bit. torch picks matmul kernels by shape and CPU (AVX2, AVX-512, AMX, a GPU), so
# the same row in a batch of 1 and of 300 can differ in the last bits (~1e-8..1e-6 measured;
# which shapes agree moves with MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA and
# ATEN_CPU_CAPABILITY). That is enough for both algorithms: an error d in a log-prob scales
# PPO's ratio exp(logp - logp_behaviour) by e^d ~ 1 + d, 1e-5 where the clip sits at 1 +/- 0.2,
# and V-trace's truncated ratios (at 1) the same; the rounding is not systematic, so it adds
# no bias to an update. Anything a real error makes (other weights, other inputs) is orders
# of magnitude larger.
LOGITS_RTOL = 1e-5
LOGITS_ATOL = 1e-5


def logits_agree(a: np.ndarray, b: np.ndarray) -> bool:
    """Two computations of the same logits agree to float32 rounding (`LOGITS_RTOL`)."""
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=LOGITS_RTOL, atol=LOGITS_ATOL))


def apply_mask(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Illegal actions (mask 0) get the most negative float added: probability zero."""
    return logits + torch.clamp(torch.log(mask), min=FLOAT_MIN)


class _MaskingMixin:
    """Splits the Dict observation, runs the parent's networks, masks the logits."""

    def __init__(self, *, observation_space: gym.spaces.Dict | None = None, **kwargs: Any):
        if not isinstance(observation_space, gym.spaces.Dict) or set(observation_space) != {
            "observations",
            "action_mask",
        }:
            raise ValueError(
                "croupier's masked module needs a Dict observation space with the keys "
                "'observations' and 'action_mask'"
            )
        self._space_with_mask = observation_space
        # RLlib's catalog builds the encoder from the plain observation Box.
        super().__init__(observation_space=observation_space["observations"], **kwargs)

    def setup(self) -> None:
        super().setup()
        self.observation_space = self._space_with_mask

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
        obs = batch[Columns.OBS]
        inner = dict(batch)
        inner[Columns.OBS] = obs["observations"]
        return inner, obs["action_mask"]

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = self._split(batch)
        out = super()._forward(inner, **kwargs)
        out[Columns.ACTION_DIST_INPUTS] = apply_mask(out[Columns.ACTION_DIST_INPUTS], mask)
        return out

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        inner, mask = self._split(batch)
        out = super()._forward_train(inner, **kwargs)
        out[Columns.ACTION_DIST_INPUTS] = apply_mask(out[Columns.ACTION_DIST_INPUTS], mask)
        return out

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if isinstance(batch[Columns.OBS], dict):
            batch, _ = self._split(batch)
        return super().compute_values(batch, embeddings)


class MaskedPPOModule(_MaskingMixin, DefaultPPOTorchRLModule):
    """PPO's default actor-critic with action masking."""


class MaskedAPPOModule(_MaskingMixin, DefaultAPPOTorchRLModule):
    """APPO's default actor-critic (with its target networks) with action masking."""

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        inner, mask = self._split(batch)
        out = super().forward_target(inner)
        out[TARGET_NETWORK_ACTION_DIST_INPUTS] = apply_mask(
            out[TARGET_NETWORK_ACTION_DIST_INPUTS], mask
        )
        return out


MODULE_CLASSES: dict[str, type] = {"ppo": MaskedPPOModule, "appo": MaskedAPPOModule}

# The largest network a spec from outside (the trainer link, a weights dir) may ask for: a
# server builds it before anything else and keeps it per version, so `[65536] * 50` (a link
# token holder's ask in the review) would take the process down. The built-in presets have
# ~0.03-0.25 M parameters; 32 M (128 MiB of float32 a version) leaves room for far wider
# networks, 16 hidden layers for far deeper ones.
MAX_LAYERS = 16
MAX_WIDTH = 65536
MAX_PARAMETERS = 32_000_000


def scores_candidates(observation_space: Any) -> bool:
    """A space of scored candidate actions (`CandidateAdapter.candidate_observation_space`)."""
    return (
        isinstance(observation_space, gym.spaces.Dict) and "candidates" in observation_space.spaces
    )


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild the network anywhere: plain data, sent over the link.

    Which network it is follows from the observation space it is built for: the masked
    actor-critic (`hiddens`), or, for a space of scored candidates, the candidate scorer
    (`policies/candidates.py`: state MLP `hiddens`, scorer width `score_hidden`)."""

    algo: str = DEFAULT_ALGO
    hiddens: list[int] = field(default_factory=lambda: [128, 128])
    activation: str = "relu"
    vf_share_layers: bool = False
    score_hidden: int = 64

    def model_config(self) -> DefaultModelConfig:
        return DefaultModelConfig(
            fcnet_hiddens=list(self.hiddens),
            fcnet_activation=self.activation,
            vf_share_layers=self.vf_share_layers,
        )

    def module_class(self, observation_space: Any = None) -> type:
        if scores_candidates(observation_space):
            from croupier.policies.candidates import CANDIDATE_MODULES

            if self.algo not in CANDIDATE_MODULES:
                raise ValueError(
                    f"unknown algorithm {self.algo!r}; one of {sorted(CANDIDATE_MODULES)}"
                )
            return CANDIDATE_MODULES[self.algo]
        if self.algo not in MODULE_CLASSES:
            raise ValueError(f"unknown algorithm {self.algo!r}; one of {sorted(MODULE_CLASSES)}")
        return MODULE_CLASSES[self.algo]

    def rl_module_spec(
        self,
        observation_space: gym.spaces.Dict | None = None,
        action_space: gym.spaces.Discrete | None = None,
        inference_only: bool = False,
    ) -> RLModuleSpec:
        model_config: Any = self.model_config()
        if scores_candidates(observation_space):
            model_config = {"hiddens": list(self.hiddens), "score_hidden": self.score_hidden}
        return RLModuleSpec(
            module_class=self.module_class(observation_space),
            observation_space=observation_space,
            action_space=action_space,
            model_config=model_config,
            inference_only=inference_only,
        )

    @classmethod
    def for_game(cls, game: str, algo: str | None = None) -> ModelSpec:
        """The network of `game`'s training preset (`games/presets.py`), else the defaults:
        what a trainer of the game starts with, and so what a server of it builds before
        any trainer has sent weights."""
        from croupier.games.presets import preset_for

        preset = preset_for(game)
        if preset is None:
            return cls() if algo is None else cls(algo=algo)
        return cls(algo=algo or preset.algo, hiddens=list(preset.hiddens),
                   score_hidden=preset.score_hidden)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "algo": self.algo,
            "hiddens": list(self.hiddens),
            "activation": self.activation,
            "vf_share_layers": self.vf_share_layers,
            "score_hidden": self.score_hidden,
        }

    def parameters(self, obs_size: int = 0, num_actions: int = 0, candidate_size: int = 0) -> int:
        """About how many parameters the network has (actor and critic) for these sizes (0:
        not known, the layers on that side left out); a candidate game (`candidate_size`)
        has the scorer instead of an output per action."""
        chain = [obs_size, *self.hiddens]
        trunk = sum((a + 1) * b for a, b in zip(chain, chain[1:], strict=False))
        last, k = self.hiddens[-1], self.score_hidden
        if candidate_size:
            head = (last + 1) * k + candidate_size * k + (k + 1) * k + k + last + 2
            return trunk + head
        return trunk * (1 if self.vf_share_layers else 2) + (last + 1) * (num_actions + 1)

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], obs_size: int = 0, num_actions: int = 0, candidate_size: int = 0
    ) -> ModelSpec:
        """A spec from plain data, refusing (ValueError) one bigger than `MAX_PARAMETERS`
        (counted with the sizes given: those of the game it is for, where known)."""
        raw = data.get("hiddens", [128, 128])
        if not isinstance(raw, list | tuple) or not 1 <= len(raw) <= MAX_LAYERS:
            raise ValueError(f"model hiddens must list 1 to {MAX_LAYERS} layer sizes")
        hiddens = [int(h) for h in raw]
        if any(h < 1 or h > MAX_WIDTH for h in hiddens):
            raise ValueError(f"model hiddens must be sizes from 1 to {MAX_WIDTH}")
        score_hidden = int(data.get("score_hidden", 64))
        if not 1 <= score_hidden <= MAX_WIDTH:
            raise ValueError(f"score_hidden must be a size from 1 to {MAX_WIDTH}")
        spec = cls(
            algo=str(data.get("algo", DEFAULT_ALGO)),
            hiddens=hiddens,
            activation=str(data.get("activation", "relu")),
            vf_share_layers=bool(data.get("vf_share_layers", False)),
            score_hidden=score_hidden,
        )
        n = spec.parameters(obs_size, num_actions, candidate_size)
        if n > MAX_PARAMETERS:
            raise ValueError(
                f"a model of {n:,} parameters (hiddens {hiddens}, score_hidden {score_hidden}) "
                f"is over the {MAX_PARAMETERS:,} this server builds"
            )
        return spec


def build_inference_module(
    spec: ModelSpec, observation_space: gym.spaces.Dict, action_space: gym.spaces.Discrete
) -> Any:
    """A module for serving: no value head, eval mode, plain torch (no Ray session)."""
    module = spec.rl_module_spec(observation_space, action_space, inference_only=True).build()
    module.eval()
    return module


class PolicyNetwork:
    """A served module's policy as one plain torch call: observations through the module's own
    actor layers to logits, then the mask in numpy (the formula of `apply_mask`).

    Serving only. RLlib's `_forward` wraps the same layers in dict building and per-call
    checks, and the mask costs three torch dispatches (log, clamp, add): at serving batch sizes
    those cost more than the layers do. The layers are the module's (shared parameters: weights
    loaded into the module are the ones used here); `of` uses this only after it gave the
    module's own logits (to float32 rounding: `logits_agree`; on a CPU whose kernels make the
    two disagree beyond that, the module's `_forward` serves: slower, never wrong), and None
    otherwise.
    """

    def __init__(self, layers: torch.nn.Module):
        self.layers = layers
        self._float_min = np.float32(FLOAT_MIN)

    @classmethod
    def of(cls, module: Any) -> PolicyNetwork | None:
        """The plain network of `module` (default actor-critic MLP modules), or None."""
        encoder = getattr(module, "encoder", None)
        actor = getattr(encoder, "actor_encoder", None)  # separate actor and critic layers
        if actor is None:
            actor = getattr(encoder, "encoder", None)  # shared layers (`vf_share_layers`)
        body, head = getattr(actor, "net", None), getattr(getattr(module, "pi", None), "net", None)
        if not isinstance(body, torch.nn.Module) or not isinstance(head, torch.nn.Module):
            return None
        net = cls(torch.nn.Sequential(body, head))
        return net if net.matches(module) else None

    def matches(self, module: Any, rows: int = 16) -> bool:
        """The module's own masked logits and this network's, on random inputs, agree."""
        space = module.observation_space
        obs = (
            np.random.default_rng(0)
            .standard_normal((rows, *space["observations"].shape))
            .astype(np.float32)
        )
        mask = np.random.default_rng(1).random((rows, *space["action_mask"].shape)) < 0.7
        mask = mask.astype(np.float32)
        mask[:, 0] = 1.0  # one legal action at least, as every real state has
        try:
            with torch.inference_mode():
                batch = {"obs": {"observations": torch.from_numpy(obs),
                                 "action_mask": torch.from_numpy(mask)}}  # fmt: skip
                want = forward_logits(module, batch).numpy()
            return logits_agree(self(obs, mask), want)
        except (RuntimeError, ValueError, TypeError) as e:  # not the layout this expects
            log.debug("no plain policy network for %s: %s", type(module).__name__, e)
            return False

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            logits = self.layers(torch.from_numpy(obs)).numpy()
        # log(0) = -inf, clamped to FLOAT_MIN as `apply_mask` does; legal actions add log(1) = 0.
        with np.errstate(divide="ignore"):
            penalty = np.log(mask)
        np.maximum(penalty, self._float_min, out=penalty)
        logits += penalty
        return logits
