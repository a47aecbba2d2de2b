"""Expert iteration: the learner pulled toward a search's choices, beside PPO's own loss.

A search seat (`policies/search.py`) plays better than the policy it searches with: rollouts
over the game's simulator from each legal move, in worlds consistent with what the seat can
see, the best mean taken (policy improvement by simulation). Expert iteration (Anthony, Tian &
Barber 2017; AlphaZero's policy target) is how a network inherits that: the search labels some
of the states the learned seats meet, and the network is trained toward its choices. The
network alone keeps serving players, at its own speed.

How croupier does it, and why:
- The learned seat still plays its own sampled move; the search only *labels* the state
  (`trajectories/recorder.py` `SeatRecorder.label`, the record's `teacher` column). So every
  step PPO trains on was drawn from the behaviour policy and its importance ratios stay right;
  a search that also acted would make its steps off-policy for PPO.
- The label enters the loss as a cross-entropy, `coeff * -log pi(teacher | s)`, averaged over
  the minibatch's labelled rows alone (so the term's scale does not depend on the share of
  states labelled), beside RLlib's PPO / APPO loss and the rules anchor's KL term: one
  learner, one update (`trainer/learners.py` composes them), not a second trainer.
- Rows without a label (-1) add nothing; an update without labels is RLlib's loss unchanged.

The coefficient is the learner's `learner_config_dict["distill_coeff"]`
(`croupier train --distill-coeff`); its default and the share of states labelled are set by
measurement (docs/search.md).
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from torch.nn import functional as F

from croupier.trainer.episodes import TEACHER_COLUMN

# `learner_config_dict` key of the distillation term's coefficient, and its default (a
# cross-entropy of ~1-3 nats a labelled row beside PPO's clipped surrogate of ~0.01-0.1).
# Measured on OpenSpiel's Hearts with ~1,300 labels in 30 minutes, 0.5 left the network 0.04
# greedy below the same run at 0 (docs/search.md): a few labels averaged apart weigh as much
# as a whole minibatch. Labels are off unless a server is given --search-labels.
DISTILL_COEFF = "distill_coeff"
DEFAULT_DISTILL_COEFF = 0.5
# Learner metrics (per module): the labelled rows' mean cross-entropy, their count, and how
# often the policy's most likely move is already the search's.
CE_KEY = "distill_ce"
ROWS_KEY = "distill_rows"
AGREE_KEY = "distill_agree"


def teacher_rows(batch: dict[str, Any]) -> torch.Tensor | None:
    """The minibatch's labelled rows (a bool mask: a label, and a real row, not RLlib's
    padding or its bootstrap step); None when the batch has no label column."""
    teacher = batch.get(TEACHER_COLUMN)
    if teacher is None:
        return None
    rows = teacher.reshape(-1) >= 0
    if Columns.LOSS_MASK in batch:
        rows = rows & batch[Columns.LOSS_MASK].reshape(-1).bool()
    return rows


def distill_terms(logits: torch.Tensor, teacher: torch.Tensor, rows: torch.Tensor) -> tuple:
    """(mean cross-entropy to the labels, share of rows whose argmax is the label) over
    `rows`; the logits are masked (illegal moves at the most negative float) so the
    softmax is over the legal moves alone."""
    picked = teacher.reshape(-1)[rows].long()
    logp = F.log_softmax(logits[rows], dim=-1)
    ce = -logp.gather(-1, picked.unsqueeze(-1)).squeeze(-1).mean()
    agree = (logits[rows].argmax(-1) == picked).float().mean()
    return ce, agree


class DistillMixin:
    """Adds `coeff * CE(policy, search's choice)` on labelled rows to the parent learner's
    loss (placed before RLlib's learner class in the bases)."""

    def distill_coeff(self) -> float:
        settings = getattr(self.config, "learner_config_dict", None) or {}  # type: ignore[attr-defined]
        return float(settings.get(DISTILL_COEFF, 0.0))

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> Any:  # fmt: skip
        loss = super().compute_loss_for_module(  # type: ignore[misc]
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        coeff = self.distill_coeff()
        rows = teacher_rows(batch) if coeff > 0 else None
        if rows is None:
            return loss
        count = int(rows.sum())
        metrics: dict[str, Any] = {ROWS_KEY: float(count)}
        if count:
            ce, agree = distill_terms(
                fwd_out[Columns.ACTION_DIST_INPUTS], batch[TEACHER_COLUMN], rows
            )
            loss = loss + coeff * ce
            metrics.update({CE_KEY: ce.detach(), AGREE_KEY: agree.detach()})
        self.metrics.log_dict(metrics, key=module_id, window=1)  # type: ignore[attr-defined]
        return loss
