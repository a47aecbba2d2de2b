"""What a web page on another site can make a browser send to a server on this machine: no
JSON body without a preflight (so a body must say it is JSON: 415 otherwise), and no request
by a name it rebound to 127.0.0.1 (a loopback server answers only its own names). Both on the
fast lane and off it."""

from __future__ import annotations

from typing import Any

import pytest

from croupier.api.hosts import host_name, loopback_hosts

GAME = "leduc-holdem"
STATE = {
    "hand": "SJ",
    "public_card": None,
    "all_chips": [1, 2],
    "my_chips": 1,
    "legal_actions": ["call", "raise", "fold"],
    "current_player": 0,
}


def test_a_body_that_does_not_say_json_is_refused_415_everywhere(inprocess):
    """The review: POST bodies without a Content-Type were read as JSON (a form or text POST,
    which a page on any site may send without asking, drove the API)."""

    async def run(c: Any, service: Any) -> dict[str, int]:
        gid = (await c.post("/v1/games", json={"game": GAME, "game_id": "g1"})).json()["game_id"]
        plain = {"content-type": "text/plain"}
        bodies = {
            "/v1/games": {"game": GAME},
            "/v1/games:batch": {"items": [{"game": GAME}]},
            f"/v1/games/{gid}/decide": {"seat": "0", "state": STATE},
            f"/v1/games/{gid}/end": {"payoffs": {"0": 1, "1": -1}},
            "/v1/end:batch": {"items": [{"game_id": gid, "payoffs": {"0": 1, "1": -1}}]},
            "/v1/games/g2/resume": {"game": GAME, "seats": {"0": {"policy": "rules"},
                                                           "1": {"policy": "rules"}}},
            "/v1/policies/promote": {"version": 0},
            "/v1/policies/canary": {"share": 0.1},
            "/v1/arena/results": [],
        }  # fmt: skip
        import json

        codes = {}
        for path, body in bodies.items():
            raw = json.dumps(body).encode()
            for name, headers in (("none", {}), ("text", plain)):
                r = await c.post(path, content=raw, headers=headers)
                codes[f"{name} {path}"] = r.status_code
                if r.status_code == 415:
                    assert r.json()["status"] == 415 and "application/json" in r.json()["detail"]
        # Nothing of the refused requests happened: the game is still open, nothing created.
        codes["games"] = service.games.created_total
        codes["decide after"] = (
            await c.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": STATE})
        ).status_code
        codes["rollback, no body"] = (await c.post("/v1/policies/rollback")).status_code
        r = await c.post("/v1/policies/rollback", content=b"", headers=plain)
        codes["rollback, empty text"] = r.status_code
        codes["rollback, {}"] = (await c.post("/v1/policies/rollback", json={})).status_code
        return codes

    codes = inprocess(run, game=GAME)
    refused = {k: v for k, v in codes.items() if k.startswith(("none ", "text "))}
    assert set(refused.values()) == {415}, refused
    assert codes["games"] == 1 and codes["decide after"] == 200
    # A bodyless POST needs no CORS preflight (the review): refused like a form, undone nothing.
    assert codes["rollback, no body"] == codes["rollback, empty text"] == 415
    assert codes["rollback, {}"] == 409  # the request was fine: there is nothing to roll back


def test_a_loopback_server_answers_only_its_own_names_on_both_stacks(inprocess):
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 is, to the
    browser, the server's own origin; its requests still say `Host: evil.example`."""

    async def run(c: Any, service: Any) -> dict[str, int]:
        out = {}
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost",
                     "127.0.0.1:8000", "[::1]:8000", "LOCALHOST."):  # fmt: skip
            h = {"host": host}
            out[f"{host} create"] = (await c.post("/v1/games", json={"game": GAME}, headers=h)
                                     ).status_code  # fmt: skip
            out[f"{host} healthz"] = (await c.get("/healthz", headers=h)).status_code
            out[f"{host} data"] = (await c.get("/dashboard/data.json", headers=h)).status_code
            r = await c.post("/v1/policies/promote", json={"version": 0}, headers=h)
            out[f"{host} promote"] = r.status_code
            if host.startswith("evil"):
                assert r.json()["type"] == "urn:croupier:problem:untrusted-host", r.text
        out["games"] = service.games.created_total
        return out

    out = inprocess(run, game=GAME, allowed_hosts=loopback_hosts("127.0.0.1"))
    for key, status in out.items():
        if key.startswith(("evil", "127.0.0.1.evil")):
            assert status == 400, (key, status)
        elif key.endswith(("create", "healthz", "data")):
            assert status in (200, 201), (key, status)
    assert out["games"] == 4  # the four trusted names' creates only


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        ((), ["localhost", "127.0.0.1", "::1"]),
        (("--host", "127.0.0.5"), ["localhost", "127.0.0.1", "::1", "127.0.0.5"]),
        (("--host", "0.0.0.0"), None),  # noqa: S104 - parsed, never bound
        (("--allowed-hosts", "*"), None),
        (("--allowed-hosts", "croupier.internal, localhost"), ["croupier.internal", "localhost"]),
    ],
)
def test_croupier_serve_checks_the_host_by_default_only_on_loopback(argv, allowed):
    import typer

    from croupier.cli import app
    from croupier.config import ServerConfig
    from croupier.settings import build

    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    config = build(ServerConfig, serve.make_context("serve", list(argv)).params)
    assert config.allowed_hosts == allowed
    assert host_name("[::1]:80") == "::1" and host_name("LocalHost.:1") == "localhost"
