"""A training preset as a JSON file (`croupier tune`'s output): written and read back equal,
refused with a message naming the file and the field when it is not a usable preset, and taken
by `croupier train --preset` and `bench strength --preset`."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
from typer.testing import CliRunner

from croupier.cli import app, train_options
from croupier.config import TrainSettings
from croupier.games.presets import (
    PRESETS,
    PresetError,
    TrainingPreset,
    load_preset,
    preset_from_dict,
    save_preset,
)
from croupier.settings import build, options

TUNED = TrainingPreset(algo="ppo", policy="masked", hiddens=[64, 32], lr=1.3e-3,
                       entropy_coeff=0.004, train_batch_size=2000, minibatch_size=250,
                       num_epochs=2, gamma=1.0, lambda_=0.9)  # fmt: skip


def test_a_preset_file_reads_back_equal(tmp_path):
    found_by = {"scheduler": "asha", "trials": 8}
    path = save_preset(TUNED, tmp_path / "sub" / "p.json", "leduc-holdem", found_by)
    data = json.loads(path.read_text())
    assert data["game"] == "leduc-holdem" and data["found_by"] == found_by
    assert load_preset(path) == TUNED
    assert load_preset(path, "leduc-holdem") == TUNED
    for preset in PRESETS.values():  # the shipped ones are valid presets too
        assert load_preset(save_preset(preset, tmp_path / "x.json")) == preset
    # JSON writes 1 for 1.0: still the preset's float
    data = {**asdict(TUNED), "gamma": 1, "lr": 1}
    assert preset_from_dict(data).gamma == 1.0 and type(preset_from_dict(data).lr) is float


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON object"),
        (json.dumps({"policy": "masked"}), "missing ['algo']"),
        (json.dumps({**asdict(TUNED), "learning_rate": 1e-3}), "unknown keys ['learning_rate']"),
        (json.dumps({**asdict(TUNED), "algo": "dqn"}), "algo: one of ['ppo', 'appo']"),
        (json.dumps({**asdict(TUNED), "lr": -1e-3}), "lr: a number in [0, 1]"),
        (json.dumps({**asdict(TUNED), "lr": 0}), "lr: a number in (0, 1]"),
        (json.dumps({**asdict(TUNED), "lr": "fast"}), "lr: a number"),
        (json.dumps({**asdict(TUNED), "hiddens": []}), "hiddens: a list of 1 to 16"),
        (json.dumps({**asdict(TUNED), "hiddens": [64, 0]}), "hiddens[1]: a positive integer"),
        (json.dumps({**asdict(TUNED), "num_epochs": 2.5}), "num_epochs: a positive integer"),
        (json.dumps({**asdict(TUNED), "minibatch_size": 4000}), "larger than train_batch_size"),
        (json.dumps({**asdict(TUNED), "gamma": 1.5}), "gamma: a number in [0, 1]"),
        (json.dumps({**asdict(TUNED), "game": "uno"}), "was found for 'uno', not 'leduc-holdem'"),
    ],
)
def test_a_bad_preset_file_is_refused_saying_what_is_wrong(tmp_path, text, says):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PresetError) as e:
        load_preset(path, "leduc-holdem")
    assert str(path) in str(e.value) and says in str(e.value), str(e.value)
    with pytest.raises(PresetError, match="cannot read it"):
        load_preset(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="minibatch_size"):  # never written either
        save_preset(replace(TUNED, minibatch_size=10**6), tmp_path / "never.json")
    assert not (tmp_path / "never.json").exists()


def _settings(**given: object) -> TrainSettings:
    values = {o.param: o.default for o in options(TrainSettings)} | given
    return build(TrainSettings, values)


def test_train_takes_the_preset_file_and_flags_still_override_it(tmp_path):
    path = save_preset(TUNED, tmp_path / "p.json", "leduc-holdem")
    opts = train_options(_settings(game="leduc-holdem", preset=path))
    h = opts.hyper
    assert (opts.algo, opts.hiddens, h.lr, h.entropy_coeff) == ("ppo", [64, 32], 1.3e-3, 0.004)
    assert (h.train_batch_size, h.minibatch_size, h.num_epochs, h.extra["lambda_"]) == (
        2000, 250, 2, 0.9)  # fmt: skip
    opts = train_options(_settings(game="leduc-holdem", preset=path, lr=2e-4, hiddens="16"))
    assert (opts.hyper.lr, opts.hiddens, opts.hyper.train_batch_size) == (2e-4, [16], 2000)
    # without it: the game's own (leduc has none: the defaults)
    assert train_options(_settings(game="leduc-holdem")).hiddens == [128, 128]


def test_a_bad_preset_file_is_a_usage_error_before_anything_starts(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**asdict(TUNED), "minibatch_size": 4000}))
    for argv in (
        ["train", "--game", "leduc-holdem", "--preset", str(path)],
        ["bench", "strength", "--game", "leduc-holdem", "--preset", str(path),
         "--out", str(tmp_path)],
    ):  # fmt: skip
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, result.output
        assert "larger than train_batch_size" in result.output and "Traceback" not in result.output


def test_bench_strength_hands_the_preset_file_to_both_sides(tmp_path):
    from croupier.bench.strength import StrengthRun, preset_flags, run_preset

    path = save_preset(TUNED, tmp_path / "p.json")
    run = StrengthRun(game="leduc-holdem", preset=str(path))
    assert run_preset(run) == TUNED and preset_flags(run) == ["--preset", str(path)]
    assert run_preset(StrengthRun(game="leduc-holdem")) is None
