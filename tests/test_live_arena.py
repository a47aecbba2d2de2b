"""The live arena: a match table from every ended game (players, opponents, payoffs only),
served at /v1/arena/live, on the dashboard and in /metrics, kept across restarts; and the
comparison `promote --evidence live` decides on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from croupier.arena.promote_live import compare, merge_rows
from croupier.policies.rollout.live import SAVE_EVERY_S, LiveArena, player_of
from croupier.policies.seats import SeatPolicy
from tests.conftest import play_hands_over_http
from tests.helpers.prometheus import parse, value

GAME = "leduc-holdem"
READ = {"Authorization": "Bearer rd"}


def _plan(*policies: SeatPolicy) -> dict[str, SeatPolicy]:
    return {str(i): p for i, p in enumerate(policies)}


def test_players_name_the_version_that_played_whatever_the_seat_spec() -> None:
    assert player_of(SeatPolicy("frozen", 7)) == "frozen@7"
    assert player_of(SeatPolicy("learned", 7, record=True)) == "frozen@7"  # pinned: same policy
    assert player_of(SeatPolicy("frozen", 7, channel="production")) == "frozen@7"
    assert player_of(SeatPolicy("learned", None, record=True)) == "learned@latest"
    assert player_of(SeatPolicy("rules", 3, channel="shadow")) == "rules"  # the rules acted
    assert player_of(SeatPolicy("random")) == "random"
    greedy = SeatPolicy("frozen", 7, channel="production", greedy=True)
    assert player_of(greedy) == "frozen@7:greedy"  # another policy than the sampling one


def test_rows_per_player_and_opponents_with_mean_and_ci() -> None:
    live = LiveArena()
    rng = np.random.default_rng(0)
    payoffs = rng.normal(0.5, 2.0, 400)
    for x in payoffs:
        live.add_game(_plan(SeatPolicy("frozen", 3), SeatPolicy("rules")), {"0": x, "1": -x})
    # a three-seat game with two seats of one policy: each is the other's opponent
    live.add_game(
        _plan(SeatPolicy("random"), SeatPolicy("random"), SeatPolicy("rules")),
        {"0": 1.0, "1": 2.0, "2": -3.0},
    )
    rows = {(r["player"], tuple(r["opponents"])): r for r in live.table()["rows"]}
    assert live.games == 401
    row = rows[("frozen@3", ("rules",))]
    assert row["games"] == 400
    assert math.isclose(row["mean"], payoffs.mean(), abs_tol=1e-9)
    assert math.isclose(row["std"], payoffs.std(ddof=1), rel_tol=1e-9)
    assert math.isclose(row["ci95"], 1.96 * payoffs.std(ddof=1) / 20, rel_tol=1e-9)
    assert math.isclose(rows[("rules", ("frozen@3",))]["mean"], -payoffs.mean(), abs_tol=1e-9)
    assert rows[("random", ("random", "rules"))]["games"] == 2
    assert rows[("rules", ("random", "random"))]["mean"] == -3.0


def test_rows_are_bounded_least_recently_played_first() -> None:
    live = LiveArena(max_rows=4)
    for v in range(10):
        live.add_game(_plan(SeatPolicy("frozen", v), SeatPolicy("rules")), {"0": 1.0, "1": -1.0})
    players = {r["player"] for r in live.rows()}
    assert len(live.rows()) == 4 and "frozen@9" in players and "frozen@0" not in players


def test_compare_pools_common_opponents_and_merges_servers() -> None:
    """A's advantage over B against the same opponents, pooled; a fleet's rows merge exactly."""
    rng = np.random.default_rng(1)
    a, b = LiveArena(), LiveArena()  # two servers
    for i in range(600):
        server = a if i % 2 else b
        opponent = SeatPolicy("rules") if i % 3 else SeatPolicy("random")
        shift = 0.0 if opponent.kind == "rules" else 1.0  # random opponents pay more: a stratum
        x = rng.normal(0.3 + shift, 1.0)
        y = rng.normal(0.0 + shift, 1.0)
        server.add_game(_plan(SeatPolicy("frozen", 2), opponent), {"0": x, "1": -x})
        server.add_game(_plan(opponent, SeatPolicy("frozen", 1)), {"0": -y, "1": y})
    rows = merge_rows([a.rows(), b.rows()])
    result = compare(rows, "frozen@2", "frozen@1")
    assert result["games"] == [600, 600]
    assert len(result["strata"]) == 2
    assert result["diff"] - result["cs95"] > 0 and abs(result["diff"] - 0.3) < 3 * result["se"]
    assert result["cs95"] > result["ci95"] > 0  # the always-valid bound is the wider
    # the merge is exact: one server that saw every game gives the same numbers
    one = LiveArena()
    for cell_key, cell in rows.items():
        one._rows[cell_key] = cell
    assert compare(merge_rows([one.rows()]), "frozen@2", "frozen@1")["diff"] == pytest.approx(
        result["diff"]
    )
    reverse = compare(rows, "frozen@1", "frozen@2")
    assert reverse["diff"] == pytest.approx(-result["diff"])
    nothing = compare(rows, "frozen@2", "frozen@9")
    assert nothing["games"] == [0, 0] and nothing["diff"] is None


def test_the_table_is_saved_and_read_back(tmp_path) -> None:
    live = LiveArena(tmp_path)
    for x in (1.0, -2.0, 4.0):
        live.add_game(_plan(SeatPolicy("frozen", 5), SeatPolicy("random")), {"0": x, "1": -x})
    live.save()
    again = LiveArena(tmp_path)
    assert again.games == 3 and again.rows() == live.rows()
    # while games end, the table is written from a thread, at most every SAVE_EVERY_S
    live._saved_at -= SAVE_EVERY_S + 1
    live.add_game(_plan(SeatPolicy("frozen", 5), SeatPolicy("random")), {"0": 0.5, "1": -0.5})
    assert live._writer is not None
    live._writer.shutdown(wait=True)
    assert LiveArena(tmp_path).games == 4
    (tmp_path / "live_arena.json").write_text("{not json")
    assert LiveArena(tmp_path).rows() == []  # damaged: an empty table, not a failed start


def test_live_table_over_http_dashboard_and_metrics_and_across_a_restart(inprocess, tmp_path):
    """Games through the API fill the table; /v1/arena/live is typed and needs a key; the
    dashboard's data and /metrics carry it; a restarted server (same weights dir) keeps it."""
    config = dict(game=GAME, api_keys=["eng"], read_keys=["rd"], weights_dir=tmp_path, seed=3)

    async def play(client, service):
        seats = lambda h: {"0": "rules", "1": "random"} if h % 2 else {"0": "random", "1": "rules"}  # noqa: E731
        client.headers["Authorization"] = "Bearer eng"
        await play_hands_over_http(client, GAME, 40, seats, record=False)
        del client.headers["Authorization"]
        assert (await client.get("/v1/arena/live")).status_code == 401
        table = (await client.get("/v1/arena/live", headers=READ)).json()
        data = (await client.get("/dashboard/data.json", headers=READ)).json()
        metrics = parse((await client.get("/metrics")).text)
        return table, data, metrics

    table, data, metrics = inprocess(play, **config)
    rows = {(r["player"], tuple(r["opponents"])): r for r in table["rows"]}
    assert table["games"] == 40 and table["persisted"] is True
    assert rows[("rules", ("random",))]["games"] == 40
    assert rows[("rules", ("random",))]["mean"] == pytest.approx(
        -rows[("random", ("rules",))]["mean"]
    )
    assert data["live_arena"] == {**table, "rows_total": len(table["rows"])}  # <= 20 rows
    count = value(metrics, "croupier_live_arena_payoff_count", player="rules", opponents="random")
    total = value(metrics, "croupier_live_arena_payoff_sum", player="rules", opponents="random")
    assert count == 40 and total == pytest.approx(40 * rows[("rules", ("random",))]["mean"])

    async def read(client, service):
        return (await client.get("/v1/arena/live", headers=READ)).json()

    assert inprocess(read, **config) == table  # saved at shutdown, read back at start


def test_metrics_carry_only_the_newest_versions_rows() -> None:
    """Label values stay bounded: a long run's hundred versions export four versions' rows."""
    from croupier.api.live_arena import METRIC_VERSIONS, metric_rows

    live = LiveArena()
    for v in range(100):
        live.add_game(_plan(SeatPolicy("frozen", v), SeatPolicy("rules")), {"0": 1.0, "1": -1.0})
    live.add_game(_plan(SeatPolicy("frozen", 99), SeatPolicy("frozen", 3)), {"0": 1.0, "1": -1.0})
    greedy = SeatPolicy("frozen", 99, greedy=True)
    live.add_game(_plan(greedy, SeatPolicy("rules")), {"0": 1.0, "1": -1.0})
    exported = metric_rows(live.rows())
    players = {r["player"] for r in exported}
    recent = {f"frozen@{v}" for v in range(100 - METRIC_VERSIONS, 100)}
    assert players == recent | {"rules", "frozen@99:greedy"}
    assert all("frozen@3" not in r["opponents"] for r in exported)
    assert len(exported) == 2 * METRIC_VERSIONS + 2  # each version's row and the rules' against it


def test_the_always_valid_boundary_holds_over_many_looks() -> None:
    """Standard normal games with no advantage, a look after every game from 100 to 4,000:
    a fixed 1.96 is crossed on most paths sooner or later, the mixture boundary on few."""
    from croupier.stats import mixture_boundary

    rng = np.random.default_rng(0)
    looks = np.arange(100, 4001)
    boundary = np.array([mixture_boundary(n, 100) for n in looks])
    z = rng.standard_normal((400, looks[-1])).cumsum(axis=1)[:, looks - 1] / np.sqrt(looks)
    assert (z >= boundary).any(axis=1).mean() < 0.05
    assert (z >= 1.96).any(axis=1).mean() > 0.15
    assert mixture_boundary(100, 100) == pytest.approx(3.035, abs=1e-3)
