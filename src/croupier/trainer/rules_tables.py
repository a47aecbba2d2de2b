"""Which of a train batch's steps were played at a rules table, as a batch column.

A pull toward a reference judges the policy where the reference's record means something:
the rules anchor's evidence (`rules_anchor.Release`) is each whole hand's return against what
the rules make from its first state against the rules, so it reads only hands the policy
played against the rules. Each episode says where it was played (its record's `table`,
`policies/tables.py`, kept in the episode's `custom_data` by `trainer/episodes.py`); this
learner connector piece puts it beside every step: `RULES_TABLE`, 1.0 at a rules table's
steps, 0.0 at any other's (league, best-response, self-play, search) and at an episode that
does not say.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.policies.tables import RULES_TABLE as RULES
from croupier.trainer.episode_columns import EpisodeColumn

# The batch column: 1.0 where the step's hand was played with only the rules as opponents.
RULES_TABLE = "rules_table"


class RulesTables(EpisodeColumn):
    """Learner connector piece adding `RULES_TABLE` to the train batch. `untagged`: the table
    an episode that carries none was played at ("": unknown, not the rules; the in-process
    trainer's seat env knows its opponent for every episode it makes)."""

    column = RULES_TABLE

    def __init__(self, *args: Any, untagged: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.untagged = untagged

    def values(self, episode: Any, steps: int) -> np.ndarray:
        table = episode.custom_data.get("table") or self.untagged
        return np.full(steps, float(table == RULES), np.float32)
