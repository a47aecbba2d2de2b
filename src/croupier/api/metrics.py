"""Prometheus metrics for the policy server: `GET /metrics`.

The decide path pays for one thing only: an ASGI middleware counting each request into a
latency bucket and a status count (plain ints: ~1.5 µs a request, where prometheus-client's own
Histogram and Counter, which lock, cost ~4 µs). Everything else is read at scrape time
from the counters the service already keeps (`DecisionService.health()`, the trainer link's
`stats()`), so a new numeric field there shows up here without code: `health()["a"]["b"]`
becomes the gauge `croupier_a_b`; a name listed in `COUNTERS` is exported as a counter
(`croupier_a_b_total`), a dict of numbers listed in `LABELLED` as one metric with a label.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

PREFIX = "croupier"

# health() paths (joined with "_") that only ever grow: exported as Prometheus counters.
COUNTERS = {
    "games_created",
    "decisions",
    "batcher_decisions",
    "batcher_forward_passes",
    "episodes_recorded",
    "episodes_shipped",
    "episodes_dropped",
    "trainer_link_connects",
    "trainer_link_versions_installed",
    "episodes_acked",
    "episodes_corrupt",
    "fallbacks",
    "turn_replays",
    "refused_overload",
    "refused_too_large",
    "refused_quota",
    "expired_games",
    "episodes_cut",
    "weights_refused",
    "batcher_invalid",
    "trainer_link_errors",
    "trainer_link_versions_refused",
    "episodes_too_big",
}
# health() dicts of numbers exported as one metric labelled by their keys.
LABELLED = {"decisions": "policy"}
# Not metrics: configuration echoed in health(), or summaries Prometheus derives itself.
SKIPPED = {"batcher_max_batch", "batcher_max_wait_ms", "batcher_mean_batch"}

# Request latency buckets (seconds): sub-millisecond decisions up to a stuck request.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.0, 2.5, 10.0,
)  # fmt: skip


def endpoint_of(path: str) -> str:
    """A bounded label for a request path (game ids must not become label values)."""
    if path.endswith("/decide"):
        return "decide"
    if path == "/v1/decide:batch":
        return "decide_batch"
    if path == "/v1/games":
        return "create_game"
    if path == "/v1/games:batch":
        return "create_games"
    if path == "/v1/end:batch":
        return "end_batch"
    if path.endswith("/end"):
        return "end_game"
    if path.startswith("/v1/games/"):
        return "abort_game"
    if path in ("/healthz", "/metrics", "/v1/policies"):
        return path.strip("/").replace("/", "_")
    if path.startswith("/dashboard"):
        return "dashboard"
    if path == "/v1/arena/results":
        return "arena_results"
    return "other"


def _name(path: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in path)


def flatten(values: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) for every leaf of a nested dict; paths joined with "_"."""
    for key, value in values.items():
        path = f"{prefix}_{key}" if prefix else str(key)
        if isinstance(value, dict) and _name(path) not in LABELLED:
            yield from flatten(value, path)
        else:
            yield _name(path), value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


class ServiceCollector(Collector):
    """Reads the server's own counters when Prometheus scrapes."""

    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        batch_sizes: Callable[[], Any],
        requests: RequestStats,
    ):
        self._snapshot = snapshot
        self._batch_sizes = batch_sizes
        self._requests = requests

    def collect(self) -> Iterable[Any]:
        yield from self._requests.families()
        for path, value in flatten(self._snapshot()):
            if path in SKIPPED:
                continue
            name = f"{PREFIX}_{path}"
            if path in LABELLED and isinstance(value, dict):
                family = CounterMetricFamily if path in COUNTERS else GaugeMetricFamily
                metric = family(
                    name, f"health(): {path} by {LABELLED[path]}", labels=[LABELLED[path]]
                )
                for key, v in value.items():
                    if (n := _number(v)) is not None:
                        metric.add_metric([str(key)], n)
                yield metric
                continue
            number = _number(value)
            if number is None:
                continue
            if path in COUNTERS:
                yield CounterMetricFamily(name, f"health(): {path}", value=number)
            else:
                yield GaugeMetricFamily(name, f"health(): {path}", value=number)
        yield self._batch_histogram()

    def _batch_histogram(self) -> HistogramMetricFamily:
        """Forward-pass batch sizes, from the batcher's per-size counts, in powers of two."""
        counts = list(self._batch_sizes())  # index = batch size
        buckets: list[tuple[str, float]] = []
        edge = 1
        while True:
            buckets.append((str(float(edge)), float(sum(counts[: edge + 1]))))
            if edge >= len(counts) - 1:
                break
            edge *= 2
        buckets.append(("+Inf", float(sum(counts))))
        total_sum = sum(size * n for size, n in enumerate(counts))
        return HistogramMetricFamily(
            f"{PREFIX}_batch_size",
            "Decisions per batcher forward round",
            buckets=buckets,
            sum_value=float(total_sum),
        )


class RequestStats:
    """Latency bucket counts by endpoint and request counts by (endpoint, status). Written and
    read only on the event loop (middleware, scrape and dashboard alike), so no lock."""

    def __init__(self) -> None:
        self.latency: dict[str, list[int]] = {}  # per bucket of LATENCY_BUCKETS, then +Inf
        self.latency_sum: dict[str, float] = {}
        self.requests: dict[tuple[str, int], int] = {}

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        counts = self.latency.get(endpoint)
        if counts is None:
            counts = self.latency[endpoint] = [0] * (len(LATENCY_BUCKETS) + 1)
            self.latency_sum[endpoint] = 0.0
        counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # le: the first bound >= seconds
        self.latency_sum[endpoint] += seconds
        key = (endpoint, status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def cumulative(self, endpoints: Iterable[str]) -> tuple[list[float], list[int]]:
        """(upper bounds with +Inf, cumulative counts) summed over `endpoints`."""
        total = [0] * (len(LATENCY_BUCKETS) + 1)
        for endpoint in endpoints:
            for i, n in enumerate(self.latency.get(endpoint, ())):
                total[i] += n
        running, out = 0, []
        for n in total:
            running += n
            out.append(running)
        return [*LATENCY_BUCKETS, float("inf")], out

    def families(self) -> Iterator[Any]:
        latency = HistogramMetricFamily(
            f"{PREFIX}_request_seconds",
            "HTTP request latency by endpoint (server side: request in to answer sent)",
            labels=["endpoint"],
        )
        for endpoint in list(self.latency):
            bounds, cumulative = self.cumulative([endpoint])
            buckets = [
                ("+Inf" if b == float("inf") else str(b), float(c))
                for b, c in zip(bounds, cumulative, strict=True)
            ]
            latency.add_metric([endpoint], buckets, self.latency_sum[endpoint])
        yield latency
        requests = CounterMetricFamily(
            f"{PREFIX}_requests",
            "HTTP requests by endpoint and status",
            labels=["endpoint", "status"],
        )
        for (endpoint, status), n in list(self.requests.items()):
            requests.add_metric([endpoint, str(status)], n)
        yield requests


class RequestMetrics:
    """Pure ASGI middleware: times every HTTP request into `RequestStats`."""

    def __init__(self, app: Any, stats: RequestStats):
        self.app = app
        self.stats = stats

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note_status)
        finally:
            self.stats.observe(endpoint_of(scope["path"]), status, time.perf_counter() - start)


class ServerMetrics:
    """One registry per app (tests build many apps in one process)."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]], batch_sizes: Callable[[], Any]):
        self.registry = CollectorRegistry()
        self.requests = RequestStats()
        self.registry.register(ServiceCollector(snapshot, batch_sizes, self.requests))
        ProcessCollector(registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)


metrics_router = APIRouter()


@metrics_router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format. Open like /healthz: it carries the same counters, no secrets."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
