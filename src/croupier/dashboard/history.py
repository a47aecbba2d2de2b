"""The dashboard's recent past: one sample a second of the server's counters, as rates.

A background task samples while the server runs, so a page opened now shows the last
`HISTORY_SECONDS` at once instead of starting empty.

The history is bounded in bytes, not samples: a sample carries a rate per decision label, and
900 samples of 40,000 labels once held ~800 MiB and made a 98 MiB `data.json`. Labels are
bounded now (`sessions/labels.py`), a sample leaves out the labels that made no decision, and
past `HISTORY_MAX_BYTES` (the samples as JSON) samples are thinned where they are densest: the
page still spans the last 15 minutes, at a coarser step (a healthy server's ~280-byte samples:
~230 of them, one every ~4 s; the page's whole `data.json` stays under 100 KB).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from croupier.api.metrics import RequestStats

log = logging.getLogger(__name__)

HISTORY_SECONDS = 900
SAMPLE_EVERY_S = 1.0
HISTORY_MAX_BYTES = 64 * 1024
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


def json_size(value: Any) -> int:
    """Bytes of `value` as the dashboard's JSON answer writes it (compact separators)."""
    return len(json.dumps(value, separators=(",", ":")))


def densest(times: list[float]) -> int:
    """The inner sample whose neighbours are closest: the one whose loss costs the chart least
    (the first and the last stay: the window's span and the tiles' current values)."""
    return min(range(1, len(times) - 1), key=lambda i: times[i + 1] - times[i - 1])


class History:
    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        requests: RequestStats,
        max_bytes: int = HISTORY_MAX_BYTES,
    ):
        self._snapshot = snapshot
        self._requests = requests
        self.max_bytes = max_bytes
        self.samples: deque[dict[str, Any]] = deque()
        self._sizes: deque[int] = deque()  # each sample's `json_size`
        self.nbytes = 0
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
        decisions0 = before.get("decisions", {})
        by_policy = {  # only labels with decisions: an idle label costs a sample nothing
            p: round(rate, 3)
            for p, n in health.get("decisions", {}).items()
            if (rate := (n - decisions0.get(p, 0)) / dt) > 0
        }
        episodes, episodes0 = health.get("episodes", {}), before.get("episodes", {})
        delta = [c - (cum0[i] if i < len(cum0) else 0.0) for i, c in enumerate(cumulative)]
        p50, p99 = quantile(bounds, delta, 0.5), quantile(bounds, delta, 0.99)
        point = {
            "t": round(now, 3),
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
        self._append(point)
        return point

    def _append(self, point: dict[str, Any]) -> None:
        size = json_size(point)
        self.samples.append(point)
        self._sizes.append(size)
        self.nbytes += size
        while self.samples and point["t"] - self.samples[0]["t"] > HISTORY_SECONDS:
            self.samples.popleft()
            self.nbytes -= self._sizes.popleft()
        while self.nbytes > self.max_bytes and len(self.samples) > 2:
            i = densest([p["t"] for p in self.samples])
            del self.samples[i]
            self.nbytes -= self._sizes[i]
            del self._sizes[i]
