"""`croupier bench strength` for a game croupier does not ship (Kuhn poker, examples/kuhn),
through its simulator alone: the external path and RLlib in-process on the simulator, both
scored against the game's rules, sampled and greedy, with a 95% CI."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from croupier.bench.strength import StrengthRun, bench_strength, format_report
from croupier.cli import app

pytestmark = pytest.mark.system  # a trainer and a server process, then Ray in-process: ~1.5 min

SIMULATOR = "examples.kuhn.game:KuhnSimulator"


def test_bench_strength_takes_a_game_through_its_simulator(tmp_path):
    # 0.35 min: at 0.2 the external trainer once finished no update inside the window while
    # the rest of `make test` loaded both cores (its clock starts when the trainer is up).
    run = StrengthRun(
        game=SIMULATOR,
        minutes=0.35,
        eval_every_s=8,
        eval_games=200,
        final_games=400,
        tables=16,
        ray_cpus=2,
        search="search:base=rules:rollouts=4:ms=20",
    )
    report = bench_strength(run, tmp_path)

    for key in ("external", "anchor"):
        side = report[key]
        assert side["env_steps"] > 0, key  # each side trained on the simulator's game
        for how in ("sampled", "greedy"):
            f = side["final"][how]
            assert f["n"] >= 400 and math.isfinite(f["mean"]) and 0 <= f["ci95"] < 1, (key, how)
            # Sampled play varies deal to deal. Greedy play may not: a version still at the
            # rules' clone plays the rules' own move on every deal, each deal's score then
            # exactly 0 (duplicate deals, less the deal's par) and so is its CI.
            assert f["ci95"] > 0 or (how == "greedy" and f["mean"] == 0), (key, how, f)
    # The external side is the version the servers played, learned from the engine's games.
    assert "version 0" not in report["external"]["setting"]
    # Its curve: the served versions, snapshot from minute 0, each scored against the rules.
    curve = report["external"]["curve"]
    assert curve and curve[0]["seconds"] < 5 and all(math.isfinite(p["mean"]) for p in curve)
    assert any(p["payoff"] is not None for p in report["external"]["training_curve"])
    assert report["external"]["minutes_below"] >= 0
    assert report["rules_record"] == 0.0  # the rules' strength score against themselves
    (written,) = tmp_path.glob("strength-kuhn-poker-*.json")
    written_run = json.loads(written.read_text())["run"]
    assert written_run["game"] == SIMULATOR and "learn" not in written_run  # doudizhu's only
    assert written.with_suffix(".png").stat().st_size > 0
    text = format_report(report)
    assert text.count("sampled") == 2 and text.count("greedy") == 2, text
    # Both sides started from the rules' clone (the default); the rules' own record is drawn
    # from the game (the rules in the learned seat's place), each curve's minutes below it.
    assert report["external"]["clone"]["greedy_agreement"] > 0.9
    assert report["anchor"]["clone"]["greedy_agreement"] > 0.9
    # The record is measured, not assumed: the rules in the learned seat's place on the same
    # duplicate deals (0 by construction on the strength score), and their raw payoff per hand.
    detail = report["rules_record_detail"]
    assert detail["mean"] == report["rules_record"] and detail["n"] >= 400
    assert math.isfinite(detail["payoff"]) and detail["payoff_ci95"] > 0  # Kuhn's deals vary
    for key in ("external", "anchor"):
        assert 0.0 <= report[key]["minutes_below"] <= run.minutes, key
        assert f"{key}: " in text and "min significantly below the rules' record" in text
        assert report[key]["below_resolution"] > 0, key  # the smallest dip a point shows
    # The setup before the clock (servers, trainer, the clone) is measured and said apart.
    assert report["external"]["setup_s"] > 0 and "of setup before it not counted" in text
    # The search seat's level before any training, on the same deals as the finals: Kuhn's
    # rules answer themselves best, so the search over them keeps their moves (0.0).
    searched = report["search"]
    assert searched["seat"] == "search:base=rules:rollouts=4:ms=20:top=8"
    assert searched["score"]["n"] >= 400 and searched["decisions"] > 0
    assert abs(searched["score"]["mean"]) <= searched["score"]["ci95"] + 0.05
    assert "with no training" in text


def test_a_search_seat_it_cannot_score_is_refused_before_any_run(tmp_path):
    refusals = (("rules", "not a search seat"), ("search:base=frozen@3", "base=rules or"))
    for seat, why in refusals:
        result = CliRunner().invoke(
            app, ["bench", "strength", "--game", SIMULATOR, "--search", seat,
                  "--out", str(tmp_path)],
        )  # fmt: skip
        assert result.exit_code == 2 and why in result.output, result.output


def test_a_game_it_cannot_load_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(
        app, ["bench", "strength", "--game", "examples.kuhn.adapter:NoSuchThing",
              "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_the_rules_anchor_through_train_arg_is_a_usage_error(tmp_path):
    """The bench waits for the trainer's clone by its own --rules-anchor: the trainer told
    --no-rules-anchor behind its back would be waited for until a timeout."""
    result = CliRunner().invoke(
        app, ["bench", "strength", "--game", "examples.kuhn.adapter:KuhnAdapter", "--minutes",
              "1", "--train-arg=--no-rules-anchor", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--no-rules-anchor" in result.output and "Traceback" not in result.output
    assert not any(tmp_path.iterdir())  # nothing started
