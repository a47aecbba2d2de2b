"""Engine-side batching: many tables' calls coalesced into the batch routes.

Each table still plays its hand as a plain sequence of awaits (create, decide…, end); each
call just joins a queue. Per kind of call, a flusher sends everything queued as one request
(`POST /v1/games:batch`, `/v1/decide:batch`, `/v1/end:batch`), with up to `max_inflight`
requests outstanding so the engine prepares the next batch while the server answers the last.
An item's error fails only the table that made the call.

Over several servers (`RoutedClient`) each server has its own queues: a batch mixing servers
would wait for the slowest, and a frozen one would hold every table until its deadline (seen:
a fleet's hands/s at 0 for the 80 s one of two servers was SIGSTOPped). A table's call joins
the queue of the server its game is on when it is made; the routed client still sends each
item where the game is by then, failing over what its server cannot answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from croupier.client import CroupierClient, CroupierError
from croupier.routing import RoutedClient

SendBatch = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


class BatchedCalls:
    """One kind of call, coalesced: `await call(item)` returns that item's result."""

    def __init__(self, send: SendBatch, max_items: int = 512, max_inflight: int = 2):
        self.send = send
        self.max_items = max_items
        self._queue: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max_inflight)
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self.requests = 0
        self.items = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._flush_loop())

    async def stop(self) -> None:
        for task in [self._task, *self._sending]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def call(self, item: dict[str, Any]) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        self._wake.set()
        return await future

    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            await self._slots.acquire()
            # One pass of the event loop lets every table that is ready join this batch.
            await asyncio.sleep(0)
            batch, self._queue = self._queue[: self.max_items], self._queue[self.max_items :]
            if not self._queue:
                self._wake.clear()
            if not batch:
                self._slots.release()
                continue
            task = asyncio.create_task(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[dict[str, Any], asyncio.Future]]) -> None:
        try:
            results = await self.send([item for item, _ in batch])
            self.requests += 1
            self.items += len(batch)
            if len(results) != len(batch):
                raise CroupierError(502, f"{len(results)} results for {len(batch)} items")
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                error = result.get("error") if isinstance(result, dict) else None
                if error:
                    future.set_exception(CroupierError(error["status"], error["detail"]))
                else:
                    future.set_result(result)
        except Exception as e:  # the request failed: every table waiting on it sees the error
            for _, future in batch:
                if not future.done():
                    future.set_exception(e)
        finally:
            self._slots.release()


class PerServer:
    """One kind of call, coalesced per server: `await call(item)` joins the queue (a
    `BatchedCalls`, started on first use) of the server `server_of(item)` names, so one
    server's slow answer holds only its own items."""

    def __init__(
        self,
        send: SendBatch,
        server_of: Callable[[dict[str, Any]], str],
        max_items: int,
        max_inflight: int,
    ):
        self.send, self.server_of = send, server_of
        self.max_items, self.max_inflight = max_items, max_inflight
        self.lanes: dict[str, BatchedCalls] = {}  # at most one per server of the client

    async def call(self, item: dict[str, Any]) -> dict[str, Any]:
        server = self.server_of(item)
        lane = self.lanes.get(server)
        if lane is None:
            lane = self.lanes[server] = BatchedCalls(self.send, self.max_items, self.max_inflight)
            lane.start()
        return await lane.call(item)

    async def stop(self) -> None:
        for lane in self.lanes.values():
            await lane.stop()

    @property
    def requests(self) -> int:
        return sum(lane.requests for lane in self.lanes.values())

    @property
    def items(self) -> int:
        return sum(lane.items for lane in self.lanes.values())


class BatchingClient:
    """The hand-playing calls of `CroupierClient` (create_game, decide, end, abort), each sent
    through its batch route together with the other tables' calls of the same server."""

    def __init__(
        self, client: CroupierClient | RoutedClient, max_items: int = 512, max_inflight: int = 2
    ):
        self.client = client
        if isinstance(client, RoutedClient):
            where_new = client.first_choice
            where = client.url_for
        else:
            where_new = where = lambda _game_id: client.base_url

        def lanes(send: SendBatch, server: Callable[[str], str]) -> PerServer:
            return PerServer(
                send, lambda item: server(str(item["game_id"])), max_items, max_inflight
            )

        self._create = lanes(client.create_games, where_new)
        self._decide = lanes(client.decide_batch, where)
        self._end = lanes(client.end_games, where)

    @property
    def calls(self) -> dict[str, PerServer]:
        return {"create": self._create, "decide": self._decide, "end": self._end}

    async def __aenter__(self) -> BatchingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for calls in self.calls.values():
            await calls.stop()

    async def create_game(
        self,
        game: str,
        *,
        seats: dict[str, str] | None = None,
        game_id: str | None = None,
        pin: str | None = None,
        record: bool | str | None = None,
    ) -> dict[str, Any]:
        # The id is chosen here, as the plain client does (routing needs it up front).
        item = {"game": game, "game_id": game_id or uuid.uuid4().hex, "seats": seats}
        item.update({k: v for k, v in (("pin", pin), ("record", record)) if v is not None})
        return await self._create.call(item)

    async def decide(self, game_id: str, seat: str, state: dict[str, Any]) -> dict[str, Any]:
        return await self._decide.call({"game_id": game_id, "seat": seat, "state": state})

    async def end(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        return await self._end.call({"game_id": game_id, "payoffs": payoffs})

    async def abort(self, game_id: str) -> None:
        await self.client.abort(game_id)
