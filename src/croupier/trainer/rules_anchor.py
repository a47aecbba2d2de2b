"""Rules-anchored learning: learn from the rules' clone under a pull back toward it.

A learned seat plays real players from its first hand, so it starts as the rules' clone
(`trainer/rules_clone.py`: the rules' decisions through the game's simulator, the network
fitted to them, its checks on fresh hands), and a clone of the rules that cannot learn is no
better than the rules. What lets it learn without serving worse than them is here:

**The anchor** (`AnchoredPPOLearner`, `AnchoredAPPOLearner`): RLlib's own PPO / APPO
learners with one term added to their loss, `coeff * KL(clone || policy)` on each
minibatch's states, the clone held frozen by the learner. The coefficient decays with the
env steps trained (`RulesAnchor.coefficient`, a half-life), so the policy is held near the
rules while its updates are noise and let go as they stop being so. The KL is the forward
one (clone first): it keeps the rules' move likely where the clone is sure of it and costs
nothing for moving mass among moves the clone spreads over, so the policy may add better
moves without dropping the rules' one first. The coefficient's clock runs on evidence
(`Release`): each whole hand's return (`trainer/hand_returns.py`) less the clone's value at
the hand's first step (scaled by how much of the returns it tracks there), less that
value's own offset, both measured on fresh hands (`rules_clone.distil`); hands played
against the rules alone (`trainer/rules_tables.py`), where the clone's value means something.

Why these choices, with the measured numbers: docs/training.md, "Rules-anchored learning".

Why ~640 lines in one module: one feature read in the order it happens (its settings and
their defaults by head, when to pull back or let go, the learners' terms and their gain,
installing both in an Algorithm, keeping them beside the checkpoint), all driven by one
`RulesAnchor`; apart, a reader would chase one schedule through several files.
`RulesAnchor` also holds the clone's own settings (one `croupier train --rules-anchor ...`);
this module imports nothing of `rules_clone`, which reads those few fields.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from torch.nn import functional as F

from croupier.games.candidates import is_candidate_game
from croupier.trainer.hand_returns import HAND_RETURN
from croupier.trainer.rules_tables import RULES_TABLE

log = logging.getLogger(__name__)

# Where a trainer keeps the clone it started from (beside its checkpoint), so a restart holds
# the same reference; and the env steps trained so far under it (the coefficient's clock).
ANCHOR_WEIGHTS = "rules-anchor.npz"
ANCHOR_STATE = "rules-anchor.json"
# Learner metrics (per module, in the result's "learners" section and the progress line).
KL_KEY = "rules_kl"
COEFF_KEY = "rules_kl_coeff"
ENTROPY_BOOST_KEY = "rules_entropy_boost"
# Whole hands' returns and the clone's values at their first steps: summed over an update's
# minibatches (its rows; the returns' and values' sums, squares and cross products), from which
# `learner_stats` has the update's mean gain, return - scale * value, and its standard error,
# for the clone's fitted `value_scale`. One minibatch alone is too few rows to tell: a few
# dozen hands, each with a payoff spread of about the stake.
GAIN_ROWS_KEY = "rules_gain_rows"
GAIN_SUMS_KEYS = ("rules_gain_returns", "rules_gain_values", "rules_gain_return_squares",
                  "rules_gain_value_squares", "rules_gain_cross")  # fmt: skip


# The entropy bonus's start by how many moves a decision has, unless set (docs/training.md):
# - a fixed head of a few named moves (at most `FEW_MOVES` slots), 0.1 (not 0.04): leduc's
#   `make demo` (quiet machine) +1.064 against +0.996 (and the untrained start +1.109 in the
#   same window);
# - many moves, none, whatever the head: the bonus spreads mass over poor moves faster than
#   the advantages pull it back. Doudizhu's landlord (scored candidates), 15 minutes at once,
#   one core each: with 0.1 it fell below the clone within 100k env steps, was pulled back to
#   the most and never let go (0.467 sampled / 0.498 greedy, 7.5 minutes below the rules'
#   record); without it, let go at 160k (0.660 / 0.775, 0.0 minutes below). OpenSpiel's
#   Hearts, a fixed head of a slot per card, 30 minutes beside its candidates: with 0.1
#   -0.014 sampled / +0.024 greedy; without it +0.007 / +0.036 (2,000 duplicate hands each).
FEW_MOVES = 16
FEW_MOVES_ENTROPY_BOOST = 0.1
MANY_MOVES_ENTROPY_BOOST = 0.0


def default_entropy_boost(adapter: Any) -> float:
    """The anchor's entropy bonus at the start, when not set: for a fixed head of at most
    `FEW_MOVES` moves (betting games), none for more (a slot per card, scored candidates)."""
    few = not is_candidate_game(adapter) and adapter.num_actions <= FEW_MOVES
    return FEW_MOVES_ENTROPY_BOOST if few else MANY_MOVES_ENTROPY_BOOST


# The clone's label smoothing by head, unless set (docs/training.md, "The clone's budget
# follows its fit"). Spread evenly over a slot per card, 5% costs the sampled clone what the
# fit gained: OpenSpiel's Hearts' 160,000-decision clone in-process, 2,000 duplicate hands,
# -0.015 +- 0.006 a hand at 0.05, -0.004 +- 0.004 at 0.01 (greedy -0.004 / -0.002), and through
# the path minute 0 -0.017 +- 0.016 (5.0 minutes below) against -0.000 +- 0.011 (0.0 below,
# +0.032 greedy after 30 minutes); crazy eights' slot per card, 30 minutes at once, 0.05 5.0
# minutes below and -0.030 +- 0.014 sampled at the end, 0.01 0.0 below and -0.008 +- 0.012.
# Scored candidates share the moves' features (Hearts' clone -0.005 at 0.05) and a few named
# moves explore from it (leduc's `make demo`): 0.05.
SLOT_PER_CARD_SMOOTHING = 0.01
SMOOTHING = 0.05


def default_smoothing(adapter: Any) -> float:
    """The clone's label smoothing, when not set: 0.01 for a fixed head of more than
    `FEW_MOVES` slots (a slot per card), 0.05 for a few named moves or scored candidates."""
    per_card = not is_candidate_game(adapter) and adapter.num_actions > FEW_MOVES
    return SLOT_PER_CARD_SMOOTHING if per_card else SMOOTHING


@dataclass(frozen=True)
class RulesAnchor:
    """Rules-anchored learning's settings (`croupier train --rules-anchor ...`)."""

    enabled: bool = True
    # Decisions of the rules against the rules the clone learns from (whole hands: the last
    # one is played out). A budget in decisions, not hands: a doudizhu game is ~46 of them.
    clone_decisions: int = 20_000
    # The most the budget grows to: it doubles while the clone still misses the rules' moves
    # on fresh decisions (`rules_clone.grow_clone`; Hearts' slot per card: 160,000).
    clone_max_decisions: int = 160_000
    # Cross-entropy target: 1 - smoothing on the rules' move, the rest spread over the legal
    # moves. 0: the sharpest clone. `croupier train` sets it by head (`default_smoothing`).
    smoothing: float = SMOOTHING
    # Passes over the recorded decisions (minibatches of 256, Adam 1e-3).
    clone_epochs: int = 10
    # Fit the clone's value head to the rules' returns (the critic PPO starts from); False:
    # to their mean alone.
    clone_value: bool = True
    # The KL term's coefficient at the start (0: the clone alone, no pull back toward it).
    kl_coeff: float = 0.05
    # An entropy bonus on top of the algorithm's own at the start: the clone is sharp, and
    # PPO's clipped steps grow a move it rarely plays only slowly; the bonus spreads mass
    # where the advantages do not object, i.e. where deviating from the rules is cheap.
    # `croupier train` starts it by how many moves a decision has (`default_entropy_boost`).
    entropy_boost: float = FEW_MOVES_ENTROPY_BOOST
    # Env steps trained over which both halve (0: they never decay).
    half_life: float = 200_000.0
    # The anchor's clock runs on evidence, not only on steps (`Release`): while the policy's
    # returns are significantly below the rules' own (the last 5 updates), it stands still and
    # goes back a half-life an update, so the KL coefficient doubles, up to `max_pull` times its
    # start. A fixed schedule let go of a policy that was getting worse: crazy eights' learned
    # seat fell from the rules' record to -0.12 in 5 minutes with the coefficient still at
    # ~0.04, and stayed below for 20-25 of 30 minutes while its measured gain read -0.03 to -0.09.
    pull_back: bool = True
    max_pull: float = 32.0
    # Let both go for good once the policy is clearly better than the rules (`Release`):
    # the anchor's job, never serving worse than the rules, is then done, and its terms only
    # slow the policy down (the anchored demo ended +0.86 where the untrained one reached +1.12).
    release: bool = True

    def __post_init__(self) -> None:
        if self.clone_decisions < 1 or self.clone_epochs < 1:
            raise ValueError("clone_decisions and clone_epochs: at least 1 each, got "
                             f"{self.clone_decisions!r} and {self.clone_epochs!r}")  # fmt: skip
        if self.clone_max_decisions < self.clone_decisions:
            raise ValueError(f"clone_max_decisions ({self.clone_max_decisions!r}) below "
                             f"clone_decisions ({self.clone_decisions!r})")  # fmt: skip
        if not 0.0 <= self.smoothing < 1.0:
            raise ValueError(f"smoothing: a share in [0, 1), got {self.smoothing!r}")

    @property
    def earliest(self) -> float:
        """How far before 0 the clock may be set back: where the pull is `max_pull` times its
        start (0 without `pull_back`)."""
        if not self.pull_back or self.half_life <= 0 or self.max_pull <= 1:
            return 0.0
        return -self.half_life * math.log2(self.max_pull)

    def _decayed(self, start: float, clock: float, earliest: float = 0.0) -> float:
        if not self.enabled or start <= 0:
            return 0.0
        if self.half_life <= 0:
            return start
        return start * 0.5 ** (max(clock, earliest) / self.half_life)

    def coefficient(self, clock: float, released: bool = False) -> float:
        """The KL coefficient at the anchor's clock (`Release.clock`: the env steps trained
        under it, less what evidence set it back by; before 0 it pulls harder than at start)."""
        return 0.0 if released else self._decayed(self.kl_coeff, clock, self.earliest)

    def entropy_bonus(self, clock: float, released: bool = False) -> float:
        """The entropy bonus added to the algorithm's own at the clock (never above its
        start: pulled back, the policy is to return to the rules, not to spread out)."""
        return 0.0 if released else self._decayed(self.entropy_boost, clock)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def anchor_for(adapter: Any, **given: Any) -> RulesAnchor:
    """The game's `RulesAnchor`: the defaults that depend on its head (the entropy bonus, the
    clone's smoothing) resolved for it, `given` over them (a None: the default)."""
    settings = {"entropy_boost": default_entropy_boost(adapter),
                "smoothing": default_smoothing(adapter)}  # fmt: skip
    settings.update({k: v for k, v in given.items() if v is not None})
    return RulesAnchor(**settings)


@dataclass
class Release:
    """The evidence the anchor runs on: the policy's returns against the rules' own from the
    same states, judged over the last `updates` updates together. It lets go when their mean
    gain is significantly above 0; while it is significantly below, the clock (`clock`) stands
    still and goes back a half-life an update (`RulesAnchor.pull_back`).

    "The rules' own" is the clone's value head: fitted to the payoffs the rules earn against
    the rules from each state (`rules_clone.distil`), it says what the rules would make from a
    hand's first decision, seat by seat (a landlord and a peasant differ), against whichever
    opponents the rules faced. The learner measures, on each minibatch, each whole hand's
    return less the clone's value at its first step (`_gain`): the policy's own outcome, one
    row a hand, read where the clone was fitted (the states before a seat's first decision do
    not depend on its policy). Judged on the learner's value targets instead (GAE, λ 0.95),
    the gain leaned on the policy's own critic, which moves with it: on crazy eights the
    anchor let go on a window of +0.00 to +0.04 and the policy then drifted below the rules.

    Only hands played against the rules are read (`_gain`): "against whichever opponents the
    rules faced" is the rules. Judged on every table, leduc's best-response league read the
    policy at its best responses' -1.07 a hand, below the clone's floor (-0.29), and held the
    pull at its most for good (exploitability 1.141 -> 1.087 in 5 minutes). An update without
    a rules hand (self-play, past versions alone) gives no gain: `observe` reaches no
    verdict and the clock runs on the env steps, so the pull decays by its half-life alone.

    Why the interval comes from the spread of the updates' gains (batch means) as well as from
    each update's own standard error: judged on every step's value target, an update's rows
    were correlated within a hand and its own error read several times too small (crazy
    eights: gains swung by ~0.035 from one update to the next where each claimed ±0.014 at
    95%, and three updates in a row "significantly above" let the anchor go at a policy still
    below the rules). One row a hand removes that; the spread still covers what one update's
    rows share (the same weights, a drifting opponent), and the own errors set its floor."""

    updates: int = 5
    t: float = 2.776  # Student's t at 95%, two-sided, for `updates` - 1 = 4 degrees of freedom
    # The clone's value's own error at first steps (`rules_clone.first_step_offset`): the
    # gains are read less `offset`, its standard error widening the interval.
    offset: float = 0.0
    offset_se: float = 0.0
    # The gain is return - scale * the clone's value (`rules_clone.first_step_offset`)
    scale: float = 1.0
    # The clone's own gain, as the gain is read before the offset, playing against the rules on
    # fresh hands (`rules_clone.clone_level`; its worst team), and its standard error: what
    # pulling back can restore. None: the rules' level (a clone kept before it was measured).
    floor: float | None = None
    floor_se: float = 0.0
    gains: list[float] = field(default_factory=list)  # the last `updates` updates' gains
    ses: list[float] = field(default_factory=list)  # and their own standard errors
    held_back: float = 0.0  # env steps the clock is set back by
    released_at: float | None = None  # the env steps trained when it let go
    seen_steps: float | None = None  # the env steps at the last update observed

    @property
    def released(self) -> bool:
        return self.released_at is not None

    def clock(self, env_steps: float) -> float:
        """The anchor's clock: the env steps trained under it less what it was set back by."""
        return env_steps - self.held_back

    def _window(self) -> tuple[float, float] | None:
        """The last `updates` gains' mean and the half-width of its 95% interval (from their
        spread, or their own errors if larger); None while there are too few."""
        n = len(self.gains)
        if n < max(self.updates, 2):
            return None
        mean = sum(self.gains) / n
        spread = (sum((g - mean) ** 2 for g in self.gains) / (n - 1)) ** 0.5
        own = (sum(se * se for se in self.ses) / n) ** 0.5
        return mean, self.t * max(spread, own) / n**0.5

    def verdict(self) -> int:
        """Against the rules: +1 when the last `updates` gains, less the clone's value offset,
        are significantly above 0; -1: below; 0: neither, or too few yet."""
        window = self._window()
        if window is None:
            return 0
        mean, half = window[0] - self.offset, math.hypot(window[1], 1.96 * self.offset_se)
        return 1 if mean - half > 0 else -1 if mean + half < 0 else 0

    def below_clone(self) -> bool:
        """Whether the last `updates` gains are significantly below the clone's own (`floor`;
        without one, below the rules): what the pull back answers. Below the rules alone is
        not enough: a sampled clone is itself below them (doudizhu's landlord clone won 0.43
        of its games where the rules won 0.50), and pulling a policy back to a clone that is
        no better only held it there (the coefficient at or near its most in 42 of 52 updates)."""
        if self.floor is None:
            return self.verdict() < 0
        window = self._window()
        if window is None:
            return False
        return window[0] + math.hypot(window[1], 1.96 * self.floor_se) < self.floor

    def observe(
        self,
        gain: float | None,
        se: float | None,
        env_steps: float,
        anchor: RulesAnchor | None = None,
    ) -> bool:
        """One update's gain over the clone's values; True when this one lets go (never with
        an `anchor` that does not `release`). With an `anchor` that pulls back, an update
        judged below sets its clock back."""
        update_steps = env_steps - (env_steps if self.seen_steps is None else self.seen_steps)
        self.seen_steps = env_steps
        if self.released or gain is None or se is None:
            return False
        self.gains = [*self.gains, float(gain)][-self.updates :]
        self.ses = [*self.ses, float(se)][-self.updates :]
        if self.below_clone() and anchor is not None and anchor.earliest < 0:
            # Standing still over this update and a half-life back, no further than `earliest`.
            held = self.held_back + max(update_steps, 0.0) + anchor.half_life
            self.held_back = min(held, env_steps - anchor.earliest)
        if self.verdict() > 0 and (anchor is None or anchor.release):
            self.released_at = float(env_steps)
            return True
        return False


# --- the KL term and the learners that add it ---------------------------------------------


def kl_to_reference(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Per row KL(reference || policy) over the actions: both logits masked alike (illegal and
    padded slots at the most negative float: probability 0, adding nothing)."""
    logp = F.log_softmax(logits, dim=-1)
    ref_logp = F.log_softmax(ref_logits, dim=-1)
    ref_p = ref_logp.exp()
    terms = torch.where(ref_p > 0, ref_p * (ref_logp - logp), torch.zeros_like(logp))
    return terms.sum(-1)


class _AnchoredMixin:
    """Adds the rules anchor's terms to the parent learner's loss for each module
    (`_anchor_loss`: `coeff * KL(reference || policy)` less an entropy bonus), the reference a
    frozen copy of the module holding the clone's weights. Another pull toward a reference
    sits beside it as a term of its own, added in `compute_loss_for_module`.

    Which rows each part reads: the KL and the bonus every row, whatever table its hand was
    played at (one network serves every table, and the pull is what holds it near the clone;
    with the KL on every row, decaying, leduc's best-response league reached exploitability
    0.094 in 15 minutes, docs/robustness.md); the evidence that sets the pull's strength
    (`_gain`, for `Release`) the hands played against the rules alone (`RULES_TABLE`)."""

    _rules_reference: dict[str, Any]
    _rules_coeff: float
    _rules_entropy: float
    _rules_watching: bool

    def _anchor_init(self) -> None:
        if not hasattr(self, "_rules_reference"):
            self._rules_reference, self._rules_coeff, self._rules_entropy = {}, 0.0, 0.0
            self._rules_watching = True

    def set_rules_reference(self, weights: dict[str, np.ndarray], module_id: str) -> None:
        """Hold `weights` (the clone: a full module state) as the frozen reference."""
        self._anchor_init()
        module = self.module[module_id].unwrapped()  # type: ignore[attr-defined]
        reference = copy.deepcopy(module)
        reference.set_state(weights)
        reference.eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        self._rules_reference[module_id] = reference

    def set_rules_coeff(self, coeff: float, entropy: float = 0.0, watching: bool = True) -> None:
        """The KL term's coefficient and the extra entropy bonus for the next updates; with
        `watching` False (the anchor let go), neither term nor gain is computed any more."""
        self._anchor_init()
        self._rules_coeff, self._rules_entropy = float(coeff), float(entropy)
        self._rules_watching = bool(watching)

    def rules_coeff(self) -> float:
        self._anchor_init()
        return self._rules_coeff

    def holds_reference(self) -> bool:
        self._anchor_init()
        return bool(self._rules_reference)

    def _anchor_term(self, module_id: str, batch: dict[str, Any], fwd_out: dict[str, Any]) -> Any:
        """The minibatch's mean KL(reference || policy) (None without a reference, or once
        the anchor let go: the reference's forward was 15% of a doudizhu trainer's CPU after
        it had let go, py-spy, for numbers nothing read any more)."""
        self._anchor_init()
        reference = self._rules_reference.get(module_id)
        if reference is None or not self._rules_watching:
            return None
        with torch.no_grad():
            ref_out = reference.forward_train(batch)
            gain = _gain(reference, batch, ref_out)
        kl = kl_to_reference(
            fwd_out[Columns.ACTION_DIST_INPUTS], ref_out[Columns.ACTION_DIST_INPUTS]
        )
        mean_kl = _masked_mean(kl, batch)
        metrics = {KL_KEY: mean_kl.detach(), COEFF_KEY: self._rules_coeff,
                   ENTROPY_BOOST_KEY: self._rules_entropy}  # fmt: skip
        self.metrics.log_dict(metrics, key=module_id, window=1)  # type: ignore[attr-defined]
        if gain:  # summed over the update's minibatches (RLlib's "sum": cleared each update)
            self.metrics.log_dict(gain, key=module_id, reduce="sum")  # type: ignore[attr-defined]
        return mean_kl

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> Any:  # fmt: skip
        """The parent's loss plus each pull toward a reference (today the rules anchor's)."""
        loss = super().compute_loss_for_module(  # type: ignore[misc]
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        return loss + self._anchor_loss(module_id, batch, fwd_out)

    def _anchor_loss(self, module_id: str, batch: dict[str, Any], fwd_out: dict[str, Any]) -> Any:
        """The rules anchor's terms: `coeff * KL(clone || policy)` less the entropy bonus, over
        every row whatever its table (0 without a reference or once the anchor let go)."""
        kl = self._anchor_term(module_id, batch, fwd_out)
        if kl is None:
            return 0.0
        terms = self._rules_coeff * kl if self._rules_coeff > 0 else 0.0
        if self._rules_entropy > 0:
            logits = fwd_out[Columns.ACTION_DIST_INPUTS]
            terms = terms - self._rules_entropy * _masked_mean(entropy(logits), batch)
        return terms


def _gain(reference: Any, batch: dict[str, Any], ref_out: dict[str, Any]) -> dict[str, float]:
    """The minibatch's whole hands played at rules tables, their returns and the clone's
    values at their first steps: its rows and the sums `learner_stats` reads the gain from
    (how much more than the rules the policy makes from the same deals against the rules, one
    row a hand, `trainer/hand_returns.py`, `trainer/rules_tables.py`). A hand at any other
    table is no row: the clone's value is what the rules make against the rules. Empty where
    the batch holds no such columns (a learner built without the trainer's connector pieces)."""
    returns, at_rules = batch.get(HAND_RETURN), batch.get(RULES_TABLE)
    if returns is None or at_rules is None:
        return {}
    values = reference.compute_values(batch, embeddings=ref_out.get(Columns.EMBEDDINGS))
    returns = returns.reshape(-1)
    first = torch.isfinite(returns) & (at_rules.reshape(-1) > 0)
    r, v = returns[first].double(), values.reshape(-1)[first].double()
    sums = (r.sum(), v.sum(), (r * r).sum(), (v * v).sum(), (r * v).sum())
    return {GAIN_ROWS_KEY: float(r.numel()),
            **{key: float(x) for key, x in zip(GAIN_SUMS_KEYS, sums, strict=True)}}  # fmt: skip


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Per row entropy of softmax(logits); masked slots (probability 0) add nothing."""
    logp = F.log_softmax(logits, dim=-1)
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(logp)).sum(-1)


def _masked_mean(x: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
    """The mean over the batch's real rows (RLlib's loss mask, where it pads)."""
    if Columns.LOSS_MASK in batch:
        mask = batch[Columns.LOSS_MASK].float()
        return (x * mask).sum() / mask.sum().clamp(min=1.0)
    return x.mean()


class AnchoredPPOLearner(_AnchoredMixin, PPOTorchLearner):
    """RLlib's PPO torch learner with the rules anchor's KL term (none until a reference is
    set: then it is RLlib's PPO loss unchanged)."""


class AnchoredAPPOLearner(_AnchoredMixin, APPOTorchLearner):
    """RLlib's APPO torch learner with the rules anchor's KL term."""


# --- installing it in an Algorithm ---------------------------------------------------------


def start_from(algo: Any, weights: dict[str, np.ndarray], version: int) -> None:
    """The learner(s) take `weights` (a full module) as version `version`; the caller then
    hands them to the runners (`sync_weights`), which push them to servers."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    algo.learner_group.set_state(
        {
            COMPONENT_LEARNER: {
                COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: weights},
                WEIGHTS_SEQ_NO: version,
            }
        }
    )
    _on_learners(algo, sync_target_networks)


def _on_learners(algo: Any, func: Any) -> list[Any]:
    """`func(learner)` on every learner; an error in any raises here (RLlib hands remote
    learners' errors back as results)."""
    return [r.get() for r in algo.learner_group.foreach_learner(func)]


def sync_target_networks(learner: Any) -> None:
    """APPO's target networks start as copies of freshly loaded weights, not of the old ones."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    module = learner.module[DEFAULT_MODULE_ID]
    for main, target in getattr(module, "get_target_network_pairs", list)():
        target.load_state_dict(main.state_dict())


def hold_reference(algo: Any, weights: dict[str, np.ndarray]) -> None:
    """Every learner holds `weights` as the anchor's frozen reference."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    _on_learners(algo, lambda learner: learner.set_rules_reference(weights, DEFAULT_MODULE_ID))


def set_coefficients(
    algo: Any, anchor: RulesAnchor, clock: float, released: bool = False
) -> tuple[float, float]:
    """Every learner's KL coefficient and entropy bonus at the anchor's `clock` (both 0 once
    it let go)."""
    coeff = anchor.coefficient(clock, released)
    bonus = anchor.entropy_bonus(clock, released)
    _on_learners(algo, lambda learner: learner.set_rules_coeff(coeff, bonus, not released))
    return coeff, bonus


def after_update(
    algo: Any, anchor: RulesAnchor, release: Release, env_steps: float, result: dict[str, Any]
) -> dict[str, Any]:
    """After an update: whether the anchor lets go (its gain over the clone's values), then
    every learner's coefficients for the next one; what the update measured."""
    epochs = int(getattr(algo.config, "num_epochs", 1) or 1)
    learned = learner_stats(result, epochs, release.scale)
    gain, se = learned.get("gain"), learned.get("gain_se")
    if release.observe(gain, se, env_steps, anchor):
        log.info("the policy makes %+.3f more than the rules from the same states over the "
                 "last %d updates, significantly: the rules anchor lets go at %.0f env steps",
                 sum(release.gains) / len(release.gains) - release.offset, release.updates,
                 env_steps)  # fmt: skip
    coeff, _ = set_coefficients(algo, anchor, release.clock(env_steps), release.released)
    return {"env_steps": env_steps, "clock": release.clock(env_steps), "next_kl_coeff": coeff,
            "released_at": release.released_at, "gain_offset": release.offset,
            "gain_value_scale": release.scale, "gain_floor": release.floor,
            **learned}  # fmt: skip


def held(algo: Any) -> list[tuple[bool, float]]:
    """Each learner: whether it holds a reference, and its coefficient now."""
    return _on_learners(algo, lambda learner: (learner.holds_reference(), learner.rules_coeff()))


def learner_stats(
    result: dict[str, Any], epochs: int = 1, value_scale: float = 1.0
) -> dict[str, float]:
    """The anchor's terms as the learner logged them in an RLlib result: {"kl", "kl_coeff",
    "entropy_boost"} (absent before a learner holds a reference), and the update's "gain",
    the mean of return - `value_scale` * the clone's value over its hands, with its standard
    error "gain_se" (PPO: each of the batch's rows was seen `epochs` times, which leaves the
    mean and spread as they are and divides the count)."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    stats = result.get("learners", {}).get(DEFAULT_MODULE_ID, {})

    def number(key: str) -> float | None:
        value = stats.get(key)
        ok = isinstance(value, int | float) and np.isfinite(value)  # NaN: not measured anew
        return float(value) if ok else None

    out = {}
    for key, name in ((KL_KEY, "kl"), (COEFF_KEY, "kl_coeff"),
                      (ENTROPY_BOOST_KEY, "entropy_boost")):  # fmt: skip
        if (value := number(key)) is not None:
            out[name] = value
    rows, sums = number(GAIN_ROWS_KEY), [number(k) for k in GAIN_SUMS_KEYS]
    if rows is not None and None not in sums and rows >= 2 * epochs:
        r, v, rr, vv, rv = (x / rows for x in sums)  # type: ignore[operator]
        b = value_scale
        mean = r - b * v
        spread = max(rr - 2 * b * rv + b * b * vv - mean * mean, 0.0) ** 0.5
        out["gain"], out["gain_se"] = mean, spread / (rows / max(epochs, 1)) ** 0.5
    return out


def save_anchor(directory: Path, weights: dict[str, np.ndarray], report: dict[str, Any]) -> None:
    from croupier.files import write_atomic

    write_atomic(directory / ANCHOR_WEIGHTS, lambda f: np.savez(f, **weights))
    write_atomic(directory / ANCHOR_STATE, json.dumps({"clone": report, "env_steps": 0}))


def load_anchor(directory: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The clone a trainer in `directory` started from and its state, or None."""
    path = directory / ANCHOR_WEIGHTS
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        weights = {k: data[k] for k in data.files}
    try:
        state = json.loads((directory / ANCHOR_STATE).read_text())
    except (OSError, ValueError):
        state = {"env_steps": 0}
    return weights, state


def save_steps(directory: Path, env_steps: float, release: Release | None = None) -> None:
    """The env steps trained under the anchor, what its clock was set back by and when it let
    go, kept at each checkpoint (a restart goes on from them: `restored_release`)."""
    from croupier.files import write_atomic

    path = directory / ANCHOR_STATE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    state["env_steps"] = float(env_steps)
    if release is not None:
        state["held_back"] = float(release.held_back)
        if release.released_at is not None:
            state["released_at"] = float(release.released_at)
    write_atomic(path, json.dumps(state))


def restored_release(state: dict[str, Any]) -> Release:
    """The anchor's evidence as `save_steps` kept it (a state file from before the pull back
    has no `held_back`: 0), with the clone's value offset from its report (`state["clone"]`,
    as `save_anchor` keeps it; `{"clone": report}` for a clone just distilled)."""

    clone = state.get("clone") if isinstance(state.get("clone"), dict) else {}

    def number(kept: dict[str, Any], key: str) -> float | None:
        value = kept.get(key)
        return float(value) if isinstance(value, int | float) else None

    scale = number(clone, "value_scale")  # 0 is a scale: the value told nothing there
    return Release(released_at=number(state, "released_at"),
                   held_back=number(state, "held_back") or 0.0,
                   seen_steps=number(state, "env_steps") or 0.0,
                   offset=number(clone, "value_offset") or 0.0,
                   offset_se=number(clone, "value_offset_se") or 0.0,
                   scale=1.0 if scale is None else scale,
                   floor=number(clone, "clone_gain"),
                   floor_se=number(clone, "clone_gain_se") or 0.0)  # fmt: skip
