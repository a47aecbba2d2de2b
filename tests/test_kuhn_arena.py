"""A game croupier does not ship (Kuhn poker, examples/kuhn) gets the arena, the league and
`promote --auto` through its simulator alone: duplicate deals with a 95% CI, sampled and
greedy, with no change to croupier."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from typer.testing import CliRunner

from croupier.arena.arena import play_arena
from croupier.arena.league import play_league
from croupier.arena.promote import auto_promote
from croupier.cli import app
from croupier.dashboard.score import score_version
from croupier.engine.runner import run_engine
from tests.helpers.servers import ThreadServer

pytestmark = pytest.mark.integration  # a server on a thread, a few hundred hands: ~10 s

SIMULATOR = "examples.kuhn.game:KuhnSimulator"
ADAPTER = "examples.kuhn.adapter:KuhnAdapter"


@pytest.fixture(scope="module")
def kuhn(tmp_path_factory):
    wd, offline = tmp_path_factory.mktemp("weights"), tmp_path_factory.mktemp("offline")
    keys = {"admin_keys": ["adm"], "api_keys": ["adm"]}
    with ThreadServer(game=ADAPTER, weights_dir=wd, offline_dir=offline, **keys) as s:
        versions = s.service.versions
        versions.install(1, {k: v + 0.5 for k, v in versions.weights().items()})
        yield s


def arena(server, a, b, hands, game=SIMULATOR, **kw):
    return asyncio.run(play_arena(server.url, game, a, b, hands, api_key="adm", **kw))


def test_duplicate_deals_replay_each_deal_with_the_seats_swapped(kuhn):
    # The rules are deterministic: against themselves every duplicate pair scores exactly 0,
    # which only holds if both hands of a pair were dealt the same cards.
    mirror = arena(kuhn, "rules", "rules", 100)
    assert mirror.game == "kuhn-poker" and mirror.pairs == 50 and mirror.errors == 0
    assert mirror.pair_values == [0.0] * 50 and mirror.ci95 == 0.0
    # The studio's bot against random play: a mean with a finite CI, over 200 pairs.
    r = arena(kuhn, "rules", "random", 400, game=ADAPTER)
    assert r.hands == 400 and r.pairs == 200 and r.errors == 0
    assert math.isfinite(r.ci95) and r.ci95 > 0
    assert r.mean > 0, r.format()  # measured +0.2..0.3 per hand


def test_eval_reports_sampled_and_greedy(kuhn):
    result = CliRunner().invoke(
        app,
        ["eval", "--game", SIMULATOR, "--url", kuhn.url, "--a", "learned@latest", "--b", "rules",
         "--hands", "60", "--tables", "4", "--json", "--api-key", "adm"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["game"] == "kuhn-poker" and report["hands"] == 60
    assert report["seats"] == {"a": "frozen@1", "b": "rules"}
    assert math.isfinite(report["mean"]) and math.isfinite(report["ci95"])
    greedy = report["greedy"]
    assert greedy["seats"] == {"a": "frozen@1:greedy", "b": "rules"}
    assert greedy["hands"] == 60 and math.isfinite(greedy["ci95"])


def test_league_and_auto_promotion_play_kuhn(kuhn):
    players = ["learned@1", "rules", "random"]
    league = asyncio.run(play_league(kuhn.url, SIMULATOR, players, 40, api_key="adm", tables=4))
    assert set(league["ratings"]) == set(players) and league["game"] == SIMULATOR
    assert len(league["matches"]) == 3 and all(m["hands"] == 40 for m in league["matches"])
    decision = asyncio.run(auto_promote(kuhn.url, SIMULATOR, 40, admin_key="adm", tables=4))
    evidence = decision["evidence"]
    assert evidence["arena"]["game"] == "kuhn-poker" and evidence["arena"]["hands"] == 40
    assert evidence["baseline"] == "rules"
    assert decision["promoted"] == (evidence["arena"]["mean"] - evidence["arena"]["ci95"] > 0)


def test_engine_rules_recording_and_score_play_kuhn(kuhn):
    """`croupier engine` (here with `record: rules`, what `pretrain` learns from) and `croupier
    score` (the dashboard's learning curve) deal Kuhn through its simulator too."""
    summary = asyncio.run(
        run_engine(kuhn.url, SIMULATOR, 4, ["rules", "random"], 40, None, api_key="adm",
                   record="rules")
    )  # fmt: skip
    assert summary.hands == 40 and summary.errors == 0, summary.error_samples
    assert set(summary.policies) == {"rules", "random"}
    assert summary.policies["rules"].n == 40  # one seat each hand, seats alternated
    assert kuhn.service.rollout.offline.stats()["episodes"] == 40  # the rules seat of each hand
    point = asyncio.run(score_version(kuhn.url, SIMULATOR, 1, 40, tables=4, api_key="adm"))
    assert point.version == 1 and point.hands == 40 and point.opponent == "rules"
