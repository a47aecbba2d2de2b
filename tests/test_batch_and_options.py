"""The batch decide endpoint, the engine's batch mode, relative frozen seats, user rules by
import path, and the in-process seat env."""

from __future__ import annotations

import json

import httpx
import numpy as np
import orjson
import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from croupier.api.schemas import BATCH_MAX, BatchItem, DecideBatchRequest, well_formed_batch
from croupier.engine.runner import run_engine
from croupier.engine.seat_env import SeatEnv
from croupier.policies.seats import BadPolicySpec, parse_seat_policy

GAME = "leduc-holdem"


def first_rules_action(state: dict) -> str:
    """A user's 'rules' for the --rules test: always the first legal action."""
    return state["legal_actions"][0]


def test_decide_batch_answers_in_order_with_item_level_errors(inprocess, leduc_states):
    states = [s for s in leduc_states if s["current_player"] == 0][:3]

    async def body(client, service):
        games = [
            service.create_game(GAME, seats={"0": "learned", "1": "rules"})["game_id"]
            for _ in range(3)
        ]
        ended = service.create_game(GAME)["game_id"]
        await service.end_game(ended, {"0": 0.0, "1": 0.0})
        items = [
            {"game_id": games[0], "seat": "0", "state": states[0]},
            {"game_id": "nope", "seat": "0", "state": states[0]},  # 404
            {"game_id": games[1], "seat": "0", "state": {"hand": "SJ"}},  # bad state: 422
            {"game_id": ended, "seat": "0", "state": states[1]},  # ended: 409
            {"game_id": games[2], "seat": "0", "state": states[2], "reward": 0.5},
        ]
        # An item the schema refuses (no state; a seat the game has not) fails the whole
        # request, located by item.
        for bad, where in (
            ({"game_id": games[1], "seat": "0"}, ["body", "items", "5", "state"]),
            (
                {"game_id": games[2], "seat": "7", "state": states[2]},
                ["body", "items", "5", "seat"],
            ),
        ):
            malformed = await client.post("/v1/decide:batch", json={"items": [*items, bad]})
            assert malformed.status_code == 422, malformed.text
            assert malformed.json()["detail"][0]["loc"] == where, malformed.text
        forwards_before = service.batcher.forward_passes
        r = await client.post("/v1/decide:batch", json={"items": items})
        return r, service.batcher.forward_passes - forwards_before

    r, forwards = inprocess(body)
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 5
    assert [x["error"]["status"] if x["error"] else 200 for x in results] == [
        200, 404, 422, 409, 200,
    ]  # fmt: skip
    assert [x["outcome"] for x in results] == ["ok", "error", "error", "error", "ok"]
    assert results[0]["action"] in states[0]["legal_actions"]
    assert results[4]["action"] in states[2]["legal_actions"]
    assert results[0]["policy"] == "learned" and results[0]["version"] == 0
    assert forwards == 1  # both learned items went through one forward pass


def test_decide_batch_rejects_a_malformed_envelope(inprocess):
    async def body(client, service):
        return [
            (await client.post("/v1/decide:batch", json=payload)).status_code
            for payload in ({"items": "x"}, {"items": [1]}, {}, {"items": [], "extra": 1})
        ]

    codes = inprocess(body)
    # [1]: an item the schema refuses fails the request as a whole.
    assert codes == [422, 422, 422, 422]


# Per field: values on both sides of each constraint of `BatchItem` ("extra": not a field).
_EDGES: dict[str, list[object]] = {
    "game_id": [
        "g",
        "",
        "x" * 128,
        "x" * 129,
        1,
        None,
        True,
        ["g"],
        "a\tb",
        "g\n",
        "a b",
        ".",
        "..",
        "...",
        "a/b",
        "/",
        "g/",
        ".a",
        "é",
    ],
    "seat": ["0", "", "x" * 64, "x" * 65, 0, None, False],
    "state": [{}, {"a": [1, None]}, {"n": 10**30}, [], "s", None, 1],
    "reward": [None, 0, 0.5, -3, 10**30, True, False, "1", [1], {}],
    "turn": [None, 0, 7, 2**53, 2**53 + 1, -1, 1.0, True, "3", 10**30],
    "extra": [1, None, "x"],
}


@st.composite
def _batch_items(draw: st.DrawFn) -> object:
    """Mostly near-valid items: a valid one with fields dropped, replaced or added."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([None, 1, "item", [], [{"game_id": "g"}]]))
    item: dict[str, object] = {"game_id": "g1", "seat": "0", "state": {"hand": "SJ"}}
    for _ in range(draw(st.integers(0, 2))):
        field = draw(st.sampled_from(sorted(_EDGES)))
        if draw(st.integers(0, 4)) == 0:
            item.pop(field, None)
        else:
            item[field] = draw(st.sampled_from(_EDGES[field]))
    return item


@settings(max_examples=600, deadline=None)
@given(st.lists(_batch_items(), max_size=3))
def test_well_formed_batch_reads_items_as_the_models_do(items):
    """The hand-checked reading of a `decide:batch` body accepts only what the models
    accept, with the same values, and accepts every well-formed item."""
    raw = json.dumps({"items": items}).encode()  # orjson cannot write integers past 64 bits
    fast = well_formed_batch(raw)
    validated = []
    for item in items:
        try:
            it = BatchItem.model_validate_json(json.dumps(item))
        except ValidationError:
            validated.append(None)
            continue
        validated.append((it.game_id, it.seat, it.state, it.reward, it.turn))
    if fast is None:
        assert None in validated  # refused only when a model refuses an item
    else:
        assert fast == validated
        for (_, _, _, reward, _), (_, _, _, model_reward, _) in zip(fast, validated, strict=True):
            assert type(reward) is type(model_reward)  # float, as the strict float field gives


def test_well_formed_batch_refuses_bad_envelopes():
    assert well_formed_batch(b'{"items": []}') == []
    item = {"game_id": "g", "seat": "0", "state": {}}
    assert well_formed_batch(orjson.dumps({"items": [item]})) == [("g", "0", {}, None, None)]
    for raw in (b"", b"[]", b"{", b'{"items": {}}', b'{"items": [], "x": 1}', b'{"seat": 1}'):
        assert well_formed_batch(raw) is None
    assert well_formed_batch(orjson.dumps({"items": [item] * (BATCH_MAX + 1)})) is None
    assert parse_body_refuses(orjson.dumps({"items": [item] * (BATCH_MAX + 1)}))
    # Integers past 64 bits stay integers (orjson would read 1e30).
    big = b'{"items": [{"game_id": "g", "seat": "0", "state": {"n": 1' + b"0" * 30 + b"}}]}"
    assert well_formed_batch(big) == [("g", "0", {"n": 10**30}, None, None)]


def parse_body_refuses(raw: bytes) -> bool:
    try:
        DecideBatchRequest.model_validate_json(raw)
    except ValidationError:
        return True
    return False


def test_create_and_end_batches_answer_in_order_with_item_level_errors(inprocess, leduc_states):
    state = next(s for s in leduc_states if s["current_player"] == 0)

    async def body(client, service):
        games = [
            {"game": GAME, "game_id": "b1", "seats": {"0": "learned", "1": "rules"}},
            {"game": GAME, "seats": {"0": "frozen@99"}},  # not loaded: 409
            {"game": GAME, "game_id": "b1"},  # duplicate id: 409
            {"game": GAME, "seats": {"0": "learned", "1": "learned"}},
        ]
        for bad in ({"x": 1}, {"game": "uno"}, {"game": GAME, "seats": {"7": "rules"}}):
            malformed = await client.post("/v1/games:batch", json={"games": [*games, bad]})
            assert malformed.status_code == 422, malformed.text  # the document refuses it
        created = await client.post("/v1/games:batch", json={"games": games})
        ids = [r["game_id"] for r in created.json()["results"] if r["error"] is None]
        for gid in ids:
            await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
        puts_before = service.outbox.put_calls
        items = [
            {"game_id": ids[0], "payoffs": {"0": 1.0, "1": -1.0}},
            {"game_id": "nope", "payoffs": {"0": 1.0, "1": -1.0}},  # 404
            {"game_id": ids[1], "payoffs": {"0": 0.5, "1": -0.5}},
            {"game_id": ids[0], "payoffs": {"0": 1.0, "1": -1.0}},  # already ended: 409
        ]
        missing = [*items, {"game_id": ids[1], "payoffs": {"0": 1.0}}]  # a seat missing
        refused = await client.post("/v1/end:batch", json={"items": missing})
        assert refused.status_code == 422, refused.text  # the document says every seat
        ended = await client.post("/v1/end:batch", json={"items": items})
        return created, ended, service.outbox.put_calls - puts_before, service.outbox.take()

    created, ended, puts, episodes = inprocess(body)
    assert created.status_code == 200 and ended.status_code == 200
    made = created.json()["results"]
    assert [r["error"]["status"] if r["error"] else 200 for r in made] == [200, 409, 409, 200]
    assert made[0]["game_id"] == "b1" and made[0]["seats"]["0"]["policy"] == "learned"
    assert made[1]["outcome"] == "error" and "game_id" not in made[1]
    closed = ended.json()["results"]
    assert [r["error"]["status"] if r["error"] else 200 for r in closed] == [200, 404, 200, 409]
    assert [r.get("episodes") for r in closed] == [1, None, 1, None]
    # Both games' learned seat-0 episodes reached the spool in one write.
    assert puts == 1
    assert sorted(e["game_id"] for e in episodes) == sorted(
        [made[0]["game_id"], made[3]["game_id"]]
    )


def test_create_and_end_batches_reject_a_malformed_envelope(inprocess):
    async def body(client, service):
        return [
            (await client.post(path, json=payload)).status_code
            for path, payload in (
                ("/v1/games:batch", {"games": "x"}),
                ("/v1/games:batch", {"items": []}),
                ("/v1/end:batch", {"items": {"a": 1}}),
                ("/v1/end:batch", {"items": [], "extra": 1}),
                ("/v1/end:batch", {"items": []}),
            )
        ]

    assert inprocess(body) == [422, 422, 422, 422, 200]


def test_engine_batch_mode_plays_the_same_game(server_factory):
    with server_factory("--seats", "rules,random") as url:
        summary = uvloop.run(
            run_engine(url, GAME, 32, ["rules", "random"], hands=600, seconds=None, batch=True)
        )
        metrics = httpx.get(url + "/metrics").text
    assert summary.errors == 0 and summary.hands == 600
    rules = summary.policies["rules"]
    assert rules.mean - rules.ci95 > 0  # the rules still beat random through the batch path
    # Every call went through the batch routes, several tables per request.
    requests = {
        endpoint: sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith(f'croupier_requests_total{{endpoint="{endpoint}"')
        )
        for endpoint in ("create_game", "end_game", "decide", "create_games", "end_batch")
    }
    assert requests["create_game"] == requests["end_game"] == requests["decide"] == 0
    assert 0 < requests["create_games"] < 600 and 0 < requests["end_batch"] < 600


def test_relative_frozen_counts_back_among_loaded_versions():
    loaded = [0, 14, 30, 46]
    assert parse_seat_policy("frozen@-1", latest=46, loaded=loaded).version == 30
    assert parse_seat_policy("frozen@-3", latest=46, loaded=loaded).version == 0
    assert parse_seat_policy("frozen@-9", latest=46, loaded=loaded).version == 0
    assert parse_seat_policy("frozen@14", latest=46, loaded=loaded).version == 14
    assert parse_seat_policy("frozen@-0", latest=46, loaded=loaded).version == 46
    p = parse_seat_policy("frozen@-1", latest=46, loaded=loaded)
    assert not p.record and p.uses_model
    with pytest.raises(BadPolicySpec):
        parse_seat_policy("frozen@x", latest=0)


def test_user_rules_by_import_path(inprocess, leduc_states):
    state = next(s for s in leduc_states if len(s["legal_actions"]) > 1)

    async def body(client, service):
        gid = service.create_game(GAME, seats={"0": "rules", "1": "rules"})["game_id"]
        return [(await service.decide(gid, "0", state)).action for _ in range(5)]

    actions = inprocess(body, rules="tests.test_batch_and_options:first_rules_action")
    assert actions == [state["legal_actions"][0]] * 5


def test_seat_env_plays_whole_hands_with_legal_masks():
    env = SeatEnv({"game": GAME, "opponent": "rules", "seed": 3})
    rng = np.random.default_rng(0)
    returns = []
    for _ in range(200):
        obs, _ = env.reset()
        assert env.observation_space.contains(obs)
        for _ in range(20):
            legal = np.flatnonzero(obs["action_mask"])
            assert legal.size > 0
            obs, reward, terminated, truncated, _ = env.step(int(rng.choice(legal)))
            if terminated:
                returns.append(reward)
                break
    assert len(returns) == 200
    # A random learner loses to the rules on average (measured ~ -1.1 per hand).
    assert np.mean(returns) < -0.5
