"""An async HTTP client for the croupier decision API.

    async with CroupierClient("http://localhost:8000") as c:
        g = await c.create_game("leduc-holdem")
        d = await c.decide(g["game_id"], "0", state)
        ...
        await c.end(g["game_id"], {"0": 1.0, "1": -1.0})

One aiohttp session (one connection pool) per client: share the client between tasks.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from croupier.settings import setting

_JSON = {"Content-Type": "application/json"}
# Carries a new game's id on create, for proxies that route by game id (path ids after that).
GAME_ID_HEADER = "X-Croupier-Game-Id"


class CroupierError(Exception):
    """The server answered with a non-2xx status: its `detail`, and a `Problem`'s `type`
    (`urn:croupier:problem:...`) when the answer was one, e.g. a starting server's 503."""

    def __init__(self, status: int, detail: Any, problem_type: str | None = None):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.problem_type = problem_type


@dataclass(frozen=True)
class Deadlines:
    """How long one request may take, each phase bounded on its own. A server that accepts
    the connection and never answers (hung, SIGSTOPped, swapping: the kernel still completes
    the handshake) is known as gone after `first_byte_s`, not after a whole request's
    timeout; the routed client then moves its games (routing.py). `croupier engine`'s flags.

    Why these numbers: a healthy server answers a decide within `--decide-deadline-ms`
    (1 s; the rules answer past it) plus its queue: p99 9.8 ms at 100 saturating games on a
    quiet box, the saturated floor's p99 0.1-1.5 s, a soak's whole-run p99 1.59 s at load
    average 8-15 (docs/performance.md, docs/operations.md). 3 s to the first byte is about
    twice the worst of those: a false alarm costs a game's move (its learned seats' steps so
    far), a frozen server costs its tables the whole wait (measured: `croupier bench outage
    --server-freeze`, docs/scale-out.md). Before, one 30 s total bound stalled them 30 s."""

    connect_s: float = setting(
        2.0,
        "Seconds a connection to a server may take to open (a dead host: no refusal, silence)",
        flag="connect-timeout-s",
        env="CROUPIER_CONNECT_TIMEOUT_S",
    )
    first_byte_s: float = setting(
        3.0,
        "Seconds from a request sent to its answer's first byte (and between reads); past "
        "it the server counts as gone and a routed client moves its games",
        flag="first-byte-timeout-s",
        env="CROUPIER_FIRST_BYTE_TIMEOUT_S",
    )
    total_s: float = setting(
        10.0,
        "Seconds one request may take in all, connection included",
        flag="request-timeout-s",
        env="CROUPIER_REQUEST_TIMEOUT_S",
    )

    def __post_init__(self) -> None:
        if min(self.connect_s, self.first_byte_s, self.total_s) <= 0:
            raise ValueError(f"deadlines must be positive seconds, got {self}")

    def client_timeout(self) -> aiohttp.ClientTimeout:
        # `sock_read` is aiohttp's bound on each wait for data, the first (the answer's
        # headers) included: the first byte's deadline.
        return aiohttp.ClientTimeout(
            total=self.total_s,
            sock_connect=min(self.connect_s, self.total_s),
            sock_read=min(self.first_byte_s, self.total_s),
        )


def _score(url: str, game_id: str) -> tuple[int, str]:
    digest = hashlib.blake2b(f"{url}\x00{game_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big"), url  # url breaks (astronomically rare) ties


def route_game(game_id: str, urls: list[str]) -> str:
    """The server that owns `game_id`, by rendezvous hashing (blake2b-64 of url, NUL, id;
    the highest wins).

    Every client picks the same server without coordination, and adding or removing one of
    N servers moves only ~1/N of the games.
    """
    if not urls:
        raise ValueError("no server urls to route to")
    return max(urls, key=lambda url: _score(url, game_id))


def rank_servers(game_id: str, urls: list[str]) -> list[str]:
    """`urls` in rendezvous order for `game_id`: its owner first, then where the game goes
    when the owner is down (failover: docs/scale-out.md)."""
    if not urls:
        raise ValueError("no server urls to route to")
    return sorted(urls, key=lambda url: _score(url, game_id), reverse=True)


def _q(game_id: str) -> str:
    # A game id is caller-chosen text: keep "/" or "?" in it from changing the route.
    return quote(str(game_id), safe="")


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


class CroupierClient:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        max_connections: int = 256,
        deadlines: Deadlines | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.deadlines = deadlines or Deadlines()
        self._timeout = self.deadlines.client_timeout()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> CroupierClient:
        self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _open(self) -> aiohttp.ClientSession:
        # Created lazily: aiohttp sessions must be made inside a running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                timeout=self._timeout,
                headers=self._headers,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        data = None if body is None else orjson.dumps(body)
        if body is not None:
            headers = {**_JSON, **(headers or {})}
        async with self._open().request(
            method, self.base_url + path, data=data, headers=headers
        ) as resp:
            raw = await resp.read()
            status = resp.status
        try:
            payload = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            payload = raw.decode(errors="replace")
        if not 200 <= status < 300:
            if not isinstance(payload, dict):
                raise CroupierError(status, payload)
            kind = payload.get("type")
            raise CroupierError(
                status, payload.get("detail", payload), kind if isinstance(kind, str) else None
            )
        return payload

    # --- the API --------------------------------------------------------------------------

    async def create_game(
        self,
        game: str,
        *,
        seats: dict[str, str] | None = None,
        game_id: str | None = None,
        pin: str | None = None,
        record: bool | str | None = None,
    ) -> dict[str, Any]:
        """Open a game; returns {"game_id", "seats": {seat: {"policy", "version"}}}.

        The id is chosen here when not given, and also sent as the `X-Croupier-Game-Id`
        header: a reverse proxy routing games by id (docs/scale-out.md) needs it before the
        server would have made one up."""
        game_id = game_id or uuid.uuid4().hex
        body = _drop_none(
            {"game": game, "game_id": game_id, "seats": seats, "pin": pin, "record": record}
        )
        return await self._request("POST", "/v1/games", body, {GAME_ID_HEADER: game_id})

    async def resume_game(
        self,
        game_id: str,
        game: str,
        seats: dict[str, dict[str, Any]],
        *,
        record: bool | str | None = None,
    ) -> dict[str, Any]:
        """Failover: take over a game whose server died, with its id and `seats` as its create
        answered them; returns {"game_id", "seats", "resumed", "substituted"}
        (docs/scale-out.md). `RoutedClient` does this by itself."""
        body = _drop_none({"game": game, "seats": seats, "record": record})
        return await self._request("POST", f"/v1/games/{_q(game_id)}/resume", body)

    async def decide(
        self,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        *,
        reward: float | None = None,
        turn: int | None = None,
    ) -> dict[str, Any]:
        """Ask for `seat`'s action; returns {"action", "action_index", "policy", "version",
        "fallback"}. `turn` (increasing through the game) makes a retry safe: the same turn
        again gets the same answer and is recorded once."""
        body = _drop_none({"seat": seat, "state": state, "reward": reward, "turn": turn})
        return await self._request("POST", f"/v1/games/{_q(game_id)}/decide", body)

    async def decide_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Many decisions in one request: items {game_id, seat, state, reward?}; per item,
        the decision or {"error": {"status", "detail"}}, in order."""
        return (await self._request("POST", "/v1/decide:batch", {"items": items}))["results"]

    async def end(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        return await self._request("POST", f"/v1/games/{_q(game_id)}/end", {"payoffs": payoffs})

    async def create_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Many games in one request: items as `create_game`'s body; per item
        {"game_id", "seats"} or {"error": {"status", "detail"}}, in order."""
        return (await self._request("POST", "/v1/games:batch", {"games": items}))["results"]

    async def end_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Many games closed in one request: items {game_id, payoffs}; per item
        {"game_id", "episodes"} or {"error": {"status", "detail"}}, in order."""
        return (await self._request("POST", "/v1/end:batch", {"items": items}))["results"]

    async def abort(self, game_id: str) -> None:
        await self._request("DELETE", f"/v1/games/{_q(game_id)}")

    async def policies(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/policies")

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/healthz")

    async def post_arena_results(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        """Record arena results for the dashboard's learning curve (an admin key's route)."""
        return await self._request("POST", "/v1/arena/results", results)

    async def live_arena(self) -> dict[str, Any]:
        """The match table of the games this server saw end (`GET /v1/arena/live`)."""
        return await self._request("GET", "/v1/arena/live")

    # --- the production channel (admin key) -----------------------------------------------

    async def channels(self) -> dict[str, Any]:
        """{"latest", "production", "history", ...}."""
        return await self._request("GET", "/v1/policies/channels")

    async def tiers(self) -> dict[str, Any]:
        """The difficulty tiers' calibration: {"calibrated", "stale", "calibration", ...}."""
        return await self._request("GET", "/v1/tiers")

    async def promote(self, version: int, evidence: dict[str, Any] | None = None) -> Any:
        body = _drop_none({"version": version, "evidence": evidence})
        return await self._request("POST", "/v1/policies/promote", body)

    async def rollback(self, evidence: dict[str, Any] | None = None) -> Any:
        return await self._request("POST", "/v1/policies/rollback", {"evidence": evidence})

    async def set_canary_share(self, share: float, evidence: dict[str, Any] | None = None) -> Any:
        body = _drop_none({"share": share, "evidence": evidence})
        return await self._request("POST", "/v1/policies/canary", body)
