"""HTTP API v1 against a real `croupier serve` subprocess (uvicorn, loopback)."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import httpx
import pytest

from tests.helpers.api import STATE, bad_requests

GAME = "leduc-holdem"
PAYOFFS = {"0": 1.0, "1": -1.0}


@pytest.fixture(scope="module")
def client(leduc_server):
    with httpx.Client(base_url=leduc_server, timeout=30.0) as c:
        yield c


def new_game(client, **body) -> dict:
    r = client.post("/v1/games", json={"game": GAME, **body})
    assert r.status_code == 201, r.text
    return r.json()


def seat_of(game: dict, policy: str) -> str:
    return next(s for s, info in game["seats"].items() if info["policy"] == policy)


def decide(client, game_id, seat, state=STATE, **extra) -> httpx.Response:
    return client.post(f"/v1/games/{game_id}/decide", json={"seat": seat, "state": state, **extra})


def recorded(client) -> int:
    return client.get("/healthz").json()["episodes"]["recorded"]


# --- POST /v1/games ----------------------------------------------------------------------


def test_create_fills_seats_from_mix(client):
    for _ in range(4):  # the mix rotates one place per game: both policies every time
        g = new_game(client)
        assert set(g["seats"]) == {"0", "1"}
        policies = {info["policy"] for info in g["seats"].values()}
        assert policies == {"learned", "rules"}
        assert g["seats"][seat_of(g, "learned")]["version"] == 0
        assert g["seats"][seat_of(g, "rules")]["version"] is None
        assert isinstance(g["game_id"], str) and g["game_id"]


def test_create_respects_explicit_seats(client):
    g = new_game(client, seats={"0": "random", "1": "frozen@0"})
    assert g["seats"] == {
        "0": {"policy": "random", "version": None},
        "1": {"policy": "frozen@0", "version": 0},
    }
    g = new_game(client, seats={"1": "random"})
    assert g["seats"]["1"]["policy"] == "random"
    assert g["seats"]["0"]["policy"] in ("learned", "rules")
    g = new_game(client, seats={"0": "learned@latest", "1": "rules"})
    assert g["seats"]["0"] == {"policy": "learned@latest", "version": 0}


def test_create_errors(client):
    gid = f"dup-{uuid.uuid4().hex}"
    new_game(client, game_id=gid)
    assert client.post("/v1/games", json={"game": GAME, "game_id": gid}).status_code == 409
    cases = [
        {"game": "chess"},
        {"game": GAME, "seats": {"0": "banana"}},
        {"game": GAME, "seats": {"0": "frozen@x"}},
        {"game": GAME, "seats": {"7": "rules"}},
        {"game": GAME, "seats": {"0": "rules"}, "colour": "red"},
        {"game": GAME, "pin": "sometimes"},
        {"game": GAME, "game_id": ""},
        {"game": GAME, "game_id": "x" * 129},
        {},
    ]
    for body in cases:
        r = client.post("/v1/games", json=body)
        assert r.status_code == 422, (body, r.status_code, r.text)
        assert "detail" in r.json()
    r = client.post(
        "/v1/games", content=b'{"game": "leduc-', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    # Well-formed, but not what this server can seat now: 409, with what is loaded.
    r = client.post("/v1/games", json={"game": GAME, "seats": {"0": "frozen@99"}})
    assert r.status_code == 409 and r.json()["type"].endswith(":seat-unavailable"), r.text


# --- decide ------------------------------------------------------------------------------


def test_decide_returns_legal_actions(client, leduc_states):
    g = new_game(client, seats={"0": "learned", "1": "rules"})
    r2 = new_game(client, seats={"0": "random", "1": "frozen@0"})
    for i, state in enumerate(leduc_states[:60]):
        for game, seat, policy in (
            (g, "0", "learned"),
            (g, "1", "rules"),
            (r2, "0", "random"),
            (r2, "1", "frozen@0"),
        ):
            r = decide(client, game["game_id"], seat, state, reward=0.0 if i else None)
            assert r.status_code == 200, r.text
            d = r.json()
            assert d["action"] in state["legal_actions"], (state, d)
            assert ["call", "raise", "fold", "check"][d["action_index"]] == d["action"]
            assert d["policy"] == policy
            assert d["version"] == (0 if policy in ("learned", "frozen@0") else None)


def test_decide_errors(client):
    g = new_game(client, seats={"0": "learned", "1": "rules"})
    gid = g["game_id"]
    assert decide(client, f"nope-{uuid.uuid4().hex}", "0").status_code == 404
    assert decide(client, gid, "2").status_code == 422
    bad_states = [
        {k: v for k, v in STATE.items() if k != "legal_actions"},
        {k: v for k, v in STATE.items() if k != "hand"},
        {**STATE, "legal_actions": []},
        {**STATE, "legal_actions": ["dance"]},
        {**STATE, "legal_actions": "call"},
        {**STATE, "my_chips": "1"},
        {**STATE, "my_chips": True},
        {**STATE, "my_chips": 5},  # not one of all_chips
        {**STATE, "all_chips": [2, 1, 3]},
        {**STATE, "all_chips": [99, 1]},
        {**STATE, "hand": 5},
        {**STATE, "hand": "ZZ"},
        {**STATE, "public_card": ["SK"]},
        {},
    ]
    for state in bad_states:
        for seat in ("0", "1"):  # learned and rules alike
            r = decide(client, gid, seat, state)
            assert r.status_code == 422, (seat, state, r.status_code, r.text)
    for body in (
        {"seat": "0", "state": STATE, "reward": "abc"},
        {"seat": "0", "state": STATE, "reward": [1]},
        {"seat": "0", "state": "not a map"},
        {"seat": 0, "state": STATE},
        {"seat": "0"},
        {"seat": "0", "state": STATE, "extra": 1},
        {"seat": "0" * 65, "state": STATE},
    ):
        r = client.post(f"/v1/games/{gid}/decide", json=body)
        assert r.status_code == 422, (body, r.status_code, r.text)
    # Python's JSON reader takes NaN/Infinity tokens: the service must still refuse them.
    for token in ("NaN", "Infinity", "-Infinity"):
        raw = json.dumps({"seat": "0", "state": STATE, "reward": "R"}).replace('"R"', token)
        r = client.post(
            f"/v1/games/{gid}/decide",
            content=raw.encode(),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 422, (token, r.text)
    assert client.post(f"/v1/games/{gid}/end", json={"payoffs": PAYOFFS}).status_code == 200
    assert decide(client, gid, "0").status_code == 409


# --- end ---------------------------------------------------------------------------------


def test_end_counts_recorded_episodes(client):
    before = recorded(client)
    g = new_game(client)
    learned = seat_of(g, "learned")
    assert decide(client, g["game_id"], learned).status_code == 200
    r = client.post(f"/v1/games/{g['game_id']}/end", json={"payoffs": PAYOFFS})
    assert r.status_code == 200
    assert r.json() == {"game_id": g["game_id"], "episodes": 1}
    assert recorded(client) == before + 1

    g = new_game(client)  # the learned seat never decides: nothing to record
    assert decide(client, g["game_id"], seat_of(g, "rules")).status_code == 200
    r = client.post(f"/v1/games/{g['game_id']}/end", json={"payoffs": PAYOFFS})
    assert r.status_code == 200 and r.json()["episodes"] == 0
    assert recorded(client) == before + 1


def test_end_errors(client):
    g = new_game(client)
    url = f"/v1/games/{g['game_id']}/end"
    for payoffs in ({"0": 1.0}, {}, {"0": 1.0, "1": -1.0, "2": 0.0}, {"0": "x", "1": 0}):
        r = client.post(url, json={"payoffs": payoffs})
        assert r.status_code == 422, (payoffs, r.text)
    r = client.post(
        url,
        content=b'{"payoffs": {"0": NaN, "1": 0}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422
    assert client.post(url, json={"payoffs": PAYOFFS, "x": 1}).status_code == 422
    missing = f"/v1/games/nope-{uuid.uuid4().hex}/end"
    assert client.post(missing, json={"payoffs": PAYOFFS}).status_code == 404
    assert client.post(url, json={"payoffs": PAYOFFS}).status_code == 200
    assert client.post(url, json={"payoffs": PAYOFFS}).status_code == 409


# --- DELETE ------------------------------------------------------------------------------


def test_abort_records_nothing(client):
    before = recorded(client)
    g = new_game(client, seats={"0": "learned", "1": "learned"})
    gid = g["game_id"]
    assert decide(client, gid, "0").status_code == 200
    assert decide(client, gid, "1").status_code == 200
    assert client.delete(f"/v1/games/{gid}").status_code == 204
    assert decide(client, gid, "0").status_code == 404
    assert client.post(f"/v1/games/{gid}/end", json={"payoffs": PAYOFFS}).status_code == 404
    assert client.delete(f"/v1/games/{gid}").status_code == 404
    assert recorded(client) == before
    health = client.get("/healthz").json()
    assert health["episodes"]["pending"] == health["episodes"]["recorded"]


# --- views -------------------------------------------------------------------------------


def test_policies_health_docs(client):
    p = client.get("/v1/policies")
    assert p.status_code == 200
    body = p.json()
    assert body["policies"]["learned"]["versions"] == [0]
    assert body["policies"]["learned"]["latest"] == 0
    assert body["policies"]["rules"]["available"] is True
    assert body["game"]["name"] == GAME and body["game"]["num_actions"] == 4
    assert body["seat_mix"] == ["learned", "rules"]

    h = client.get("/healthz")
    assert h.status_code == 200
    health = h.json()
    assert health["status"] == "ok" and health["game"] == GAME
    assert {"batcher", "episodes", "decisions", "games_in_flight"} <= set(health)

    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    for path in (
        "/v1/games",
        "/v1/games/{game_id}/decide",
        "/v1/games/{game_id}/end",
        "/v1/games/{game_id}",
        "/v1/policies",
        "/healthz",
    ):
        assert path in spec["paths"], path


# --- abuse -------------------------------------------------------------------------------


def test_bad_request_burst_never_5xx(client):
    g = new_game(client, seats={"0": "learned", "1": "rules"})
    statuses = []
    for method, path, body, headers in bad_requests(g["game_id"]):
        r = client.request(method, path, content=body, headers=headers)
        assert r.status_code < 500, (method, path, (body or b"")[:80], r.status_code)
        statuses.append(r.status_code)
    assert len(statuses) > 80 and all(400 <= s < 500 for s in statuses)
    h = client.get("/healthz")
    assert h.status_code == 200 and h.json()["status"] == "ok"
    # ... and the game is still playable.
    assert decide(client, g["game_id"], "0").status_code == 200


@pytest.mark.parametrize(
    "body,ctype",
    [
        (b'{"game": NaN}', "application/json"),
        (b'{"seat": Infinity, "state": {}}', "application/json"),
        (b"\xff\xfe\x00garbage", "application/octet-stream"),
        (b"\xff\xfe\x00garbage", "text/plain"),
        (b"\xff\xfe\x00garbage", None),
    ],
)
def test_validation_errors_echoing_bad_input_never_5xx(leduc_server, body, ctype):
    headers = {"content-type": ctype} if ctype else {}
    with httpx.Client(base_url=leduc_server, timeout=30.0) as c:
        for path in ("/v1/games", "/v1/games/g/decide"):
            r = c.post(path, content=body, headers=headers)
            assert r.status_code < 500, (path, body, r.status_code)


# --- ids and legal-action lists (issue 14: suspicion b, finding 5) ----------------------------

UNSAFE_IDS = ["a\tb", "a\nb", "line\r\nforged\taccepted", "a b", "a\x00b", "g\n"]


def test_game_ids_outside_the_safe_charset_are_422_everywhere(client):
    """Game ids end up in logs and tab-separated files (ingest log, offline episodes): a tab
    or newline could forge a line. Every place an id comes in refuses one with 422."""
    for bad in UNSAFE_IDS:
        assert client.post("/v1/games", json={"game": GAME, "game_id": bad}).status_code == 422
        game_path = "/v1/games/" + quote(bad, safe="")  # percent-encoded in the URL
        for path, body in (
            (f"{game_path}/decide", {"seat": "0", "state": STATE}),
            (f"{game_path}/end", {"payoffs": PAYOFFS}),
        ):
            r = client.post(path, json=body)
            assert r.status_code == 422, (bad, path, r.status_code, r.text)
            assert bad not in r.text  # the id is not echoed back
        assert client.delete(game_path).status_code == 422
        item = {"game_id": bad, "seat": "0", "state": STATE}
        r = client.post("/v1/decide:batch", json={"items": [item]})  # the schema refuses it
        assert r.status_code == 422 and bad not in r.text, bad
        r = client.post("/v1/end:batch", json={"items": [{"game_id": bad, "payoffs": PAYOFFS}]})
        assert r.status_code == 422 and bad not in r.text, bad
    # safe but unknown ids are still 404
    assert decide(client, "no-such-game", "0").status_code == 404
    # `.` and `..` no client can put in a URL (they are normalised away): refused at create.
    for dots in (".", ".."):
        r = client.post("/v1/games", json={"game": GAME, "game_id": dots})
        assert r.status_code == 422 and "'.' or '..'" in r.text, r.text
        r = client.post("/v1/games:batch", json={"games": [{"game": GAME, "game_id": dots}]})
        assert r.status_code == 422, r.text


def test_legal_action_lists_with_repeats_or_too_long_are_422(client):
    game = new_game(client, seats={"0": "learned", "1": "rules"})
    for legal in (["call", "call"], ["call", "raise", "fold", "check", "call"], ["fold"] * 40_000):
        r = decide(client, game["game_id"], "0", {**STATE, "legal_actions": legal})
        assert r.status_code == 422, (legal[:5], r.text)
    assert decide(client, game["game_id"], "0").status_code == 200
