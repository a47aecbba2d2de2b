"""A learner connector piece that adds one column to the train batch, computed per episode.

The trainer's own columns (each whole hand's return, `hand_returns.py`; whether a step was
played at a rules table, `rules_tables.py`) are each one value per step of an episode, from
that episode alone: the iteration over episodes and RLlib's batching call are this class's,
the values the subclass's (`values`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2


class EpisodeColumn(ConnectorV2):
    """Adds `column` to the train batch: `values(episode, steps)` for each episode's `steps`
    steps (PPO's artificial last step included, as every column's)."""

    column: str

    def values(self, episode: Any, steps: int) -> np.ndarray:
        raise NotImplementedError

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
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            steps = len(episode)
            self.add_n_batch_items(
                batch,
                self.column,
                items_to_add=self.values(episode, steps),
                num_items=steps,
                single_agent_episode=episode,
            )
        return batch
