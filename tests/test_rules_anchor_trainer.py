"""`croupier train` with rules-anchored learning: a first start serves the rules' clone as
version 1, the learners hold it as the KL term's reference, the coefficient follows the env
steps trained, and a restart holds the same clone without distilling it again."""

from __future__ import annotations

import numpy as np
import pytest

from croupier.trainer import rules_anchor as ra
from tests.helpers.trainer import RunningTrainer, trainer_options

GAME = "leduc-holdem"
ANCHOR = ra.RulesAnchor(
    clone_decisions=1500, clone_max_decisions=1500, clone_epochs=5, kl_coeff=0.5, half_life=1000
)


@pytest.mark.ray
def test_a_first_start_serves_the_rules_clone_and_a_restart_holds_it(ray_session, tmp_path):
    rt = RunningTrainer(trainer_options(tmp_path, rules_anchor=ANCHOR, iterations=2))
    try:
        assert rt.seq() == 1  # the clone, before any update
        clone, state = ra.load_anchor(tmp_path)
        assert state["clone"]["greedy_agreement"] > 0.95
        runner = rt.runner.module.state_dict()
        served = {k: v for k, v in clone.items() if k in runner}  # the policy's layers
        assert served and all(np.allclose(runner[k].numpy(), v) for k, v in served.items())
        assert ra.held(rt.trainer.algo) == [(True, 0.5)]
        rt.start().join(120, feed=True)
        anchor = rt.trainer.last_progress["rules_anchor"]
        # The critic's share of the value targets' variance, as RLlib's PPO measured it.
        explained = rt.trainer.last_progress["value_explained_variance"]
        entropy = rt.trainer.last_progress["policy_entropy"]
    finally:
        rt.close()
    assert isinstance(explained, float) and explained <= 1.0
    assert isinstance(entropy, float) and entropy > 0.0  # the learner's own, from PPO
    # The last update ran under the coefficient set after the one before (its clock moved:
    # decayed, or pulled back where the policy fell below the rules).
    assert anchor["kl"] >= 0.0 and anchor["kl_coeff"] > 0.0
    assert anchor["env_steps"] > 0 and anchor["clock"] <= anchor["env_steps"]
    assert anchor["next_kl_coeff"] == pytest.approx(ANCHOR.coefficient(anchor["clock"]))
    written = (tmp_path / ra.ANCHOR_WEIGHTS).stat().st_mtime_ns

    again = RunningTrainer(trainer_options(tmp_path, rules_anchor=ANCHOR))
    try:
        assert again.seq() >= 3  # the checkpoint's version, not the clone's
        held = ra.held(again.trainer.algo)
        assert held == [(True, pytest.approx(ANCHOR.coefficient(anchor["clock"])))]
    finally:
        again.close()
    assert (tmp_path / ra.ANCHOR_WEIGHTS).stat().st_mtime_ns == written  # not distilled again


@pytest.mark.ray
def test_no_rules_anchor_starts_untrained(ray_session, tmp_path):
    rt = RunningTrainer(trainer_options(tmp_path, rules_anchor=ra.RulesAnchor(enabled=False)))
    try:
        assert rt.seq() == 0 and ra.load_anchor(tmp_path) is None
        assert ra.held(rt.trainer.algo) == [(False, 0.0)]
    finally:
        rt.close()
