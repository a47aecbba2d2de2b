"""The dashboard's recent past: one sample a second of the server's counters, as rates.

A background task samples while the server runs, so a page opened now shows the last
`HISTORY_SECONDS` at once instead of starting empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from croupier.api.metrics import RequestStats

log = logging.getLogger(__name__)

HISTORY_SECONDS = 900
SAMPLE_EVERY_S = 1.0
# The endpoints whose latency the dashboard charts: the engine's decision requests.
DECISION_ENDPOINTS = ("decide", "decide_batch")


def quantile(bounds: list[float], cumulative: list[int] | list[float], q: float) -> float | None:
    """The q-quantile of a cumulative-bucket histogram, interpolated inside its bucket."""
    if not cumulative or cumulative[-1] <= 0:
        return None
    target = q * cumulative[-1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= target:
            if bound == float("inf"):
                return lower_bound
            inside = count - lower_count
            frac = (target - lower_count) / inside if inside > 0 else 1.0
            return lower_bound + (bound - lower_bound) * frac
        lower_bound, lower_count = bound, count
    return lower_bound


def production_version(health: dict[str, Any]) -> int | None:
    """The production channel's version when the server has one (`production` in health())."""
    prod = health.get("production", health.get("production_version"))
    if isinstance(prod, dict):
        prod = prod.get("version")
    return prod if isinstance(prod, int) and not isinstance(prod, bool) else None


class History:
    def __init__(self, snapshot: Callable[[], dict[str, Any]], requests: RequestStats):
        self._snapshot = snapshot
        self._requests = requests
        self.samples: deque[dict[str, Any]] = deque(maxlen=int(HISTORY_SECONDS / SAMPLE_EVERY_S))
        self._last: tuple[float, dict[str, Any], list[int]] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="croupier-dashboard-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a bad health() field must not end the history for good
                log.exception("dashboard sample failed")
            await asyncio.sleep(SAMPLE_EVERY_S)

    def sample(self) -> dict[str, Any] | None:
        """Take one sample (rates over the time since the previous one); None on the first."""
        now = time.time()
        health = self._snapshot()
        bounds, cumulative = self._requests.cumulative(DECISION_ENDPOINTS)
        last, self._last = self._last, (now, health, cumulative)
        if last is None:
            return None
        t0, before, cum0 = last
        dt = max(now - t0, 1e-6)
        by_policy = {
            p: max(0.0, (n - before.get("decisions", {}).get(p, 0)) / dt)
            for p, n in health.get("decisions", {}).items()
        }
        episodes, episodes0 = health.get("episodes", {}), before.get("episodes", {})
        delta = [c - (cum0[i] if i < len(cum0) else 0.0) for i, c in enumerate(cumulative)]
        p50, p99 = quantile(bounds, delta, 0.5), quantile(bounds, delta, 0.99)
        point = {
            "t": now,
            "decisions_per_s": sum(by_policy.values()),
            "decisions_per_s_by_policy": by_policy,
            "latency_p50_ms": None if p50 is None else p50 * 1000.0,
            "latency_p99_ms": None if p99 is None else p99 * 1000.0,
            "games_in_flight": health.get("games_in_flight", 0),
            "version": health.get("version"),
            "production_version": production_version(health),
            "episodes_waiting": episodes.get("pending", 0),
            "ingest_lag_versions": health.get("ingest", {}).get("oldest_waiting_lag_versions"),
            "episodes_shipped_per_s": max(
                0.0, (episodes.get("shipped", 0) - episodes0.get("shipped", 0)) / dt
            ),
            "episodes_dropped": episodes.get("dropped", 0),
        }
        self.samples.append(point)
        return point
