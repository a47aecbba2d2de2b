"""The `best-response` seat (`policies/best_response.py`): the exact best response to the
newest version, served from the state an engine sends, recomputed on a new version, refused
for a game without a tree; and a league's share of it (`--league-best-response-share`)."""

from __future__ import annotations

import asyncio
import collections

import numpy as np
import pytest

from croupier.games.registry import load_adapter
from croupier.games.tree import game_tree
from croupier.policies.best_response import BestResponseSeat
from croupier.policies.distribution import version_policy
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.policies.rollout.league import LeaguePool, LeagueSampling
from croupier.policies.seats import BEST_RESPONSE, parse_spec
from tests.helpers.hands import play_hand

HISTORY = "croupier.games.leduc:LeducHistoryAdapter"


def _versions(seed: int = 3) -> PolicyVersions:
    return PolicyVersions(load_adapter(HISTORY), ModelSpec(algo="ppo", hiddens=[16]), seed=seed)


def _table_probs(tree, seat: BestResponseSeat) -> np.ndarray:
    """The seat's table as slot probabilities: its action with probability 1 in every state."""
    return tree.slot_probs(lambda states: [{seat.act(s): 1.0} for s in states])


def _payoffs_against(tree, mine: np.ndarray, theirs: np.ndarray) -> list[float]:
    """`mine`'s expected payoff per hand in each seat, `theirs` in the other."""
    return [
        float(tree.expected(tree.edge_probs([mine, theirs] if s == 0 else [theirs, mine]))[s])
        for s in range(2)
    ]


def test_the_seat_wins_the_exact_best_response_and_refreshes_on_a_new_version():
    tree = game_tree(HISTORY)
    versions = _versions()
    adapter = load_adapter(HISTORY)
    seat = BestResponseSeat(HISTORY, adapter, versions)
    assert seat.problem() is None and not seat.ready
    seat.refresh(wait=True)
    assert seat.version == 0 and seat.computed == 1

    def check(version: int) -> np.ndarray:
        probs = tree.slot_probs(version_policy(adapter, versions, version))
        sigma = tree.edge_probs([probs, probs])
        best = [tree.best_response(sigma, s)[0] for s in range(2)]
        mine = _table_probs(tree, seat)
        # Played from the states an engine sends, the table wins what the best response does.
        won = _payoffs_against(tree, mine, probs)
        assert won == pytest.approx(best, abs=1e-9) and seat.wins == pytest.approx(best)
        # and more than the version wins against itself (an untrained net: ~uniform play)
        itself = _payoffs_against(tree, probs, probs)
        assert all(w > i + 0.5 for w, i in zip(won, itself, strict=True)), (won, itself)
        assert seat.missed == 0
        return mine

    first = check(0)
    # The same version again: nothing to recompute.
    seat.refresh(wait=True)
    assert seat.computed == 1
    weights = versions.weights()
    versions.install(7, {k: w + np.float32(0.5) * np.sign(w) for k, w in weights.items()})
    seat.refresh(wait=True)
    assert seat.version == 7 and seat.computed == 2
    second = check(7)
    assert (first != second).any()  # another version, another best response


def test_a_game_without_a_tree_has_no_best_response_seat():
    uno = BestResponseSeat("uno", load_adapter("uno"), PolicyVersions(load_adapter("uno")))
    assert "small enough to walk whole" in (uno.problem() or "")
    assert parse_spec("best-response").name == BEST_RESPONSE
    with pytest.raises(ValueError):
        parse_spec("best-response:greedy")
    with pytest.raises(ValueError, match="best-response share"):
        LeagueSampling("fsp", rules_share=0.5, best_response_share=0.6)


def test_the_league_draws_the_best_response_its_share_once_a_table_is_ready():
    loaded = [0, 4, 8]
    pool = LeaguePool(None, np.random.default_rng(2), LeagueSampling("fsp", 0.2, 0.5))
    draws = collections.Counter(pool.draw(loaded, best_response=True) for _ in range(4000))
    assert 0.46 < draws[BEST_RESPONSE] / 4000 < 0.54  # binomial(4000, 0.5): ±6 sd
    assert 0.17 < draws[None] / 4000 < 0.23
    assert {d for d in draws if isinstance(d, int)} == set(loaded)
    # no table yet: its share goes to the versions
    waiting = collections.Counter(pool.draw(loaded, best_response=False) for _ in range(1000))
    assert BEST_RESPONSE not in waiting and 0.15 < waiting[None] / 1000 < 0.25


def test_a_server_seats_and_plays_the_best_response(inprocess):
    """`best-response` seats: 409 until the first table is computed, then each decision is the
    table's action for the state sent; a league with `--league-best-response-share 1` seats it
    as soon as it is ready."""
    from croupier.engine.rlcard_games import RLCardTable

    async def body(client, service):
        seat = service.rollout.best_response
        first = await client.post(
            "/v1/games", json={"game": "leduc-holdem", "seats": {"0": "best-response"}}
        )
        for _ in range(200):  # the table is computed in a thread: ~2 s with the tree
            if seat.ready:
                break
            await asyncio.sleep(0.05)
        assert seat.ready
        table = RLCardTable("leduc-holdem")
        decisions = unlike_rules = 0
        for hand in range(6):
            created = await client.post(
                "/v1/games",
                json={"game": "leduc-holdem", "seats": {"0": "best-response", "1": "league"}},
            )
            assert created.status_code == 201, created.text
            seats = created.json()["seats"]
            assert seats["0"]["policy"] == seats["1"]["policy"] == BEST_RESPONSE
            table.reset(hand)

            def check(state: dict, answer: dict) -> None:
                nonlocal decisions, unlike_rules
                assert answer["action"] == seat.act(state)
                decisions += 1
                unlike_rules += service.decider.rules(state) != seat.act(state)

            await play_hand(client, table, created.json()["game_id"], on_decision=check)
        return first, decisions, unlike_rules, seat.missed

    first, decisions, unlike_rules, missed = inprocess(
        body, game=HISTORY, league_sampling="fsp", league_best_response_share=1.0
    )
    assert first.status_code == 409 and "being computed" in first.text
    assert decisions >= 12 and missed == 0
    assert unlike_rules > 0  # what played is the best response's table, not the rules


def test_a_server_refuses_the_seat_on_a_game_without_a_tree(inprocess):
    async def body(client, service):
        return await client.post("/v1/games", json={"game": "uno", "seats": {"0": "best-response"}})

    r = inprocess(body, game="uno")
    assert r.status_code == 409 and "walk whole" in r.text
    with pytest.raises(ValueError, match="walk whole"):
        inprocess(body, game="uno", league_best_response_share=0.5)


def test_bench_league_best_response_modes():
    from croupier.bench.league import mode_setting

    league = ["--weights-keep-every", "4", "--league-sampling", "fsp", "--league-every", "4"]
    assert mode_setting("br", 4, 0.25, 0.5) == {
        "seats": ["learned", "league"],
        "server_args": [*league, "--league-best-response-share", "0.5"],
    }
    assert mode_setting("br-rules", 4, 0.25, 0.75)["server_args"] == [
        *league, "--league-rules-share", "0.25", "--league-best-response-share", "0.75"
    ]  # fmt: skip
