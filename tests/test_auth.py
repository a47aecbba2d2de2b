"""API keys on the HTTP routes: open without keys, 401 without a key, 403 with a wrong one."""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from croupier.api.auth import ApiKeys, parse_keys
from croupier.local_server import free_port, start_serve
from tests.conftest import STARTUP_TIMEOUT_S, _stop

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


# --- one key cannot fill the server (issue 14, suspicion c) --------------------------------


def test_a_per_key_game_cap_answers_429_with_retry_after(inprocess):
    async def body(client, service):
        k1, k2 = ({"Authorization": f"Bearer {k}"} for k in ("k1", "k2"))
        new = {"game": GAME}
        mine = [await client.post("/v1/games", json=new, headers=k1) for _ in range(3)]
        codes = [r.status_code for r in mine]
        ids = [r.json()["game_id"] for r in mine]
        full = await client.post("/v1/games", json=new, headers=k1)
        other = await client.post("/v1/games", json=new, headers=k2)  # another key: its own cap
        batch = await client.post("/v1/games:batch", json={"games": [new] * 3}, headers=k2)
        # An ended or aborted game frees its place.
        await client.post(f"/v1/games/{ids[0]}/end", json={"payoffs": {"0": 0, "1": 0}}, headers=k1)
        await client.delete(f"/v1/games/{ids[1]}", headers=k1)
        again = [(await client.post("/v1/games", json=new, headers=k1)).status_code for _ in "ab"]
        return codes, full, other, batch.json()["results"], again, service.health()

    codes, full, other, batch, again, health = inprocess(
        body, api_keys=["k1", "k2"], max_games_per_key=3, retry_after_s=2
    )
    assert codes == [201, 201, 201]
    assert full.status_code == 429 and full.headers["retry-after"] == "2"
    assert other.status_code == 201
    assert [r["error"] and r["error"]["status"] for r in batch] == [None, None, 429]
    assert again == [201, 201]
    assert health["refused_quota"] == 2


def test_without_a_per_key_cap_one_key_may_fill_max_games(inprocess):
    async def body(client, service):
        k1 = {"Authorization": "Bearer k1"}
        return [
            (await client.post("/v1/games", json={"game": GAME}, headers=k1)).status_code
            for _ in range(4)
        ]

    assert inprocess(body, api_keys=["k1"], max_games=3) == [201, 201, 201, 503]


# --- what `croupier serve` warns about (issue 14) --------------------------------------------


@pytest.mark.parametrize(
    ("host", "keys", "tls", "warned"),
    [
        ("127.0.0.1", [], False, set()),
        ("::1", [], False, set()),
        ("localhost", [], False, set()),
        ("0.0.0.0", [], False, {"keys", "tls"}),
        ("10.1.2.3", ["k"], False, {"tls"}),
        ("0.0.0.0", ["k"], True, set()),
        ("::", [], True, {"keys"}),
        ("server.example", [], True, {"keys"}),
    ],
)
def test_serving_beyond_loopback_without_keys_or_tls_is_warned(host, keys, tls, warned):
    from croupier.api.exposure import exposure_warnings
    from croupier.config import ServerConfig

    warnings = exposure_warnings(host, ServerConfig(api_keys=keys), tls=tls)
    found = {"keys" for w in warnings if "without API keys" in w} | {
        "tls" for w in warnings if "plain HTTP" in w
    }
    assert found == warned


# --- TLS on the HTTP server (issue 14, finding 9) -------------------------------------------


def _openssl_cert(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), made here with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@contextlib.contextmanager
def _https_server(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    with tempfile.TemporaryFile() as log:
        proc = start_serve(["--data-dir", "none", *args], port, stdout=log)
        try:
            yield f"https://127.0.0.1:{port}", proc
        except BaseException:
            log.seek(0)
            print(log.read().decode(errors="replace")[-3000:])
            raise
        finally:
            _stop(proc)


def _wait_https(url: str, proc: subprocess.Popen, **client: Any) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "server exited"
        try:
            if httpx.get(url + "/healthz", timeout=2.0, **client).status_code == 200:
                return
        except (httpx.ConnectError, httpx.TimeoutException):
            # While the app starts, a TLS server's socket accepts (it is bound early, see
            # api/early.py) but completes no handshake: a timeout, not an answer.
            time.sleep(0.2)
    raise AssertionError("no HTTPS answer")


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_serve_speaks_tls_with_the_certificate_given(tmp_path, mutual):
    """`croupier serve --ssl-certfile --ssl-keyfile` answers HTTPS only: a client trusting the
    certificate plays, plain HTTP and an untrusting client get nothing. With `--ssl-ca-certs`
    a client must also present a certificate that CA signed."""
    cert, key = _openssl_cert(tmp_path, "server")
    args = ["--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--api-keys", "k1"]
    client_cert: tuple[str, str] | None = None
    if mutual:
        ccert, ckey = _openssl_cert(tmp_path, "client")
        args += ["--ssl-ca-certs", str(ccert)]
        client_cert = (str(ccert), str(ckey))
    with _https_server(*args) as (url, proc):
        trusted = {"verify": ssl.create_default_context(cafile=str(cert))}
        if client_cert:
            trusted["verify"].load_cert_chain(*client_cert)
        _wait_https(url, proc, **trusted)
        with httpx.Client(base_url=url, timeout=10, **trusted) as c:
            auth = {"Authorization": "Bearer k1"}
            created = c.post("/v1/games", json={"game": GAME}, headers=auth)
            assert created.status_code == 201
            assert c.post("/v1/games", json={"game": GAME}).status_code == 401
        with pytest.raises(httpx.HTTPError):  # keys never go over plain HTTP to this port
            httpx.get(url.replace("https", "http") + "/healthz", timeout=5)
        with pytest.raises(httpx.ConnectError):  # a certificate the client does not trust
            httpx.get(url + "/healthz", timeout=5)
        if mutual:  # trusting the server is not enough: no client certificate, no answer
            no_cert = ssl.create_default_context(cafile=str(cert))
            with pytest.raises(httpx.HTTPError):
                httpx.get(url + "/healthz", timeout=5, verify=no_cert)


def test_serve_refuses_half_a_tls_setup(tmp_path):
    for args in (["--ssl-certfile", "c.pem"], ["--ssl-ca-certs", "ca.pem"]):
        proc = subprocess.run(
            [sys.executable, "-m", "croupier", "serve", "--data-dir", "none", *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode != 0 and "ssl" in proc.stderr.lower(), proc.stderr[-500:]


def test_a_game_answers_only_the_key_that_created_it_and_admin_keys(inprocess, leduc_states):
    """The review: any engine key could decide, end or abort any game whose id it learnt.
    A game belongs to the key that created it now: another engine key gets 403
    (`not-your-game`), on the single routes and per item in the batch ones; an admin key
    may act on every game."""
    state = leduc_states[0]
    one, two, admin = ({"Authorization": f"Bearer {k}"} for k in ("k1", "k2", "adm"))

    async def body(c, service):
        async def new_game() -> str:
            r = await c.post("/v1/games", json={"game": "leduc-holdem"}, headers=one)
            assert r.status_code == 201, r.text
            return r.json()["game_id"]

        gid = await new_game()
        decide = {"seat": "0", "state": state}
        payoffs = {"payoffs": {"0": 1.0, "1": -1.0}}
        out = {}
        r = await c.post(f"/v1/games/{gid}/decide", json=decide, headers=two)
        out["decide"] = r.status_code, r.json()["type"], r.json()["detail"]
        out["end"] = (await c.post(f"/v1/games/{gid}/end", json=payoffs, headers=two)).status_code
        out["abort"] = (await c.delete(f"/v1/games/{gid}", headers=two)).status_code
        items = {"items": [{"game_id": gid, **decide}]}
        r = await c.post("/v1/decide:batch", json=items, headers=two)
        out["decide_batch"] = r.status_code, r.json()["results"][0]["error"]["status"]
        items = {"items": [{"game_id": gid, **payoffs}]}
        r = await c.post("/v1/end:batch", json=items, headers=two)
        out["end_batch"] = r.status_code, r.json()["results"][0]["error"]["status"]
        out["unknown"] = (
            await c.post("/v1/games/nope/decide", json=decide, headers=two)
        ).status_code  # a game that is not live here: its own answer, no owner to check
        # Nothing happened to the game: its owner and an admin key play and end it.
        out["owner"] = (
            await c.post(f"/v1/games/{gid}/decide", json=decide, headers=one)
        ).status_code
        out["admin"] = (
            await c.post(f"/v1/games/{gid}/decide", json=decide, headers=admin)
        ).status_code
        r = await c.post(f"/v1/games/{gid}/end", json=payoffs, headers=admin)
        out["admin_end"] = r.status_code
        gid = await new_game()
        out["owner_abort"] = (await c.delete(f"/v1/games/{gid}", headers=one)).status_code
        return out

    out = inprocess(body, api_keys=["k1", "k2"], admin_keys=["adm"])
    status, kind, detail = out.pop("decide")
    assert status == 403 and kind.endswith("not-your-game")
    assert "another API key" in detail and "k1" not in detail
    assert out == {
        "end": 403, "abort": 403, "decide_batch": (200, 403), "end_batch": (200, 403),
        "unknown": 404, "owner": 200, "admin": 200, "admin_end": 200, "owner_abort": 204,
    }  # fmt: skip
