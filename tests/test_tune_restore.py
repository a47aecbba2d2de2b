"""A PBT trial of `croupier tune` that copies another one goes on from that one's weights,
clone and clock, not from scratch (its checkpoint, written and read by the trial itself; Ray
Tune's report and checkpoint calls replaced by recorders, the RLlib training real)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from croupier.bench.tune import CHECKPOINT, TuneRun, trial, trial_config, trial_setup
from croupier.games.presets import TrainingPreset

KUHN = "examples.kuhn.game:KuhnSimulator"
SMALL = TrainingPreset(algo="ppo", policy="masked", hiddens=[16, 16], lr=1e-3,
                       train_batch_size=256, minibatch_size=128, num_epochs=1)  # fmt: skip


def _run_trial(monkeypatch, setup: dict, config: dict, start: Any, keep: Path) -> list[dict]:
    """The trial's reports; each report's checkpoint copied under `keep`."""
    from ray import tune

    reports: list[dict[str, Any]] = []

    def report(metrics: dict, checkpoint: Any = None) -> None:
        assert checkpoint is not None  # PBT: every report carries one
        with checkpoint.as_directory() as folder:
            shutil.copytree(folder, keep / str(len(reports)))
        reports.append(dict(metrics))

    monkeypatch.setattr(tune, "report", report)
    monkeypatch.setattr(tune, "get_checkpoint", lambda: start)
    trial(config, setup)
    return reports


@pytest.mark.usefixtures("ray_session")
def test_a_copied_trial_starts_from_the_weights_it_copied(monkeypatch, tmp_path) -> None:
    from ray import tune

    run = TuneRun(game=KUHN, eval_every_s=2, eval_hands=50, final_hands=50, num_envs=8,
                  rules_anchor={"clone_decisions": 300, "clone_max_decisions": 300})  # fmt: skip
    setup = trial_setup(run, SMALL, trial_s=4.0, checkpoints=True)
    config = trial_config(SMALL)
    donor = _run_trial(monkeypatch, setup, config, None, tmp_path / "donor")
    assert donor[0]["trained_s"] == 0 and donor[-1]["last"] and donor[-1]["env_steps"] > 0
    last = tmp_path / "donor" / str(len(donor) - 1)
    with np.load(last / CHECKPOINT) as saved:
        donor_arrays = dict(saved)
    assert any(k.startswith("ref/") for k in donor_arrays)  # the clone travels with it

    # The copy: another learning rate, the donor's checkpoint, 3 more seconds to train.
    copied = {**config, "lr": 3e-3}
    setup_more = {**setup, "trial_s": donor[-1]["trained_s"] + 3.0}
    start = tune.Checkpoint.from_directory(str(last))
    reports = _run_trial(monkeypatch, setup_more, copied, start, tmp_path / "copy")
    first = reports[0]  # reported before any update of its own
    assert first["trained_s"] == pytest.approx(donor[-1]["trained_s"])
    assert first["env_steps"] == donor[-1]["env_steps"]
    with np.load(tmp_path / "copy" / "0" / CHECKPOINT) as saved:
        restored = dict(saved)
    assert restored.keys() == donor_arrays.keys()
    # the weights, the clone, the clock and the anchor's release: all the donor's
    for key, value in donor_arrays.items():
        assert np.array_equal(restored[key], value, equal_nan=True), key
    assert reports[-1]["env_steps"] > first["env_steps"]  # and it trained on from there
