"""Rules-anchored learning (`trainer/rules_anchor.py`): the KL term toward the rules' clone in
RLlib's PPO and APPO learners (masked and candidate modules), its coefficient's schedule, the
release and the pull back, and "minutes below the rules' record". The clone itself:
tests/test_rules_clone.py."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier.bench.record import evaluation_spans, window_spans
from croupier.policies.learned import module_weights
from croupier.policies.module import ModelSpec
from croupier.stats import minutes_below, significantly_below
from croupier.trainer import rules_anchor as ra
from croupier.trainer.algo import Hyper, base_config
from croupier.trainer.hand_returns import HAND_RETURN
from croupier.trainer.learners import LEARNER_CLASSES
from croupier.trainer.rules_tables import RULES_TABLE


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


# --- the KL term ---------------------------------------------------------------------------


def test_kl_is_zero_for_the_reference_itself_and_positive_otherwise():
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 0]], dtype=torch.float32)
    illegal = torch.clamp(torch.log(mask), min=FLOAT_MIN)
    ref = torch.randn(2, 4) + illegal
    assert torch.allclose(ra.kl_to_reference(ref, ref), torch.zeros(2), atol=1e-6)
    other = torch.randn(2, 4) + illegal
    kl = ra.kl_to_reference(other, ref)
    assert torch.isfinite(kl).all() and (kl > 0).all()


def test_coefficient_schedule():
    anchor = ra.RulesAnchor(kl_coeff=0.8, entropy_boost=0.04, half_life=1000)
    assert anchor.coefficient(0) == 0.8 and anchor.entropy_bonus(0) == 0.04
    assert anchor.coefficient(1000) == pytest.approx(0.4)
    assert anchor.entropy_bonus(1000) == pytest.approx(0.02)
    assert anchor.coefficient(3000) == pytest.approx(0.1)
    # A clock set back (`Release`): a harder pull, up to max_pull times the start; the entropy
    # bonus never above its start.
    assert anchor.coefficient(-1000) == pytest.approx(1.6)
    assert anchor.coefficient(-(10**9)) == pytest.approx(0.8 * 32)
    assert anchor.entropy_bonus(-1000) == 0.04
    fixed = ra.RulesAnchor(kl_coeff=0.8, half_life=1000, pull_back=False)
    assert fixed.coefficient(-1000) == 0.8 and fixed.earliest == 0.0
    assert ra.RulesAnchor(kl_coeff=0.8, half_life=0).coefficient(10**9) == 0.8
    assert ra.RulesAnchor(kl_coeff=0.0).coefficient(0) == 0.0
    off = ra.RulesAnchor(enabled=False)
    assert off.coefficient(0) == 0.0 and off.entropy_bonus(0) == 0.0


def test_release_lets_go_once_the_last_updates_gains_are_significantly_above_and_stays_gone():
    anchor = ra.RulesAnchor(kl_coeff=0.05, entropy_boost=0.04, half_life=1000)
    release = ra.Release(updates=3, t=4.303)  # t at 95% for 2 degrees of freedom
    # Too few updates yet, however clear each one claims to be.
    assert not release.observe(0.30, 0.01, 100) and not release.observe(0.30, 0.01, 200)
    assert release.verdict() == 0
    # Three above 0 that swing more than their own errors say: the spread decides, not in.
    assert not release.observe(0.01, 0.01, 300)  # mean 0.203, spread 0.167: +-0.41
    assert release.verdict() == 0 and not release.released
    assert not release.observe(None, None, 350)  # an update without a whole hand
    assert not release.observe(0.25, 0.01, 400)  # 0.30, 0.01, 0.25: mean 0.187, +-0.39
    # Own errors set a floor: consistent gains but each too uncertain.
    floor = ra.Release(updates=3, t=4.303)
    for steps in (100, 200, 300):
        floor.observe(0.30, 0.30, steps)
    assert floor.verdict() == 0 and not floor.released
    assert anchor.coefficient(400, release.released) > 0
    assert not release.observe(0.28, 0.01, 500)  # 0.01, 0.25, 0.28: mean 0.18, +-0.37
    assert release.observe(0.30, 0.01, 600)  # 0.25, 0.28, 0.30: mean 0.277, +-0.062
    assert release.released_at == 600
    assert anchor.coefficient(600, release.released) == 0.0
    assert anchor.entropy_bonus(600, release.released) == 0.0
    assert not release.observe(-5.0, 0.01, 700) and release.released  # for good
    below = ra.Release(updates=2)
    for steps in range(10):  # below the rules' values: the anchor holds, however long
        assert not below.observe(-0.2, 0.05, steps)
    assert below.verdict() == -1 and below.held_back == 0.0  # no anchor: the clock untouched


def test_the_gains_are_judged_less_the_clones_value_offset_and_its_error():
    # Gains of +0.03 a hand over the clone's values, whose own error at first steps is +0.05
    # (the rules make 0.05 more than it says): 0.02 below the rules, significantly.
    steady = [0.03, 0.031, 0.029, 0.03, 0.03]
    below = ra.Release(offset=0.05, offset_se=0.002)
    for steps, gain in enumerate(steady):
        below.observe(gain, 0.001, steps)
    assert below.verdict() == -1
    plain = ra.Release()  # the same gains with no offset: above
    for steps, gain in enumerate(steady):
        plain.observe(gain, 0.001, steps)
    assert plain.verdict() == 1 and plain.released
    # The offset's own error widens the interval: no verdict either way.
    unsure = ra.Release(offset=0.05, offset_se=0.02)
    for steps, gain in enumerate(steady):
        unsure.observe(gain, 0.001, steps)
    assert unsure.verdict() == 0


def test_the_pull_back_answers_a_policy_below_its_clone_not_a_clone_below_the_rules():
    # A sampled clone 0.06 a hand below the rules (its measured floor), and a policy that
    # plays like it: below the rules significantly, yet pulling back to the clone cannot
    # lift it, so the clock runs on with the steps (the coefficient decays).
    anchor = ra.RulesAnchor(kl_coeff=0.05, half_life=1000, max_pull=8)
    at_clone = ra.Release(updates=3, t=4.303, floor=-0.06, floor_se=0.01)
    for steps, gain in ((100, -0.06), (200, -0.055), (300, -0.065), (400, -0.06)):
        at_clone.observe(gain, 0.005, steps, anchor)
    assert at_clone.verdict() == -1  # below the rules: what the reports say
    assert not at_clone.below_clone() and at_clone.held_back == 0.0
    assert at_clone.clock(400) == 400
    # The policy drifts below its clone, significantly: pulled back.
    for steps, gain in ((500, -0.15), (600, -0.16), (700, -0.15)):
        at_clone.observe(gain, 0.005, steps, anchor)
    assert at_clone.below_clone() and at_clone.held_back > 0
    # The floor's own error widens the interval: 0.03 below a floor known to ±0.04 is not.
    unsure = ra.Release(updates=3, t=4.303, floor=-0.06, floor_se=0.02)
    for steps, gain in ((100, -0.09), (200, -0.09), (300, -0.09)):
        unsure.observe(gain, 0.001, steps, anchor)
    assert not unsure.below_clone() and unsure.held_back == 0.0
    # Without a measured floor (a clone kept before it), the rules' level, as before.
    rules_level = ra.Release(updates=3, t=4.303)
    for steps, gain in ((100, -0.06), (200, -0.055), (300, -0.065)):
        rules_level.observe(gain, 0.005, steps, anchor)
    assert rules_level.below_clone() and rules_level.held_back > 0


def test_a_policy_below_the_rules_sets_the_clock_back_and_the_pull_grows():
    anchor = ra.RulesAnchor(kl_coeff=0.05, entropy_boost=0.1, half_life=1000, max_pull=8)
    release = ra.Release(updates=3, t=4.303)
    assert release.clock(0) == 0
    # Below, but not significantly over the window: the clock runs on with the steps.
    for steps, gain in ((100, -0.10), (200, 0.05), (300, -0.12)):
        assert not release.observe(gain, 0.01, steps, anchor)
    assert release.verdict() == 0 and release.held_back == 0 and release.clock(300) == 300
    # The window turns significantly below at the update of 600 steps: that update's 100 steps
    # do not count, and a half-life goes back.
    release.observe(-0.10, 0.01, 400, anchor)  # 0.05, -0.12, -0.10: not yet
    release.observe(-0.11, 0.01, 500, anchor)  # -0.12, -0.10, -0.11: below
    assert release.verdict() == -1
    assert release.clock(500) == pytest.approx(400 - 1000)
    assert anchor.coefficient(release.clock(500)) == pytest.approx(0.05 * 2**0.6)
    # Each further update judged below doubles it again, up to max_pull times the start.
    for steps in range(600, 6000, 100):
        release.observe(-0.10, 0.01, steps, anchor)
    assert release.clock(5900) == pytest.approx(anchor.earliest)
    assert anchor.coefficient(release.clock(5900)) == pytest.approx(0.05 * 8)
    assert anchor.entropy_bonus(release.clock(5900)) == pytest.approx(0.1)
    # Level with the rules again: the clock runs forward from there, the pull decays.
    for steps in (6000, 6100, 6200):
        release.observe(0.0, 0.01, steps, anchor)
    assert release.verdict() == 0
    assert release.clock(6200) == pytest.approx(anchor.earliest + 300)  # its 3 updates
    assert not release.released
    # And a policy clearly better still lets go.
    for steps in (6300, 6400, 6500):
        release.observe(0.3, 0.01, steps, anchor)
    assert release.released and anchor.coefficient(release.clock(6500), True) == 0.0
    # An anchor that does not let go judges, and holds.
    kept = ra.Release(updates=2)
    for steps in (100, 200, 300):
        assert not kept.observe(0.5, 0.01, steps, replace(anchor, release=False))
    assert kept.verdict() == 1 and not kept.released
    # Without pull back the clock is the steps, whatever the evidence.
    fixed = ra.Release(updates=2)
    for steps in (100, 200, 300):
        fixed.observe(-0.5, 0.01, steps, replace(anchor, pull_back=False))
    assert fixed.verdict() == -1 and fixed.clock(300) == 300


@pytest.mark.integration
def test_the_learner_measures_its_gain_over_the_clones_values_across_an_update():
    learner = _learner("ppo", MASKED_SPACE)
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = _batch(MASKED_SPACE, rows=64)
    learner.set_rules_reference(module_weights(module), DEFAULT_MODULE_ID)
    with torch.no_grad():
        fwd = module.forward_train(batch)
        values = module.compute_values(batch, embeddings=fwd.get(Columns.EMBEDDINGS))
    noise = torch.randn(64, generator=torch.Generator().manual_seed(0))
    # A whole hand's return at every 4th row (its first step), NaN at the others.
    first = torch.arange(64) % 4 == 0
    returns = torch.where(first, values + 0.5 + 0.1 * noise, torch.nan)
    halves = (slice(0, 32), slice(32, 64))
    learner.metrics.reduce()  # nothing logged before

    def minibatch(rows: slice, with_returns: bool = True) -> None:
        part = {Columns.OBS: {k: v[rows] for k, v in batch[Columns.OBS].items()},
                Columns.ACTIONS: batch[Columns.ACTIONS][rows]}  # fmt: skip
        if with_returns:
            part[HAND_RETURN] = returns[rows]
            part[RULES_TABLE] = torch.ones(rows.stop - rows.start)
        with torch.no_grad():
            learner._anchor_term(DEFAULT_MODULE_ID, part, module.forward_train(part))

    def update_result() -> dict:
        """What an RLlib result holds of the learner's metrics after an update: numbers."""
        reduced = learner.metrics.reduce()[DEFAULT_MODULE_ID]
        return {"learners": {DEFAULT_MODULE_ID: {k: float(v.peek()) for k, v in reduced.items()}}}

    for _ in range(2):  # two epochs over two minibatches: each row seen twice
        for rows in halves:
            minibatch(rows)
    stats = ra.learner_stats(update_result(), epochs=2)
    diff = (returns - values)[first].numpy().astype(np.float64)
    assert stats["gain"] == pytest.approx(diff.mean(), abs=1e-6)
    assert stats["gain_se"] == pytest.approx(diff.std() / 4, rel=1e-3)  # 16 hands, not 32
    minibatch(halves[0])  # the next update: its own rows alone, the last update's cleared
    stats = ra.learner_stats(update_result())
    assert stats["gain"] == pytest.approx(diff[:8].mean(), abs=1e-6)
    minibatch(halves[0], with_returns=False)  # no hands' returns in the batch: no gain
    assert "gain" not in ra.learner_stats(update_result())


# --- the learners --------------------------------------------------------------------------

OBS, FEAT, SLOTS = 6, 3, 5
MASKED_SPACE = gym.spaces.Dict({
    "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
    "action_mask": gym.spaces.Box(0.0, 1.0, (SLOTS,), np.float32),
})  # fmt: skip
CANDIDATE_SPACE = gym.spaces.Dict({
    "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
    "candidates": gym.spaces.Box(-np.inf, np.inf, (SLOTS, FEAT), np.float32),
    "candidate_mask": gym.spaces.Box(0.0, 1.0, (SLOTS,), np.float32),
})  # fmt: skip


def _learner(algo: str, space: gym.spaces.Dict) -> object:
    action = gym.spaces.Discrete(SLOTS)
    spec = ModelSpec(algo=algo, hiddens=[8], score_hidden=8)
    config = base_config(spec, Hyper(train_batch_size=8, minibatch_size=8), space, action)
    torch.manual_seed(0)
    return config.build_learner(spaces={DEFAULT_MODULE_ID: (space, action)})


def _batch(space: gym.spaces.Dict, rows: int = 8) -> dict:
    rng = np.random.default_rng(0)
    mask = (rng.random((rows, SLOTS)) < 0.7).astype(np.float32)
    mask[:, 0] = 1.0
    obs = {"observations": torch.from_numpy(rng.normal(size=(rows, OBS)).astype(np.float32))}
    if "candidates" in space.spaces:
        cands = rng.normal(size=(rows, SLOTS, FEAT)).astype(np.float32) * mask[..., None]
        obs |= {"candidates": torch.from_numpy(cands), "candidate_mask": torch.from_numpy(mask)}
    else:
        obs["action_mask"] = torch.from_numpy(mask)
    return {Columns.OBS: obs, Columns.ACTIONS: torch.zeros(rows, dtype=torch.int64)}


@pytest.mark.integration  # builds RLlib learners in-process (no Ray session)
@pytest.mark.parametrize(
    ("algo", "space"),
    [
        ("ppo", MASKED_SPACE),
        ("appo", MASKED_SPACE),
        ("ppo", CANDIDATE_SPACE),
        ("appo", CANDIDATE_SPACE),
    ],  # fmt: skip
    ids=["ppo-masked", "appo-masked", "ppo-candidates", "appo-candidates"],
)
def test_the_learner_holds_a_reference_and_measures_kl_to_it(algo, space):
    learner = _learner(algo, space)
    assert isinstance(learner, LEARNER_CLASSES[algo])
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = _batch(space)
    assert learner._anchor_term(DEFAULT_MODULE_ID, batch, module.forward_train(batch)) is None

    learner.set_rules_reference(module_weights(module), DEFAULT_MODULE_ID)
    same = learner._anchor_term(DEFAULT_MODULE_ID, batch, module.forward_train(batch))
    assert float(same.detach()) == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():  # the policy moves away from the reference (which stays put)
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    moved = learner._anchor_term(DEFAULT_MODULE_ID, batch, module.forward_train(batch))
    assert float(moved.detach()) > 1e-4
    assert moved.requires_grad  # it trains the policy ...
    reference = learner._rules_reference[DEFAULT_MODULE_ID]
    assert not any(p.requires_grad for p in reference.parameters())  # ... never the reference


@pytest.mark.integration
def test_the_ppo_loss_gains_exactly_coeff_times_kl():
    learner = _learner("ppo", MASKED_SPACE)
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = _batch(MASKED_SPACE)
    with torch.no_grad():
        logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    rows = len(logits)
    batch |= {
        Columns.ACTION_DIST_INPUTS: logits,
        Columns.ACTION_LOGP: torch.log_softmax(logits, -1)[:, 0],
        Postprocessing.ADVANTAGES: torch.linspace(-1, 1, rows),
        Postprocessing.VALUE_TARGETS: torch.zeros(rows),
    }
    reference = module_weights(module)
    reference = {k: v + 0.2 * np.random.default_rng(1).normal(size=v.shape).astype(v.dtype)
                 if v.dtype.kind == "f" else v for k, v in reference.items()}  # fmt: skip
    learner.set_rules_reference(reference, DEFAULT_MODULE_ID)
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)

    def loss(coeff: float, bonus: float = 0.0) -> float:
        learner.set_rules_coeff(coeff, bonus)
        fwd = module.forward_train(batch)
        total = learner.compute_loss_for_module(
            module_id=DEFAULT_MODULE_ID, config=config, batch=batch, fwd_out=fwd
        )
        return float(total.detach())

    with torch.no_grad():
        fwd = module.forward_train(batch)
        kl = float(learner._anchor_term(DEFAULT_MODULE_ID, batch, fwd))
        h = float(ra.entropy(fwd[Columns.ACTION_DIST_INPUTS]).mean())
    assert kl > 1e-4 and h > 0.1
    assert loss(0.7) - loss(0.0) == pytest.approx(0.7 * kl, rel=1e-4, abs=1e-6)
    # The entropy bonus: the loss falls by bonus x the policy's mean entropy.
    assert loss(0.0, 0.05) - loss(0.0) == pytest.approx(-0.05 * h, rel=1e-4, abs=1e-6)
    # Let go: neither term, and the reference is not run at all (its forward is not free).
    reference_module = learner._rules_reference[DEFAULT_MODULE_ID]
    calls: list[int] = []
    run_reference = reference_module.forward_train
    reference_module.forward_train = lambda b: calls.append(1) or run_reference(b)
    learner.set_rules_coeff(0.0, 0.0, watching=False)
    with torch.no_grad():
        assert learner._anchor_term(DEFAULT_MODULE_ID, batch, fwd) is None
    assert calls == []
    learner.set_rules_coeff(0.0)
    with torch.no_grad():
        assert learner._anchor_term(DEFAULT_MODULE_ID, batch, fwd) is not None
    assert calls == [1]


# --- minutes below the rules' record --------------------------------------------------------


def test_minutes_below_on_a_synthetic_curve():
    record = 0.5  # not 0: a game that is not zero-sum has its own
    curve = [
        {"seconds": 0.0, "mean": 0.1, "ci95": 0.2},  # 0.3 < 0.5: below, for 30 s
        {"seconds": 30.0, "mean": 0.35, "ci95": 0.2},  # 0.55: within the CI, not below
        {"seconds": 90.0, "mean": 0.2, "ci95": 0.1},  # below, 90 -> 120 s
        {"seconds": 120.0, "mean": 0.8, "ci95": 0.1},  # above, to the end (180 s)
    ]
    spans = evaluation_spans(curve, end_s=180.0)
    assert [s[:2] for s in spans] == [(0.0, 30.0), (30.0, 90.0), (90.0, 120.0), (120.0, 180.0)]
    assert minutes_below(spans, record) == pytest.approx(1.0)  # 30 s + 30 s
    assert minutes_below(spans, 0.0) == 0.0
    assert significantly_below(0.1, 0.2, 0.5) and not significantly_below(0.35, 0.2, 0.5)


def test_minutes_below_of_training_windows_pooled_with_their_ci():
    """Training hands pooled into windows (`demo.window_means`): each window's CI from its
    points' own counts, means and CIs; a window covers the seconds it was played in."""
    from croupier.demo import window_means
    from croupier.stats import Z95, Mean

    rng = np.random.default_rng(0)
    points, stream = [], []
    for i in range(12):  # 12 points 5 s apart: the first 6 lose 1.0 a hand, then win 0.2
        x = rng.normal(-1.0 if i < 6 else 0.2, 1.0, size=400)
        stream.append(x)
        m = Mean()
        for v in x:
            m.add(float(v))
        d = m.to_dict()
        points.append({"seconds": 5.0 * (i + 1) - 0.1, "payoff": d["mean"], "ci95": d["ci95"],
                       "window_hands": d["n"]})  # fmt: skip
    windows = window_means(points, 30.0)
    assert [w["hands"] for w in windows] == [2400, 2400]
    first = np.concatenate(stream[:6])
    assert windows[0]["payoff"] == pytest.approx(first.mean())
    assert windows[0]["ci95"] == pytest.approx(Z95 * first.std(ddof=1) / np.sqrt(first.size))
    spans = window_spans(windows, end_s=59.9)
    assert minutes_below(spans, 0.0) == pytest.approx(0.5)  # the first 30 s only


def test_learner_stats_keeps_what_was_measured_and_drops_nan():
    result = {"learners": {DEFAULT_MODULE_ID: {ra.KL_KEY: 0.01, ra.COEFF_KEY: float("nan"),
                                               ra.GAIN_ROWS_KEY: 0.0}}}  # fmt: skip
    assert ra.learner_stats(result) == {"kl": 0.01}


def test_the_anchors_evidence_is_kept_beside_the_checkpoint(tmp_path):
    clone = {"greedy_agreement": 1.0, "value_offset": -0.04, "value_offset_se": 0.02,
             "value_scale": 0.0, "clone_gain": -0.05, "clone_gain_se": 0.01}  # fmt: skip
    ra.save_anchor(tmp_path, {"w": np.zeros(2, np.float32)}, clone)
    release = ra.Release(held_back=1234.0, released_at=5678.0)
    ra.save_steps(tmp_path, 9000.0, release)
    _, state = ra.load_anchor(tmp_path)
    again = ra.restored_release(state)
    assert (again.held_back, again.released_at, again.seen_steps) == (1234.0, 5678.0, 9000.0)
    assert (again.offset, again.offset_se) == (-0.04, 0.02)  # the clone's, from its report
    assert (again.floor, again.floor_se) == (-0.05, 0.01)
    assert again.scale == 0.0  # 0 is a scale (the value told nothing), not "missing"
    assert again.clock(9000.0) == release.clock(9000.0) and state["clone"]
    # A state kept before the pull back: nothing held back, not let go.
    old = ra.restored_release({"env_steps": 10.0})
    assert (old.held_back, old.released_at, old.seen_steps) == (0.0, None, 10.0)
    assert (old.offset, old.offset_se, old.scale) == (0.0, 0.0, 1.0)  # kept before them
    assert old.floor is None  # the rules' level
