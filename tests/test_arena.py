"""Arena statistics, league ratings and auto-promotion against a live HTTP server."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from croupier.arena.arena import ArenaError, play_arena
from croupier.arena.league import play_league, save_league
from croupier.arena.promote import auto_promote
from tests.helpers.servers import ThreadServer

GAME = "leduc-holdem"
# Leduc's action order: call, raise, fold, check. The rules raise, else call, else check.
RULES_CLONE = {"raise": 50.0, "call": 0.0, "check": -50.0, "fold": -100.0}
FOLDER = {"fold": 50.0, "check": 0.0, "call": -50.0, "raise": -100.0}
ORDER = ("call", "raise", "fold", "check")


def crafted(service, prefs: dict[str, float]) -> dict[str, np.ndarray]:
    """Weights whose policy is a fixed preference order over legal actions: the output
    layer's bias dominates (its weights zeroed)."""
    weights = {k: v.copy() for k, v in service.versions.weights().items()}
    weights["pi.net.mlp.0.weight"][:] = 0.0
    weights["pi.net.mlp.0.bias"][:] = [prefs[a] for a in ORDER]
    return weights


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    wd = tmp_path_factory.mktemp("weights")
    with ThreadServer(admin_keys=["adm"], api_keys=["adm"], weights_dir=wd) as server:
        versions = server.service.versions
        versions.install(1, crafted(server.service, FOLDER))
        versions.install(2, crafted(server.service, RULES_CLONE))
        server.weights_dir = wd
        yield server


def arena(live, a, b, hands, **kw):
    return asyncio.run(play_arena(live.url, GAME, a, b, hands, api_key="adm", **kw))


def test_a_known_better_policy_wins_with_a_ci_above_zero(live):
    r = arena(live, "rules", "random", 400)
    assert r.hands == 400 and r.pairs == 200 and r.errors == 0
    assert r.ci_low > 0.5  # rules vs random is ~+1.1 per hand
    assert r.win > r.loss
    assert abs(r.win + r.draw + r.loss - 1) < 1e-9
    assert r.hands_per_s > 0
    assert r.seats == {"a": "rules", "b": "random"}


def test_identical_policies_ci_contains_zero(live):
    # Duplicate deals: a deterministic policy against itself scores exactly 0 per pair.
    clone = arena(live, "frozen@2", "rules", 200)
    assert clone.seats["a"] == "frozen@2"
    assert clone.ci_low <= 0 <= clone.ci_high
    # Random against random is only zero on average: the CI must still contain it. One table
    # and the server's seeded generator make the run reproducible.
    rand = arena(live, "random", "random", 400, tables=1, seed=3)
    assert rand.ci95 > 0
    assert rand.ci_low <= 0 <= rand.ci_high


def test_text_report_names_the_version_latest_was(live):
    r = arena(live, "learned@latest", "learned@1", 20)  # the old name: a deprecated alias
    assert r.seats == {"a": "frozen@2", "b": "frozen@1"}
    head, payoff = r.format().splitlines()[:2]
    assert head.startswith(f"{GAME}: learned@latest (v2) vs learned@1 (v1), 20 hands")
    assert payoff.startswith("strength score of learned@latest (v2) against learned@1 (v1): ")


def test_unknown_policies_are_refused(live):
    with pytest.raises(ArenaError):
        arena(live, "frozen@77", "rules", 10)
    with pytest.raises(ArenaError):
        arena(live, "production", "rules", 10)  # nothing promoted yet (module order)
    with pytest.raises(ArenaError):
        arena(live, "bogus", "rules", 10)


def test_league_ranks_rules_and_its_clone_above_random(live, tmp_path):
    players = ["frozen@1", "frozen@2", "rules", "random"]
    league = asyncio.run(play_league(live.url, GAME, players, 80, api_key="adm", tables=8))
    ratings = league["ratings"]
    assert set(ratings) == set(players)
    assert all(r["sigma"] > 0 for r in ratings.values())
    assert ratings["rules"]["ordinal"] > ratings["random"]["ordinal"]
    assert ratings["frozen@2"]["ordinal"] > ratings["frozen@1"]["ordinal"]
    assert league["payoff"]["rules"]["random"] > 0
    saved = save_league(league, tmp_path / "run", live.weights_dir)
    assert json.loads(saved.read_text())["ratings"] == ratings
    assert (tmp_path / "run" / "table.txt").read_text().count("\n") >= len(players) + 1
    assert "ratings" in json.loads((live.weights_dir / "ratings.json").read_text())


def test_auto_promotion_refuses_a_worse_version_and_takes_a_better_one(live, tmp_path):
    log = tmp_path / "decisions.jsonl"
    service = live.service

    def promote(**kw):
        return asyncio.run(
            auto_promote(live.url, GAME, 200, admin_key="adm", tables=8, log_path=log, **kw)
        )

    # Nothing in production: the newest (2, the rules' clone) must beat the rules: it ties.
    tie = promote()
    assert not tie["promoted"] and service.rollout.channels.production is None
    # Production = 2; a worse newest version (3, the folder) is refused.
    service.rollout.channels.promote(2, {"by": "test"})
    service.versions.install(3, crafted(service, FOLDER))
    worse = promote()
    assert not worse["promoted"]
    assert worse["evidence"]["arena"]["mean"] < 0
    assert service.rollout.channels.production == 2
    # A better newest version (4, the clone again, against production = the folder) is taken.
    service.rollout.channels.promote(3, {"by": "test"})
    service.versions.install(4, crafted(service, RULES_CLONE))
    better = promote()
    assert better["promoted"], better["reason"]
    assert service.rollout.channels.production == 4
    assert better["server"]["evidence"]["arena"]["mean"] > 0
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["promoted"] for x in lines] == [False, False, True]
    server_log = (live.weights_dir / "promotions.jsonl").read_text().splitlines()
    assert json.loads(server_log[-1])["evidence"]["baseline"] == "production"


def test_auto_promotion_reaches_every_server_of_the_fleet(live, tmp_path):
    """`promote --auto --url a,b`: the arena runs on the first server, the winner is promoted
    on all (production is the folder on both; the newest, 5, is the rules' clone)."""
    with ThreadServer(admin_keys=["adm"], api_keys=["adm"]) as other:
        for server in (live, other):
            versions = server.service.versions
            for v, prefs in ((3, FOLDER), (5, RULES_CLONE)):
                if v not in versions.versions():
                    versions.install(v, crafted(server.service, prefs))
            if server.service.rollout.channels.production != 3:
                server.service.rollout.channels.promote(3, {"by": "test"})
        decision = asyncio.run(
            auto_promote(
                live.url, GAME, 200, admin_key="adm", tables=8, fleet=[live.url, other.url]
            )
        )
        assert decision["promoted"], decision["reason"]
        assert decision["fleet"]["ok"] and decision["fleet"]["consistent"]
        for server in (live, other):
            assert server.service.rollout.channels.production == 5


def test_auto_promotion_can_judge_greedy_play(live, tmp_path):
    """`promote --auto --play greedy`: the candidate's greedy play against production's
    greedy play, on the same deals; the evidence says so."""
    service = live.service
    for v, prefs in ((6, FOLDER), (7, RULES_CLONE)):
        service.versions.install(v, crafted(service, prefs))
    service.rollout.channels.promote(6, {"by": "test"})
    decision = asyncio.run(
        auto_promote(live.url, GAME, 200, admin_key="adm", tables=8, play="greedy")
    )
    arena = decision["evidence"]["arena"]
    assert decision["play"] == "greedy" and decision["evidence"]["play"] == "greedy"
    assert (arena["a"], arena["b"]) == ("frozen@7:greedy", "production:greedy")
    assert arena["seats"] == {"a": "frozen@7:greedy", "b": "production:greedy"}
    assert decision["promoted"], decision["reason"]
    assert service.rollout.channels.production == 7
    with pytest.raises(ValueError, match="play must be"):
        asyncio.run(auto_promote(live.url, GAME, 20, admin_key="adm", play="argmax"))


@pytest.mark.integration
def test_a_side_alone_is_measured_against_b_there_on_the_same_deals():
    """`side`: A plays doudizhu's landlord alone, the rules there on the same deals and as the
    peasants both times. A random landlord wins ~5% where the rules' wins ~50%: half of the
    gap below 0; its win rate counts its own hands only."""
    with ThreadServer(game="doudizhu", api_keys=["k"]) as server:
        match = play_arena(server.url, "doudizhu", "random", "rules", 60, side="landlord",
                           api_key="k", tables=8)  # fmt: skip
        r = asyncio.run(match)
        assert r.side == "landlord" and r.pairs == 30 and r.hands == 60 and r.errors == 0
        assert r.mean + r.ci95 < 0 and r.win < 0.3
        assert abs(r.win + r.draw + r.loss - 1) < 1e-9
        assert "as landlord" in r.format()
        with pytest.raises(ArenaError, match="no side 'dealer'"):
            asyncio.run(play_arena(server.url, "doudizhu", "random", "rules", 4, side="dealer",
                                   api_key="k"))  # fmt: skip
