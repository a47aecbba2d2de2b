"""Several policy servers as one client: each game lives on the server `route_game` picks for
its id, so every engine process (and a proxy hashing the same way) agrees without talking.

    async with RoutedClient(["http://a:8000", "http://b:8000"]) as c:
        g = await c.create_game("leduc-holdem")   # the id is chosen here, then routed
        await c.decide(g["game_id"], "0", state)
"""

from __future__ import annotations

import asyncio
import uuid
from types import TracebackType
from typing import Any

from croupier.client import CroupierClient, route_game


def parse_urls(text: str) -> list[str]:
    """`http://a:8000,http://b:8000` -> the list (one url is a list of one)."""
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise ValueError("no server url given")
    return urls


class RoutedClient:
    """The `CroupierClient` API over many servers, routed by game id (rendezvous hashing)."""

    def __init__(self, urls: list[str], **client_options: Any):
        if not urls:
            raise ValueError("no server urls to route to")
        self.urls = list(urls)
        self.clients = {url: CroupierClient(url, **client_options) for url in self.urls}

    def client_for(self, game_id: str) -> CroupierClient:
        return self.clients[route_game(game_id, self.urls)]

    async def __aenter__(self) -> RoutedClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients.values()))

    async def create_game(
        self,
        game: str,
        *,
        seats: dict[str, str] | None = None,
        game_id: str | None = None,
        pin: str | None = None,
        record: bool | str | None = None,
    ) -> dict[str, Any]:
        # Routing needs the id before the server exists to make one up: we pick it.
        game_id = game_id or uuid.uuid4().hex
        return await self.client_for(game_id).create_game(
            game, seats=seats, game_id=game_id, pin=pin, record=record
        )

    async def decide(
        self, game_id: str, seat: str, state: dict[str, Any], *, reward: float | None = None
    ) -> dict[str, Any]:
        return await self.client_for(game_id).decide(game_id, seat, state, reward=reward)

    async def decide_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._per_server(items, "decide_batch")

    async def create_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Routing needs every id before any server would make one up: we pick them.
        items = [{**item, "game_id": item.get("game_id") or uuid.uuid4().hex} for item in items]
        return await self._per_server(items, "create_games")

    async def end_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._per_server(items, "end_games")

    async def _per_server(self, items: list[dict[str, Any]], call: str) -> list[dict[str, Any]]:
        """One batch request per server involved, sent together; results in `items` order."""
        groups: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            groups.setdefault(route_game(str(item.get("game_id")), self.urls), []).append(i)
        answers = await asyncio.gather(
            *(
                getattr(self.clients[url], call)([items[i] for i in rows])
                for url, rows in groups.items()
            )
        )
        out: list[dict[str, Any]] = [{}] * len(items)
        for rows, results in zip(groups.values(), answers, strict=True):
            for i, result in zip(rows, results, strict=True):
                out[i] = result
        return out

    async def end(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        return await self.client_for(game_id).end(game_id, payoffs)

    async def abort(self, game_id: str) -> None:
        await self.client_for(game_id).abort(game_id)

    async def health(self) -> dict[str, Any]:
        """Every server's /healthz, by url."""
        answers = await asyncio.gather(*(c.health() for c in self.clients.values()))
        return dict(zip(self.urls, answers, strict=True))


def client_for_urls(url_text: str, **client_options: Any) -> CroupierClient | RoutedClient:
    """One server: a plain client; a comma-separated list: a routed one."""
    urls = parse_urls(url_text)
    if len(urls) == 1:
        return CroupierClient(urls[0], **client_options)
    return RoutedClient(urls, **client_options)
