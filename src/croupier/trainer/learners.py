"""The trainer's learner classes: RLlib's PPO / APPO torch learners with croupier's terms
added to their loss, each term a mixin of its own module: the rules anchor's pull toward the
rules' clone (`trainer/rules_anchor.py`) and expert iteration's pull toward a search's
choices (`trainer/distill.py`). A term with nothing to do (no reference held, no labels, a
coefficient of 0) leaves RLlib's loss unchanged."""

from __future__ import annotations

from croupier.trainer.distill import DistillMixin
from croupier.trainer.rules_anchor import AnchoredAPPOLearner, AnchoredPPOLearner


class CroupierPPOLearner(DistillMixin, AnchoredPPOLearner):
    """PPO's loss + the rules anchor's KL + the search's cross-entropy."""


class CroupierAPPOLearner(DistillMixin, AnchoredAPPOLearner):
    """APPO's loss + the rules anchor's KL + the search's cross-entropy."""


LEARNER_CLASSES: dict[str, type] = {"ppo": CroupierPPOLearner, "appo": CroupierAPPOLearner}
