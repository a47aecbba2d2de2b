"""Dynamic batching of learned-policy decisions: many concurrent requests, one forward pass.

Requests append to a pending list and await a future. One worker task takes everything pending
(up to `max_batch`) and runs the forward on a dedicated thread (or inline on the event loop), so
the event loop keeps accepting requests meanwhile; those pile up and form the next batch. No
wait is added when work is already queued: a lone request is answered at once, and under load
the batch size grows by itself with the forward's duration. `max_wait_ms` > 0 trades latency
for bigger batches by waiting that long for company before a batch that is not full.

With a deadline, a request still waiting for its forward that long is answered `None` (late:
the caller's fallback answers instead). One sweep of the queue's oldest end every few
milliseconds does it, not a timer per request: `loop.call_later` and its cancel were ~3% of a
learned decide's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from typing import Any, TypeVar

import numpy as np
import torch

from croupier.policies.learned import ModelDecision, PolicyVersions, Row

__all__ = ["InferenceBatcher", "ModelDecision", "Row"]

T = TypeVar("T")

# A batch request's forward runs on the event loop (no thread round trip: in-process, that cost
# a `decide:batch` item more than its share of the forward) while it is at most this many
# scored rows (a candidate game: candidates), and on the forward thread beyond: measured 6-15 us
# a doudizhu candidate on this 2-core box, so at most ~25-60 ms of the loop. A 4 MiB batch of
# 380-move doudizhu states held the loop, /healthz included, for 1.2-1.5 s. 64 items of a
# real doudizhu game (~20-50 moves each, `bench serve`'s batch) stay under it.
FORWARD_INLINE_MAX_ROWS = 4096


# Plain slotted class: a frozen dataclass's __init__ costs more than the rest done per request.
@dataclass(slots=True)
class _Request:
    obs: np.ndarray
    mask: np.ndarray
    version: int | None
    # None when the deadline passed first (late) or the model's output was unfit (invalid).
    future: asyncio.Future[ModelDecision | None]
    due: float  # loop time past which the request is late
    greedy: bool = False  # the most likely legal action, not a sample (a `…:greedy` seat)


class InferenceBatcher:
    def __init__(
        self,
        versions: PolicyVersions,
        max_batch: int = 256,
        max_wait_ms: float = 0.0,
        forward_thread: bool = True,
        forward_inline_from: int = 128,
        forward_thread_from_candidates: int = 0,
        deadline_s: float | None = None,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.deadline_s = deadline_s if deadline_s and deadline_s > 0 else None
        self.versions = versions
        self.max_batch = max_batch
        self.max_wait_s = max(0.0, max_wait_ms) / 1000.0
        self._pending: list[_Request] = []
        self._running: list[_Request] = []  # the batch on the forward thread right now
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # On its own thread (the default) the forward overlaps request handling: torch drops
        # the GIL inside its kernels, and the event loop keeps reading and answering requests
        # meanwhile. Inline, it runs on the event loop between request steps, which locks every
        # request in flight into the same cycle: at 100 games on this 2-core box, same
        # throughput (within 4%) but p99 34-69 ms inline against 15-24 ms on the thread.
        # `croupier bench serve` measures both (c vs c-inline).
        self.forward_thread = forward_thread
        # A batch this big means requests pile up faster than the loop turns: the loop is
        # saturated, and a thread's result waits a whole (long) loop turn to be picked up
        # (at 1000 games: ~30 forwards/s on the thread against ~100/s inline). Inline then.
        self.forward_inline_from = forward_inline_from
        # A candidate game's batch of fewer candidates than this runs inline too: its forward
        # is shorter than the thread's round trip (future, self-pipe wake-up, the GIL handed
        # over and back), so the loop is held for less than the hand-off would cost it.
        self.forward_thread_from_candidates = forward_thread_from_candidates
        # torch's intra-op thread count is per thread: without this the forward thread ran
        # with one OpenMP worker per core, spinning, and a forward cost twice the CPU.
        self._executor = ThreadPoolExecutor(
            1,
            thread_name_prefix="croupier-forward",
            initializer=torch.set_num_threads,
            initargs=(1,),
        )
        self.forward_passes = 0
        self.decisions = 0
        self.max_batch_seen = 0
        self.late = 0  # answered None: waited past the deadline
        # Answered None: the model's output was unfit to serve (non-finite, or an action
        # outside the mask); the caller's fallback answers and nothing is recorded.
        self.invalid = 0
        # Forward rounds by batch size (index = size): the /metrics batch-size histogram.
        self.batch_size_counts = [0] * (max_batch + 1)

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._worker(), name="croupier-batcher")
        if self.deadline_s is not None:
            self._sweeper = asyncio.create_task(self._sweep_late(), name="croupier-late-sweep")

    async def stop(self) -> None:
        for task in (self._task, self._sweeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for req in self._running + self._pending:
            if not req.future.done():
                req.future.set_exception(RuntimeError("server shutting down"))
        self._pending.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def warm_up(self, obs: np.ndarray, mask: np.ndarray) -> None:
        """One forward where the real ones will run, before serving: the forward thread's
        first task (thread start, torch's lazy init) measured ~1 s on a busy 2-core box.
        `obs`, `mask`: one row each (a candidate game's `mask` is its candidate rows)."""
        _, module = self.versions.resolve(None)
        act, rows = self.versions.act_rows, ([obs], [mask])
        if self.forward_thread:
            self._executor.submit(act, module, *rows).result()
        else:
            act(module, *rows)

    @property
    def queued(self) -> int:
        return len(self._pending)

    def submit(
        self, obs: np.ndarray, mask: np.ndarray, version: int | None, greedy: bool = False
    ) -> asyncio.Future[ModelDecision | None]:
        """Queue one decision; the future resolves after the batch that carries it has run
        (to None if the deadline passed first). `greedy`: its most likely legal action."""
        assert self._wake is not None, "batcher not started"
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ModelDecision | None] = loop.create_future()
        due = loop.time() + self.deadline_s if self.deadline_s is not None else math.inf
        self._pending.append(_Request(obs, mask, version, future, due, greedy))
        self._wake.set()
        return future

    def forward_now(
        self, rows: list[Row], greedy: list[bool] | None = None
    ) -> list[ModelDecision | None]:
        """The decisions of one batch request (`decide:batch`), forwarded at once on the
        caller's thread, `max_batch` rows at a time; answers in `rows`' order.

        They arrived together, so there is nothing to wait for: no queue, future, deadline
        or thread round trip (in-process, those cost a `decide:batch` item more than its
        share of the forward). A failing model raises here, for the caller's fallback.

        It may run while the forward thread runs a queued batch: inference reads the weights
        only and numpy's generator locks itself; the stats counters may then miss a count.
        `greedy`: per row, whether it takes its most likely legal action (None: none does)."""
        out: list[ModelDecision | None] = []
        for start in range(0, len(rows), self.max_batch):
            end = start + self.max_batch
            out += self._forward(rows[start:end], None if greedy is None else greedy[start:end])
        return out

    async def forward_batch(
        self, rows: list[Row], greedy: list[bool] | None = None
    ) -> list[ModelDecision | None]:
        """`forward_now`, on the forward thread when the rows are more work than the event
        loop should carry (`FORWARD_INLINE_MAX_ROWS` scored rows; with the forward thread)."""
        scored = len(rows)
        if rows and rows[0][1].ndim == 2:  # a candidate game's rows: their candidates
            scored = sum(len(row[1]) for row in rows)
        if not self.forward_thread or scored <= FORWARD_INLINE_MAX_ROWS:
            return self.forward_now(rows, greedy)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.forward_now, rows, greedy)

    async def off_loop(self, work: Callable[[], T]) -> T:
        """`work()` on the forward thread (inline without one): a batch's features too big to
        build on the event loop (`deciding.ENCODE_INLINE_MAX`)."""
        if not self.forward_thread:
            return work()
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def decide(
        self, obs: np.ndarray, mask: np.ndarray, version: int | None
    ) -> ModelDecision | None:
        return await self.submit(obs, mask, version)

    async def _sweep_late(self) -> None:
        assert self.deadline_s is not None
        loop = asyncio.get_running_loop()
        interval = min(self.deadline_s / 4, 0.02)
        while True:
            await asyncio.sleep(interval)
            self.expire_late(loop.time())

    def expire_late(self, now: float) -> None:
        """Answer None to every request due by `now` that has no result yet. The queue is in
        arrival order, so only its oldest end is looked at."""
        k = 0
        for req in self._pending:
            if req.due > now:
                break
            k += 1
        late = self._pending[:k]
        del self._pending[:k]
        # A batch on the forward thread: its late requests are answered now, the rest later.
        late += [req for req in self._running if req.due <= now]
        for req in late:
            if not req.future.done():
                req.future.set_result(None)
                self.late += 1

    async def _worker(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
            if self.max_wait_s and len(self._pending) < self.max_batch:
                await asyncio.sleep(self.max_wait_s)
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
            # Skip requests already answered (late) or given up by their client.
            batch = self._running = [req for req in batch if not req.future.done()]
            if not batch:
                continue
            rows = [(req.obs, req.mask, req.version) for req in batch]
            greedy = [req.greedy for req in batch]
            greedy_rows = greedy if any(greedy) else None
            try:
                if self._on_thread(batch):
                    results = await loop.run_in_executor(
                        self._executor, self._forward, rows, greedy_rows
                    )
                else:
                    results = self._forward(rows, greedy_rows)
            except Exception as e:  # a broken model must fail its requests, not the worker
                for req in batch:
                    if not req.future.done():
                        req.future.set_exception(e)
            else:
                for req, result in zip(batch, results, strict=True):
                    if not req.future.done():  # late, or the client went away
                        req.future.set_result(result)
            self._running = []

    def _on_thread(self, batch: list[_Request]) -> bool:
        """The thread keeps single decisions flowing while a forward runs. Inline instead for
        a batch this big: the loop is saturated (see `forward_inline_from`)."""
        if not self.forward_thread or len(batch) >= self.forward_inline_from:
            return False
        if self.forward_thread_from_candidates <= len(batch) or batch[0].mask.ndim != 2:
            return True  # a game scored over a fixed action set: as before (see config.py)
        return sum(len(req.mask) for req in batch) >= self.forward_thread_from_candidates

    def _forward(
        self, batch: list[Row], greedy: list[bool] | None = None
    ) -> list[ModelDecision | None]:
        """One forward per weights version present in the batch; answers in the batch's
        order. Versions are resolved once per distinct pin, not once per row. `greedy`: per
        row, its most likely legal action instead of a sample (None: every row samples)."""
        pins = {pin for _, _, pin in batch}
        if len(pins) == 1:  # the usual case: every row wants the same version
            version, module = self.versions.resolve(pins.pop())
            out = self._forward_rows(batch, version, module, greedy)
        else:
            out = self._forward_by_version(batch, pins, greedy)
        self.decisions += len(batch)
        self.max_batch_seen = max(self.max_batch_seen, len(batch))
        self.batch_size_counts[len(batch)] += 1
        return out

    def _forward_by_version(
        self, batch: list[Row], pins: set[int | None], greedy: list[bool] | None = None
    ) -> list[ModelDecision | None]:
        resolved = {pin: self.versions.resolve(pin) for pin in pins}
        rows_of: dict[int, tuple[Any, list[int]]] = {}  # version -> (module, row indices)
        for i, (_, _, pin) in enumerate(batch):
            version, module = resolved[pin]
            rows_of.setdefault(version, (module, []))[1].append(i)
        out: list[Any] = [None] * len(batch)
        for version, (module, at) in rows_of.items():
            rows_greedy = None if greedy is None else [greedy[i] for i in at]
            decisions = self._forward_rows([batch[i] for i in at], version, module, rows_greedy)
            for i, decision in zip(at, decisions, strict=True):
                out[i] = decision
        return out

    def _forward_rows(
        self, rows: list[Row], version: int, module: Any, greedy: list[bool] | None = None
    ) -> list[ModelDecision | None]:
        res = self.versions.act_rows(
            module,
            [row[0] for row in rows],
            [row[1] for row in rows],
            greedy=None if greedy is None else np.array(greedy, bool),
        )
        self.forward_passes += 1
        # Iterating `logits` gives its rows; `map` spares a Python loop per decision.
        out: list[ModelDecision | None] = list(
            map(ModelDecision, res.actions.tolist(), res.logp.tolist(), res.logits, repeat(version))
        )
        if res.valid is not None:  # a row unfit to serve: None, the fallback's to answer
            for i in np.flatnonzero(~res.valid).tolist():
                out[i] = None
                self.invalid += 1
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "decisions": self.decisions,
            "forward_passes": self.forward_passes,
            "mean_batch": self.decisions / self.forward_passes if self.forward_passes else 0.0,
            "max_batch_seen": self.max_batch_seen,
            "late": self.late,
            "invalid": self.invalid,
            "queued": self.queued,
            "max_batch": self.max_batch,
            "max_wait_ms": self.max_wait_s * 1000.0,
        }
