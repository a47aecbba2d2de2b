"""`croupier tune`: a tiny search (two trials of a few seconds on Kuhn poker's simulator, from
the rules' clone) writes a preset file that `croupier train --preset` reads."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from croupier.bench.tune import (
    TuneRun,
    current_preset,
    format_report,
    preset_of,
    search_space,
    trial_config,
    tune_game,
    winner,
)
from croupier.cli import app, train_options
from croupier.config import TrainSettings
from croupier.games.presets import TrainingPreset, load_preset
from croupier.settings import build, options

KUHN = "examples.kuhn.game:KuhnSimulator"


def test_the_current_preset_is_a_trial_config_and_back() -> None:
    base = current_preset("leduc-holdem")  # leduc has no preset: `croupier train`'s defaults
    assert (base.algo, base.hiddens, base.lr, base.train_batch_size) == ("ppo", [128, 128],
                                                                         5e-4, 4000)  # fmt: skip
    config = trial_config(base)
    assert config["hiddens"] == "128,128" and config["minibatches"] == 8
    assert preset_of(base, config) == base
    uno = current_preset("uno")  # a game's own preset, as shipped
    assert uno.policy == "candidates" and uno.hiddens == [256, 256]
    space, mutations = search_space(uno, "pbt", {"hiddens": ["256,256"]})
    assert hasattr(space["score_hidden"], "sample") and not mutations.keys() & {"hiddens"}
    assert preset_of(uno, trial_config(uno)) == uno
    # a masked game does not search a scorer it has no use for
    assert search_space(base, "asha")[0]["score_hidden"] == base.score_hidden


def test_the_winner_trained_longest_then_scored_best() -> None:
    def t(*reports: tuple[float, float, bool]) -> dict:
        return {"reports": [{"trained_s": s, "score": x, "last": last} for s, x, last in reports]}

    stopped_high = t((0, 0.0, False), (20, 0.9, False))  # ASHA stopped it: never finished
    finished = [t((0, 0.0, False), (120, 0.5, True)), t((0, 0.0, False), (125, 0.7, True))]
    assert winner([stopped_high, *finished]) is finished[1]
    # none finished (the budget ran out): the best of those that trained about the longest
    cut = [t((60, 0.8, False)), t((100, 0.3, False)), t((95, 0.4, False))]
    assert winner(cut) is cut[2]
    assert winner([{"reports": []}]) is None


@pytest.mark.ray
def test_a_tiny_tune_writes_a_preset_train_takes(tmp_path) -> None:
    # Small updates (a 2-core box under other work did one 4,000-step update a minute); the
    # space sampled the same, so the second trial differs in its learning rate and entropy.
    small = {"train_batch_size": [256], "minibatches": [2], "num_epochs": [1],
             "hiddens": ["16,16"]}  # fmt: skip
    start = TrainingPreset(algo="ppo", policy="masked", hiddens=[16, 16], lr=1e-3,
                           train_batch_size=256, minibatch_size=128, num_epochs=1)  # fmt: skip
    run = TuneRun(game=KUHN, minutes=3, trials=2, trial_minutes=0.04, eval_every_s=1,
                  eval_hands=100, final_hands=200,
                  rules_anchor={"clone_decisions": 400, "clone_max_decisions": 400},
                  num_envs=8, space=small, start=start, compare=True)  # fmt: skip
    out = tmp_path / "kuhn.json"
    report = tune_game(run, out, tmp_path / "results", tmp_path / "tune")

    trials = report["search"]["trials"]
    assert len(trials) == 2 and all(t["error"] is None for t in trials), trials
    first = trials[0]
    assert first["config"] == trial_config(start)  # the search starts there
    for t in trials:
        scores = [r["score"] for r in t["reports"]]
        assert scores and all(math.isfinite(s) for s in scores)
        assert t["reports"][0]["trained_s"] == 0  # the clone, scored before training
        last = t["reports"][-1]
        if not last["last"]:  # ASHA stopped it at a rung, behind the other (timing decides)
            assert last["trained_s"] < 0.04 * 60 and len(trials) > 1
            continue
        assert last["hands"] == 200 and last["env_steps"] > 0
        assert math.isfinite(last["greedy"])
    # The winner trained its full minutes and was scored over the final hands.
    assert report["search"]["winner"]["last"]["last"]
    preset = load_preset(out, KUHN)
    data = json.loads(out.read_text())
    assert data["game"] == KUHN and data["found_by"]["scheduler"] == "asha"
    assert "croupier tune" in preset.evidence
    (saved,) = (tmp_path / "results").glob("tune-*.json")
    assert saved.with_suffix(".png").stat().st_size > 0

    # Then the start and the winner side by side, the same minutes, scored on the same deals.
    cmp = report["compare"]
    assert list(cmp["sides"]) == ["current", "tuned"] and cmp["rules_record"]["n"] == 200
    assert cmp["sides"]["tuned"]["preset"] == report["tuned"]
    for side in cmp["sides"].values():
        assert side["error"] is None and side["env_steps"] > 0
        assert side["curve"][0]["trained_s"] == 0 and side["curve"][-1]["trained_s"] >= 0.04 * 60
        assert side["final"]["hands"] == 200 and 0 <= side["minutes_below"] <= 1
        assert all(math.isfinite(side["final"][how]["mean"]) for how in ("sampled", "greedy"))
    assert "current: sampled" in format_report(report)

    values = {o.param: o.default for o in options(TrainSettings)}
    opts = train_options(build(TrainSettings, values | {"game": KUHN, "preset": out}))
    assert (opts.hiddens, opts.hyper.lr, opts.hyper.train_batch_size) == (
        preset.hiddens, preset.lr, preset.train_batch_size)  # fmt: skip


def test_tune_refuses_what_it_cannot_search_before_ray_starts(tmp_path) -> None:
    result = CliRunner().invoke(app, ["tune", "--scheduler", "grid"])
    assert result.exit_code == 2 and "asha" in result.output, result.output
    for space in ('{"learning_rate": [1e-3]}', '{"lr": []}', "[1]", "{not json"):
        result = CliRunner().invoke(app, ["tune", "--space", space])
        assert result.exit_code == 2 and "--space" in result.output, (space, result.output)
    result = CliRunner().invoke(app, ["tune", "--game", "examples.kuhn.adapter:NoSuchThing"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
