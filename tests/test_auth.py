"""API keys on the HTTP routes: open without keys, 401 without a key, 403 with a wrong one."""

from __future__ import annotations

import pytest

from croupier.api.auth import ApiKeys, parse_keys

GAME = "leduc-holdem"


def test_without_keys_the_server_is_open(inprocess):
    async def body(client, service):
        return (await client.post("/v1/games", json={"game": GAME})).status_code

    assert inprocess(body) == 201


def test_engine_routes_need_a_valid_bearer_key(inprocess, leduc_states):
    state = next(s for s in leduc_states if s["current_player"] == 0)

    async def body(client, service):
        game_id = service.create_game(GAME, seats={"0": "rules", "1": "rules"})["game_id"]
        decide = f"/v1/games/{game_id}/decide"
        payload = {"seat": "0", "state": state}
        codes = {
            "none": (await client.post(decide, json=payload)).status_code,
            "wrong": (
                await client.post(decide, json=payload, headers={"Authorization": "Bearer nope"})
            ).status_code,
            "basic": (
                await client.post(decide, json=payload, headers={"Authorization": "Basic k1"})
            ).status_code,
            "policies_none": (await client.get("/v1/policies")).status_code,
            "batch_none": (await client.post("/v1/decide:batch", json={"items": []})).status_code,
            "engine_key": (
                await client.post(decide, json=payload, headers={"Authorization": "Bearer k2"})
            ).status_code,
            "admin_key": (
                await client.post(decide, json=payload, headers={"Authorization": "Bearer adm"})
            ).status_code,
            "healthz": (await client.get("/healthz")).status_code,
        }
        www = (await client.get("/v1/policies")).headers.get("www-authenticate")
        return codes, www, service.health()

    codes, www, health = inprocess(body, api_keys=["k1", "k2"], admin_keys=["adm"])
    assert codes == {
        "none": 401,
        "wrong": 403,
        "basic": 401,
        "policies_none": 401,
        "batch_none": 401,
        "engine_key": 200,
        "admin_key": 200,
        "healthz": 200,
    }
    assert www == "Bearer"
    # Refused requests changed nothing: only the two authorised decisions happened.
    assert health["decisions"] == {"rules": 2}


@pytest.mark.parametrize(
    ("engine", "admin", "key", "as_admin", "allowed"),
    [
        ([], [], None, True, True),  # open server
        (["e"], [], "e", True, False),  # keys but no admin key: admin routes closed
        (["e"], ["a"], "e", True, False),
        (["e"], ["a"], "a", True, True),
        (["e"], ["a"], "a", False, True),
        ([], ["a"], None, False, False),  # an admin key alone closes engine routes too
    ],
)
def test_api_keys_decide_who_may_use_which_route(engine, admin, key, as_admin, allowed):
    from fastapi import HTTPException

    keys = ApiKeys(engine, admin)
    header = f"Bearer {key}" if key else None
    if allowed:
        keys.check(header, admin=as_admin)
    else:
        with pytest.raises(HTTPException) as e:
            keys.check(header, admin=as_admin)
        assert e.value.status_code in (401, 403)


def test_parse_keys_ignores_blanks():
    assert parse_keys(" a, ,b,") == ["a", "b"]
    assert parse_keys(None) == []
