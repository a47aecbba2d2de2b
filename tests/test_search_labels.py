"""Expert iteration's server side (`croupier serve --search-labels`): a search labels a share
of the learned seats' recorded decisions with its choice, recorded with the step
(`SeatRecorder.label`), while the seat plays its own move; a spec that is not a search's, or
a game that cannot be searched, stops the server at start."""

from __future__ import annotations

import asyncio

import pytest

from croupier.api.components import build_components
from croupier.config import ServerConfig
from croupier.trajectories.record import NO_TEACHER, TEACHER
from tests.helpers.search_games import Gamble

GAMBLE = "tests.helpers.search_games:GambleAdapter"
HANDS = 40


@pytest.mark.integration
def test_learned_decisions_carry_the_searchs_choice_and_keep_their_own_move(inprocess, tmp_path):
    """The one-decision gamble: the rules play safe, the search over them gambles (worth +0.5
    to safe's 0). Every recorded decision a search answered in time is labelled "gamble"
    whatever the untrained policy played; the answers are the policy's own (both moves seen)."""
    seats = {"0": "learned", "1": "rules"}

    async def body(client, service):
        await asyncio.to_thread(service.search.start)
        played = []
        table = Gamble()
        for i in range(HANDS):
            table.reset(i)
            r = await client.post("/v1/games", json={"game": "gamble", "seats": seats})
            assert r.status_code == 201, r.text
            game_id = r.json()["game_id"]
            state = table.state(0)
            d = await client.post(f"/v1/games/{game_id}/decide",
                                  json={"seat": "0", "state": state})  # fmt: skip
            assert d.status_code == 200, d.text
            assert not d.json()["fallback"] and d.json()["policy"] == "learned"
            played.append(d.json()["action"])
            table.step(d.json()["action"])
            payoffs = {"0": table.payoffs()[0], "1": table.payoffs()[1]}
            assert (await client.post(f"/v1/games/{game_id}/end",
                                      json={"payoffs": payoffs})).status_code == 200  # fmt: skip
        metrics = (await client.get("/metrics")).text
        return played, service.outbox.take(), service.health()["search"], metrics

    played, records, stats, metrics = inprocess(
        body, game=GAMBLE, data_dir=tmp_path, search_workers=1,
        # 256 worlds a move: the gamble's +0.5 then beats playing safe by ~9 standard errors,
        # so the search's confidence rule never keeps the rules' move (at 32: ~1% a label)
        search_labels="search:base=rules:rollouts=256:ms=400", search_label_share=1.0,
    )  # fmt: skip
    assert set(played) == {"safe", "gamble"}  # the policy's own samples, not the search's
    assert len(records) == HANDS
    labels = [int(r["extra"][TEACHER][0]) for r in records if TEACHER in r.get("extra", {})]
    assert stats["labels"] == len(labels) and stats["labels"] + stats["labels_missed"] == HANDS
    assert len(labels) >= HANDS // 2, stats  # a loaded box may miss a few deadlines
    assert set(labels) == {1}, labels  # "gamble", the fixed head's slot 1
    assert f"croupier_search_labels_total {float(len(labels))}" in metrics


@pytest.mark.integration
def test_no_labels_without_the_setting_and_none_at_share_zero(inprocess, tmp_path):
    seats = {"0": "learned", "1": "rules"}

    async def body(client, service):
        state = Gamble().state(0)
        for _ in range(5):
            r = await client.post("/v1/games", json={"game": "gamble", "seats": seats})
            game_id = r.json()["game_id"]
            await client.post(f"/v1/games/{game_id}/decide", json={"seat": "0", "state": state})
            await client.post(f"/v1/games/{game_id}/end", json={"payoffs": {"0": 0, "1": 0}})
        return service.outbox.take(), service.health()["search"]

    for extra in ({}, {"search_labels": "search:ms=100", "search_label_share": 0.0}):
        records, stats = inprocess(body, game=GAMBLE, data_dir=tmp_path / str(len(extra)),
                                   search_workers=1, **extra)  # fmt: skip
        assert len(records) == 5 and stats["labels"] == 0 and stats["labels_missed"] == 0
        assert all(TEACHER not in r.get("extra", {}) for r in records)
    assert NO_TEACHER == -1


@pytest.mark.unit
@pytest.mark.parametrize(
    ("game", "labels", "why"),
    [
        (GAMBLE, "rules", "search seat's spec"),
        (GAMBLE, "search:rollouts=0", "unknown seat"),
        ("tests.helpers.search_games:BlindGambleAdapter", "search:ms=100", "cannot be searched"),
    ],  # fmt: skip
)
def test_a_bad_label_spec_or_an_unsearchable_game_stops_the_server(game, labels, why, tmp_path):
    config = ServerConfig(game=game, data_dir=tmp_path, search_labels=labels)
    with pytest.raises(ValueError, match=why):
        build_components(config)
