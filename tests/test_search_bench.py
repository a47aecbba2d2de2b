"""`croupier bench search` (`bench/search.py`): the search seat's points against its base alone,
on duplicate sets or on one side's seats."""

from __future__ import annotations

import json

import pytest

from croupier.bench.search import SearchBench, run_search_bench


def test_the_search_finds_the_gamble_its_base_never_takes(tmp_path) -> None:
    # Gambling is worth +0.5 a hand and the rules always play safe (0): the rules alone
    # score 0 against themselves, the search over them gambles.
    # The best mean, and the best beyond one standard error: a point each, both gamble.
    run = SearchBench("tests.helpers.search_games:GambleAdapter", "search:rollouts=64",
                      budgets_ms=[50], hands=200, seed=3, confidences=(0.0, 1.0))  # fmt: skip
    report = run_search_bench(run, tmp_path)
    assert report["base_alone"]["mean"] == 0.0
    assert [p["confidence"] for p in report["points"]] == [0.0, 1.0]
    for point in report["points"]:
        assert point["score"]["mean"] - point["score"]["ci95"] > 0.1
        assert point["decisions"] > 0 and point["playouts_per_decision"] > 1
    saved = json.loads((tmp_path / "search-gamble-rules.json").read_text())
    assert saved["points"][0]["seat"] == "search:base=rules:rollouts=64:ms=50:top=8"


def test_a_side_scores_its_win_rate_on_that_sides_seats(tmp_path) -> None:
    run = SearchBench("doudizhu", "search:rollouts=2", budgets_ms=[20], hands=4, seed=5,
                      side="peasant")  # fmt: skip
    report = run_search_bench(run, tmp_path)
    alone, (point,) = report["base_alone"], report["points"]
    for score in (alone, point["score"]):
        assert score["side"] == "peasant" and score["n"] == 4
        assert score["mean"] == score["win"] and 0.0 <= score["win"] <= 1.0
    # Two peasants a hand, both searched: more decisions than hands.
    assert point["decisions"] > 4
    assert "peasant side" in report["setting"]
    assert (tmp_path / "search-doudizhu-rules-peasant.json").exists()


def test_a_sweep_of_rollouts_is_a_point_each_at_every_budget(tmp_path) -> None:
    run = SearchBench("tests.helpers.search_games:GambleAdapter", "search:rollouts=64",
                      budgets_ms=[50], hands=40, seed=3, rollouts=(2, 16))  # fmt: skip
    report = run_search_bench(run, tmp_path)
    assert [p["rollouts"] for p in report["points"]] == [2, 16]
    assert [p["seat"].split(":")[2] for p in report["points"]] == ["rollouts=2", "rollouts=16"]
    two, sixteen = (p["playouts_per_decision"] for p in report["points"])
    assert two <= 2 * 2 < sixteen  # two moves a decision: at most 2 x 2 hands played out
    assert (tmp_path / "search-gamble-rules-rollouts.json").exists()
    with pytest.raises(ValueError, match="worlds a move"):
        run_search_bench(SearchBench("tests.helpers.search_games:GambleAdapter", "search",
                                     rollouts=(0,)), tmp_path)  # fmt: skip


def test_a_confidence_outside_its_bounds_is_refused(tmp_path) -> None:
    run = SearchBench("tests.helpers.search_games:GambleAdapter", "search", confidences=(-1.0,))
    with pytest.raises(ValueError, match="standard errors"):
        run_search_bench(run, tmp_path)


def test_a_side_the_game_does_not_have_is_refused_by_name(tmp_path) -> None:
    run = SearchBench("doudizhu", "search:rollouts=2", budgets_ms=[20], hands=2, side="dealer")
    with pytest.raises(ValueError, match="no side 'dealer'"):
        run_search_bench(run, tmp_path)


def test_the_command_line_reaches_the_bench_with_its_options(tmp_path) -> None:
    from typer.testing import CliRunner

    from croupier.cli import app

    args = ["bench", "search", "--game", "tests.helpers.search_games:GambleAdapter",
            "--seat", "search:rollouts=8", "--budgets", "20", "--hands", "8",
            "--confidence", "0,2", "--out", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "search-gamble-rules.json").read_text())
    assert report["run"]["confidences"] == [0.0, 2.0] and report["run"]["hands"] == 8
    assert report["run"]["weights_dir"] is None and report["run"]["side"] is None
    bad = CliRunner().invoke(app, [*args[:-4], "--confidence", "x", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "Invalid value" in bad.output, bad.output


def test_the_ceiling_searches_the_table_as_it_is(tmp_path) -> None:
    """`bench/tools/search_ceiling.py`: on the gamble the true card decides, so the seat
    gambles exactly when it wins, never when it loses; the score and the moves it changed
    are in the file it writes."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench/tools/search_ceiling.py"
    spec = importlib.util.spec_from_file_location("search_ceiling", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    from tests.helpers.search_games import Gamble

    table = Gamble()
    seat = tool.TrueTableSearch(table, lambda state: "safe")
    for deal in range(40):
        table.reset(deal)
        assert seat({"legal_actions": ["safe", "gamble"]}) == (
            "gamble" if table.card == "win" else "safe"
        )
    assert 0 < seat.changed < seat.decisions == 40
    out = tmp_path / "ceiling.json"
    game = "tests.helpers.search_games:GambleAdapter"
    assert tool.main(["--game", game, "--hands", "200", "--out", str(out)]) == 0
    (point,) = json.loads(out.read_text())["points"]
    # Each gamble it took won 1 (the rules' safe play: 0), scored as half of A - B: a deal
    # whose card wins is worth +0.5.
    assert point["changed"] > 50
    assert point["score"]["mean"] == pytest.approx(point["changed"] / point["decisions"] / 2)
