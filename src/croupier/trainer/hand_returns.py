"""Each whole hand's return, beside its first step, for the rules anchor's evidence.

The anchor lets go of (or pulls back) the policy on whether it makes more than the rules from
the same states (`rules_anchor.Release`). Judged on the learner's value targets (GAE, λ 0.95)
that gain leans on the policy's own critic, which moves while the policy does: on crazy
eights the anchor let go on a window of gains +0.00 to +0.04 and the policy then drifted below
the rules. A whole hand's return is the policy's own outcome, critic-free; compared at the
hand's first step with the clone's value there (what the rules make from that state, fitted
on the rules' own hands, so read where it was fitted) it is the policy's gain over the rules,
one independent row a hand.

This learner connector piece adds that return as a column, NaN at every other step (and in
an episode that is not a whole hand: a chunk that began mid-hand or ends unfinished).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.trainer.episode_columns import EpisodeColumn

# The batch column: the hand's discounted return at its first step, NaN elsewhere.
HAND_RETURN = "hand_return"


def hand_return_column(rewards: np.ndarray, gamma: float, whole: bool, steps: int) -> np.ndarray:
    """`steps` values: at step 0 the discounted sum of `rewards` (the hand's return, as the
    value head counts it), NaN at every other step and everywhere when not `whole`."""
    column = np.full(steps, np.nan, np.float32)
    if whole and steps > 0:
        r = np.asarray(rewards, np.float64)
        column[0] = float(np.sum(r * gamma ** np.arange(len(r))))
    return column


class HandReturns(EpisodeColumn):
    """Learner connector piece adding `HAND_RETURN` to the train batch."""

    column = HAND_RETURN

    def __init__(self, *args: Any, gamma: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gamma = float(gamma)

    def values(self, episode: Any, steps: int) -> np.ndarray:
        # PPO's learner has already added one artificial step (reward 0) to every episode
        # (`AddOneTsToEpisodesAndTruncate`); it adds nothing to the sum.
        whole = episode.t_started == 0 and episode.is_terminated
        rewards = episode.get_rewards(slice(0, steps)) if whole else ()
        return hand_return_column(rewards, self.gamma, whole, steps)
