"""Training presets: built-in games', a studio's own (its adapter's `preset`), and the one
default algorithm for a game without one."""

from __future__ import annotations

import pytest

from croupier.games.leduc import LeducAdapter
from croupier.games.presets import DEFAULT_ALGO, PRESETS, TrainingPreset, preset_for
from croupier.trainer.algo import training_defaults

STUDIO = TrainingPreset(algo="appo", policy="masked", hiddens=[32, 16], lr=3e-4,
                        train_batch_size=512, minibatch_size=128)  # fmt: skip


class StudioGame(LeducAdapter):
    """A studio's adapter that ships its measured preset."""

    preset = STUDIO


class StudioSimulator:
    adapter = "tests.test_presets:StudioGame"


class BadPreset(LeducAdapter):
    preset = {"algo": "ppo"}


def test_a_studios_adapter_ships_its_preset_and_its_simulator_finds_it() -> None:
    assert preset_for("tests.test_presets:StudioGame") is STUDIO
    assert preset_for("tests.test_presets:StudioSimulator") is STUDIO
    spec, hyper = training_defaults("tests.test_presets:StudioGame")
    assert (spec.algo, spec.hiddens, hyper.lr, hyper.train_batch_size) == ("appo", [32, 16],
                                                                            3e-4, 512)  # fmt: skip
    with pytest.raises(TypeError, match="TrainingPreset"):
        preset_for("tests.test_presets:BadPreset")


def test_a_game_without_a_preset_trains_the_default_algorithm_everywhere() -> None:
    from croupier.bench.strength import StrengthRun
    from croupier.demo import ExternalRun
    from croupier.policies.module import ModelSpec
    from croupier.trainer.run import TrainOptions

    assert (
        preset_for("leduc-holdem") is None
        and preset_for("examples.kuhn.game:KuhnSimulator") is None
    )
    assert training_defaults("leduc-holdem")[0].algo == DEFAULT_ALGO == "ppo"
    assert TrainOptions().algo == ModelSpec().algo == DEFAULT_ALGO
    # the benches leave it to the trainer unless told
    assert ExternalRun().algo is None and StrengthRun().algo is None
    assert all(p.algo == "ppo" for p in PRESETS.values())


def test_a_kl_target_turns_on_ppos_own_kl_penalty_and_refuses_a_negative_one() -> None:
    """`croupier train --kl-target X`: RLlib's adaptive KL between the policy before and after
    an update (off by default: the clip alone)."""
    from croupier.trainer.algo import base_config

    spec, hyper = training_defaults("leduc-holdem")
    assert base_config(spec, hyper).use_kl_loss is False
    spec, hyper = training_defaults("leduc-holdem", None, {"kl_target": 0.01})
    config = base_config(spec, hyper)
    assert (config.use_kl_loss, config.kl_target, config.kl_coeff) == (True, 0.01, 0.2)
    with pytest.raises(ValueError, match="kl_target"):
        training_defaults("leduc-holdem", None, {"kl_target": -0.1})


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--kl-target", "-0.1"], "kl_target"),
        (["--clone-decisions", "0"], "clone_decisions"),
        (["--clone-smoothing", "1.5"], "smoothing"),
    ],  # fmt: skip
)
def test_a_training_setting_out_of_its_range_is_a_usage_error_not_a_traceback(flags, says):
    from typer.testing import CliRunner

    from croupier.cli import app

    result = CliRunner().invoke(app, ["train", "--game", "leduc-holdem", *flags])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
