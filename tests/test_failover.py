"""Failover, in process: `POST /v1/games/{id}/resume` (a game re-created on another server with
its id and seats) and the raw-HTTP recipe of docs/scale-out.md, on two apps, one of which
"dies" (its transport refuses connections). Real processes and SIGKILL:
`tests/test_failover_system.py`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from croupier.api.app import create_app
from croupier.client import rank_servers
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import RLCardTable

GAME = "leduc-holdem"


@contextlib.asynccontextmanager
async def servers(n: int, **config: Any) -> AsyncIterator[list[Any]]:
    """`n` in-process apps (lifespans run), each as (app, service)."""
    async with contextlib.AsyncExitStack() as stack:
        out = []
        for _ in range(n):
            app = create_app(ServerConfig(game=GAME, **config))
            await stack.enter_async_context(app.router.lifespan_context(app))
            out.append((app, app.state.service))
        yield out


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://croupier")


def test_resume_recreates_a_game_with_its_id_and_seats_and_a_create_stays_409() -> None:
    async def body() -> None:
        async with servers(2) as [(a, _), (b, b_service)], client(a) as ca, client(b) as cb:
            seats = {"0": "learned", "1": "frozen@0"}
            created = (await ca.post("/v1/games", json={"game": GAME, "seats": seats})).json()
            gid = created["game_id"]
            # A plain create with that id is refused: a mistaken id reuse must not take over.
            dup = await ca.post("/v1/games", json={"game": GAME, "game_id": gid})
            assert dup.status_code == 409
            resume = {"game": GAME, "seats": created["seats"]}
            r = await cb.post(f"/v1/games/{gid}/resume", json=resume)
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["game_id"] == gid and got["resumed"] is True
            assert got["seats"] == created["seats"] and got["substituted"] == {}
            health = b_service.health()
            assert health["games_resumed"] == 1
            assert health["resumed_fragments_dropped"] == 1  # the learned seat; frozen records not
            # Retried: the game is live here, answered as it is and not counted again.
            again = (await cb.post(f"/v1/games/{gid}/resume", json=resume)).json()
            assert again["resumed"] is False and again["seats"] == created["seats"]
            assert b_service.health()["games_resumed"] == 1
            # A create with the id on the new server is a 409 too.
            assert (
                await cb.post("/v1/games", json={"game": GAME, "game_id": gid})
            ).status_code == 409
            # The game plays on there; ended, it cannot be resumed again.
            await cb.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1.0, "1": -1.0}})
            late = await cb.post(f"/v1/games/{gid}/resume", json=resume)
            assert late.status_code == 409 and "ended" in late.json()["detail"]

    asyncio.run(body())


def test_resume_serves_the_nearest_loaded_version_and_says_so() -> None:
    async def body() -> None:
        async with servers(1) as [(app, service)], client(app) as c:
            seats = {
                "0": {"policy": "learned", "version": 7},  # a version this server never had
                "1": {"policy": "frozen@3", "version": 3},
            }
            r = await c.post("/v1/games/g-1/resume", json={"game": GAME, "seats": seats})
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["seats"] == {
                "0": {"policy": "learned", "version": 0},
                "1": {"policy": "frozen@0", "version": 0},
            }
            assert got["substituted"] == {
                "0": {"asked": 7, "served": 0},
                "1": {"asked": 3, "served": 0},
            }
            assert service.games.get("g-1").seats["0"].record

    asyncio.run(body())


def test_resume_refuses_what_it_cannot_recreate() -> None:
    async def body() -> None:
        async with servers(1) as [(app, service)], client(app) as c:
            ok = {
                "0": {"policy": "rules", "version": None},
                "1": {"policy": "random", "version": None},
            }
            unpinned = {"policy": "learned", "version": None}
            cases = [
                ("g1", {"game": "uno", "seats": ok}),  # another game
                ("g2", {"game": GAME, "seats": {"0": ok["0"]}}),  # a seat missing
                ("g3", {"game": GAME, "seats": {**ok, "7": ok["0"]}}),  # a seat too many
                ("g4", {"game": GAME, "seats": {**ok, "0": {"policy": "magic", "version": 1}}}),
                ("g5", {"game": GAME, "seats": {**ok, "0": unpinned}}),  # learned: no version
                ("g6", {"game": GAME, "seats": ok, "resume": True}),  # unknown field
                ("bad%20id", {"game": GAME, "seats": ok}),
            ]
            for gid, payload in cases:
                r = await c.post(f"/v1/games/{gid}/resume", json=payload)
                assert r.status_code == 422, (gid, r.status_code, r.text)
            assert len(service.games) == 0 and service.health()["games_resumed"] == 0

    asyncio.run(body())


# --- the raw-HTTP recipe (docs/scale-out.md, "Failover"), as a non-Python engine would ---------


def owner_order(game_id: str, urls: list[str]) -> list[str]:
    """The recipe's rendezvous order, written from its description (not croupier's code)."""

    def score(url: str) -> int:
        digest = hashlib.blake2b(f"{url}\x00{game_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big")

    return sorted(urls, key=score, reverse=True)


class Killable(httpx.AsyncBaseTransport):
    """An app's transport that refuses connections once `dead`, as a killed server does."""

    def __init__(self, app: Any):
        self.inner = httpx.ASGITransport(app=app)
        self.dead = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.dead:
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


class RecipeEngine:
    """The recipe: remember each game's server and its create answer's seats; on a connection
    error (or 502/504, or 503 "starting"), resume the game on the next server in its
    rendezvous order with `POST /v1/games/{id}/resume` and resend; on a 404 for a game you
    hold, resume it on the same server."""

    def __init__(self, http: dict[str, httpx.AsyncClient]):
        self.http, self.urls = http, list(http)
        self.games: dict[str, dict[str, Any]] = {}  # id -> {"url", "seats"}
        self.moved = 0

    async def call(self, game_id: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        game, tried = self.games[game_id], set()
        while True:
            try:
                r = await self.http[game["url"]].post(path, json=body)
                if r.status_code not in (502, 504) and not (
                    r.status_code == 503 and r.json().get("type") == "urn:croupier:problem:starting"
                ):
                    r.raise_for_status()
                    return r.json()
            except httpx.TransportError:
                pass
            tried.add(game["url"])
            for url in owner_order(game_id, self.urls):
                if url in tried:
                    continue
                resume = {"game": GAME, "seats": game["seats"]}
                try:
                    r = await self.http[url].post(f"/v1/games/{game_id}/resume", json=resume)
                except httpx.TransportError:
                    tried.add(url)
                    continue
                r.raise_for_status()
                game.update(url=url, seats=r.json()["seats"])
                self.moved += 1
                break
            else:
                raise RuntimeError("no server left")

    async def create(self, game_id: str, seats: dict[str, str]) -> None:
        for url in owner_order(game_id, self.urls):
            try:
                r = await self.http[url].post(
                    "/v1/games", json={"game": GAME, "game_id": game_id, "seats": seats}
                )
            except httpx.TransportError:
                continue
            r.raise_for_status()
            self.games[game_id] = {"url": url, "seats": r.json()["seats"]}
            return
        raise RuntimeError("no server left")


def test_the_raw_http_recipe_keeps_every_game_going_when_a_server_dies() -> None:
    async def body() -> None:
        async with servers(2) as apps:
            transports = [Killable(app) for app, _ in apps]
            urls = ["http://a:8000", "http://b:8000"]
            http = {
                url: httpx.AsyncClient(transport=t, base_url=url)
                for url, t in zip(urls, transports, strict=True)
            }
            engine = RecipeEngine(http)
            tables = [RLCardTable(GAME) for _ in range(16)]
            ids = [f"t{i}" for i in range(len(tables))]
            for i, (gid, table) in enumerate(zip(ids, tables, strict=True)):
                await engine.create(gid, {"0": "learned", "1": "rules"})
                table.reset(i)
            # The recipe's order is croupier's own.
            assert all(owner_order(g, urls) == rank_servers(g, urls) for g in ids)
            on_a = [g for g in ids if engine.games[g]["url"] == urls[0]]
            assert on_a and len(on_a) < len(ids)

            async def step(gid: str, table: RLCardTable) -> None:
                p = table.current_player()
                d = await engine.call(
                    gid, f"/v1/games/{gid}/decide", {"seat": str(p), "state": table.state_json(p)}
                )
                table.step(d["action"])

            # Everyone decides once, then server a dies mid-hand.
            for gid, table in zip(ids, tables, strict=True):
                await step(gid, table)
            transports[0].dead = True
            decisions = 0
            for gid, table in zip(ids, tables, strict=True):
                while not table.is_over():
                    await step(gid, table)
                    decisions += 1
                payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
                ended = await engine.call(gid, f"/v1/games/{gid}/end", {"payoffs": payoffs})
                assert ended["game_id"] == gid
            assert decisions > 0
            assert engine.moved == len(on_a)
            survivor = apps[1][1].health()
            assert survivor["games_resumed"] == len(on_a)
            assert survivor["resumed_fragments_dropped"] == sum(
                1 for g in on_a if engine.games[g]["seats"]["0"]["policy"] == "learned"
            )
            for c in http.values():
                await c.aclose()

    asyncio.run(body())


def test_a_resumed_seat_is_the_seat_its_create_answered() -> None:
    from croupier.policies.seats import BadPolicySpec, SeatPolicy, resumed_seat_policy

    def resume(label: str, version: int | None, record: bool = True) -> SeatPolicy:
        return resumed_seat_policy(label, version, record=record, served=lambda v: v + 100)

    assert resume("rules", None) == SeatPolicy("rules")
    assert resume("random", None) == SeatPolicy("random")
    assert resume("learned", 4) == SeatPolicy("learned", 104, record=True)
    assert resume("learned", 4, record=False) == SeatPolicy("learned", 104, record=False)
    assert resume("learned@latest", 9) == SeatPolicy("learned", None, record=True)
    assert resume("frozen@3", 3) == SeatPolicy("frozen", 103)
    assert resume("frozen@3", None) == SeatPolicy("frozen", 103)
    assert resume("production", 5) == SeatPolicy("frozen", 105, channel="production")
    assert resume("canary:production", 5) == SeatPolicy("frozen", 105, channel="canary:production")
    assert resume("canary:rules", None) == SeatPolicy("rules", channel="canary:rules")
    assert resume("shadow", 2) == SeatPolicy("rules", 102, channel="shadow")
    assert resume("shadow", None) == SeatPolicy("rules", None, channel="shadow")
    assert resume("learned:greedy", 4) == SeatPolicy("learned", 104, greedy=True)
    assert resume("frozen@3:greedy", 3) == SeatPolicy("frozen", 103, greedy=True)
    assert resume("production:greedy", 5) == SeatPolicy(
        "frozen", 105, channel="production", greedy=True
    )
    # Every label a server gives answers with itself again (served unchanged).
    for policy in (SeatPolicy("learned", 4, record=True), SeatPolicy("frozen", 3),
                   SeatPolicy("frozen", 5, channel="production"), SeatPolicy("rules"),
                   SeatPolicy("learned", 4, greedy=True),
                   SeatPolicy("learned", None, greedy=True)):  # fmt: skip
        same = resumed_seat_policy(
            policy.label(), policy.version, record=policy.record, served=lambda v: v
        )
        assert same == policy
    for label, version in (("learned", None), ("frozen@x", None), ("frozen@-1", None),
                           ("production", None), ("magic", 1), ("rules:greedy", None),
                           ("shadow:greedy", 2)):  # fmt: skip
        with pytest.raises(BadPolicySpec):
            resume(label, version)


def test_a_server_gone_mid_answer_is_unavailable_an_overloaded_one_is_not() -> None:
    import aiohttp

    from croupier.client import CroupierError
    from croupier.routing import STARTING, unavailable

    assert unavailable(aiohttp.ServerDisconnectedError())
    assert unavailable(aiohttp.ClientConnectorError(None, OSError(111, "refused")))  # type: ignore[arg-type]
    # Killed after the headers: the body is cut short.
    assert unavailable(aiohttp.ClientPayloadError("Not enough data to satisfy content length"))
    assert unavailable(CroupierError(502, "bad gateway"))
    # As the client raises a `Problem` (its detail a sentence, its type kept apart).
    assert unavailable(CroupierError(503, "the server is starting", STARTING))
    assert unavailable(CroupierError(503, {"status": "starting"}))  # a server before Problems
    assert not unavailable(CroupierError(503, {"status": "overloaded"}))
    assert not unavailable(CroupierError(503, "overloaded", "urn:croupier:problem:overloaded"))
    assert not unavailable(CroupierError(404, "unknown game"))
    assert not unavailable(ValueError("not a transport error"))
