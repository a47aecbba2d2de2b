"""Engine-side batching: many tables' decide calls coalesced into `POST /v1/decide:batch`.

Each table still plays its hand as a plain sequence of awaits; its decide call just joins a
queue. A flusher sends everything queued as one request, with up to `max_inflight` requests
outstanding so the engine prepares the next batch while the server answers the last.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from croupier.client import CroupierClient, CroupierError


class BatchedDecider:
    def __init__(self, client: CroupierClient, max_items: int = 512, max_inflight: int = 2):
        self.client = client
        self.max_items = max_items
        self._queue: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max_inflight)
        self._task: asyncio.Task[None] | None = None
        self.requests = 0
        self.items = 0

    async def __aenter__(self) -> BatchedDecider:
        self._task = asyncio.create_task(self._flush_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def decide(self, game_id: str, seat: str, state: dict[str, Any]) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._queue.append(({"game_id": game_id, "seat": seat, "state": state}, future))
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
            asyncio.create_task(self._send(batch))

    async def _send(self, batch: list[tuple[dict[str, Any], asyncio.Future]]) -> None:
        try:
            results = await self.client.decide_batch([item for item, _ in batch])
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
