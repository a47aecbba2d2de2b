"""Candidate slots sized by each update, not by the game's bound.

A candidate game's step lists K legal actions; a fixed-shape batch needs one K for all rows.
Padding every step to the game's bound (`max_candidates`: doudizhu 512) made a doudizhu step
512 x 161 floats (330 KB) where its median K is 2 and its 99th percentile 66: the trainer's
memory held ~1 GB of zeros per 4k waiting steps, and RLlib's minibatch iterator, which copies
the whole batch at every epoch (`SampleBatch.shuffle`, `concat_samples`), spent 75% of the
trainer's time on them (py-spy 10 minutes into two runs sharing 2 cores: 110-150 trained
steps/s; the peasants' run trained 54% of the steps it played over its 60 minutes).

So an episode is padded only to its own largest K (`trainer/episodes.py`), and this learner
connector pads every episode of one update to the update's largest K before RLlib batches
them. The slots added are what the module's own padding is (mask 0, logits at the most
negative float), so the logits, the log-probabilities and the losses are the same as at the
bound; the module scores only real candidates either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier import rllib_private


def pad_slots(obs: dict[str, np.ndarray], logits: np.ndarray, k: int) -> tuple[dict, np.ndarray]:
    """One episode's candidate observation and logits with `k` slots (k >= its own)."""
    have = obs["candidates"].shape[1]
    if have == k:
        return obs, logits
    extra = k - have
    padded = dict(obs)
    padded["candidates"] = np.pad(obs["candidates"], ((0, 0), (0, extra), (0, 0)))
    padded["candidate_mask"] = np.pad(obs["candidate_mask"], ((0, 0), (0, extra)))
    return padded, np.pad(logits, ((0, 0), (0, extra)), constant_values=FLOAT_MIN)


class CandidateSlots(ConnectorV2):
    """Learner connector piece: every episode of the update padded to the same slot count."""

    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict | None = None,
        **kwargs: Any,
    ) -> Any:
        arrays = [rllib_private.candidate_arrays(e) for e in episodes]
        if not arrays:
            return batch
        k = max(obs["candidates"].shape[1] for obs, _ in arrays)
        for episode, (obs, logits) in zip(episodes, arrays, strict=True):
            if obs["candidates"].shape[1] != k:
                rllib_private.replace_candidate_arrays(episode, *pad_slots(obs, logits, k))
        return batch
