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
SEATS = {"0": "learned", "1": "rules"}


async def _play_gambles(client, service):
    """HANDS gambles, seat 0 learned; what it played, the records, the search's stats and
    /metrics."""
    await asyncio.to_thread(service.search.start)
    played = []
    table = Gamble()
    for i in range(HANDS):
        table.reset(i)
        r = await client.post("/v1/games", json={"game": "gamble", "seats": SEATS})
        assert r.status_code == 201, r.text
        game_id = r.json()["game_id"]
        d = await client.post(f"/v1/games/{game_id}/decide",
                              json={"seat": "0", "state": table.state(0)})  # fmt: skip
        assert d.status_code == 200, d.text
        assert not d.json()["fallback"] and d.json()["policy"] == "learned"
        played.append(d.json()["action"])
        table.step(d.json()["action"])
        payoffs = {"0": table.payoffs()[0], "1": table.payoffs()[1]}
        assert (await client.post(f"/v1/games/{game_id}/end",
                                  json={"payoffs": payoffs})).status_code == 200  # fmt: skip
    metrics = (await client.get("/metrics")).text
    return played, service.outbox.take(), service.health()["search"], metrics


def _labels(records: list[dict]) -> list[int]:
    return [int(r["extra"][TEACHER][0]) for r in records if TEACHER in r.get("extra", {})]


@pytest.mark.integration
def test_learned_decisions_carry_the_searchs_choice_and_keep_their_own_move(inprocess, tmp_path):
    """The one-decision gamble: the rules play safe, the search over them gambles (worth +0.5
    to safe's 0). Every recorded decision a search answered in time is labelled "gamble"
    whatever the untrained policy played; the answers are the policy's own (both moves seen)."""
    played, records, stats, metrics = inprocess(
        _play_gambles, game=GAMBLE, data_dir=tmp_path, search_workers=1,
        # 256 worlds a move: the gamble's +0.5 then beats playing safe by ~9 standard errors,
        # so the search's confidence rule never keeps the rules' move (at 32: ~1% a label)
        search_labels="search:base=rules:rollouts=256:ms=400", search_label_share=1.0,
    )  # fmt: skip
    assert set(played) == {"safe", "gamble"}  # the policy's own samples, not the search's
    assert len(records) == HANDS
    labels = _labels(records)
    assert stats["labels"] == len(labels) and stats["labels"] + stats["labels_missed"] == HANDS
    assert len(labels) >= HANDS // 2, stats  # a loaded box may miss a few deadlines
    assert set(labels) == {1}, labels  # "gamble", the fixed head's slot 1
    assert f"croupier_search_labels_total {float(len(labels))}" in metrics


@pytest.mark.integration
def test_departures_only_label_where_the_search_left_its_bases_move(inprocess, tmp_path):
    """`--search-label-departures` over a random base: where the base drew "gamble" the
    search keeps it (not labelled, counted), where it drew "safe" the search gambles
    (labelled): about half of each, every label "gamble"."""
    _, records, stats, metrics = inprocess(
        _play_gambles, game=GAMBLE, data_dir=tmp_path, search_workers=1,
        search_labels="search:base=random:rollouts=256:ms=400", search_label_share=1.0,
        search_label_departures=True,
    )  # fmt: skip
    labels = _labels(records)
    assert set(labels) == {1}, labels
    assert stats["labels"] == len(labels)
    assert stats["labels"] + stats["labels_kept_base"] + stats["labels_missed"] == HANDS
    # each side at least once: the base draws gamble with probability 1/2 a hand
    assert stats["labels"] > 0 and stats["labels_kept_base"] > 0, stats
    kept = float(stats["labels_kept_base"])
    assert f"croupier_search_labels_kept_base_total {kept}" in metrics


@pytest.mark.integration
def test_no_labels_without_the_setting_and_none_at_share_zero(inprocess, tmp_path):
    async def body(client, service):
        state = Gamble().state(0)
        for _ in range(5):
            r = await client.post("/v1/games", json={"game": "gamble", "seats": SEATS})
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
