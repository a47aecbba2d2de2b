"""Prometheus metrics for the policy server: `GET /metrics`.

The decide path pays for one thing only: an ASGI middleware counting each request into a
latency bucket and a status count (plain ints: ~1.5 µs a request, where prometheus-client's own
Histogram and Counter, which lock, cost ~4 µs). Everything else is read at scrape time
from the counters the service already keeps (`DecisionService.health()`, the trainer link's
`stats()`). Which of those numbers are exported, and under which public name, is the explicit
table `EXPORTED` below: a metric name is a promise to dashboards and alerts, so renaming an
internal stats key must not rename it (tests/test_metrics.py fails when a snapshot number is
neither exported nor listed in `NOT_EXPORTED`, and when the exported names change).

Why ~430 lines in one module: the exported table and the text it writes are one contract with
the dashboards and the alert rules; split, a name could be exported in one file and documented
in another."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

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
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

PREFIX = "croupier"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exported:
    """One exported metric: its public name and where its number lives in the snapshot."""

    name: str  # after `croupier_`; a counter gets `_total` from prometheus-client
    path: tuple[str, ...]  # keys into server_snapshot() (a summary's: its count)
    kind: Literal["counter", "gauge", "summary"] = "gauge"
    label: str | None = None  # a dict of numbers by this label, as one metric
    sum_path: tuple[str, ...] | None = None  # a summary's sum (in the name's base unit)


def _c(name: str, *path: str, label: str | None = None) -> Exported:
    return Exported(name, path or (name,), "counter", label)


def _g(name: str, *path: str) -> Exported:
    return Exported(name, path or (name,), "gauge")


def _s(name: str, count: tuple[str, ...], total: tuple[str, ...]) -> Exported:
    """A summary without quantiles: `_count` and `_sum` (rate(sum)/rate(count): the mean)."""
    return Exported(name, count, "summary", sum_path=total)


# The public names. An entry whose number is absent (no trainer link, no production version
# yet) is simply not exported that scrape.
EXPORTED: tuple[Exported, ...] = (
    _g("version"),
    _g("games_in_flight"),
    _c("games_created"),
    _c("decisions", label="policy"),
    _c("batcher_decisions", "batcher", "decisions"),
    _c("batcher_forward_passes", "batcher", "forward_passes"),
    _c("batcher_invalid", "batcher", "invalid"),
    _g("batcher_late", "batcher", "late"),
    _g("batcher_max_batch_seen", "batcher", "max_batch_seen"),
    _g("batcher_queued", "batcher", "queued"),
    _g("episodes_pending", "episodes", "pending"),
    _g("episodes_pending_steps", "episodes", "pending_steps"),
    _g("episodes_in_flight", "episodes", "in_flight"),
    _g("episodes_spooled", "episodes", "spooled"),
    _g("episodes_spooled_bytes", "episodes", "spooled_bytes"),
    _g("episodes_spool_max", "episodes", "max_episodes"),
    _g("episodes_spool_max_bytes", "episodes", "max_bytes"),
    _c("episodes_recorded", "episodes", "recorded"),
    _g("episodes_recovered", "episodes", "recovered"),
    _c("episodes_shipped", "episodes", "shipped"),
    _c("episodes_acked", "episodes", "acked"),
    _c("episodes_dropped", "episodes", "dropped"),
    _c("episodes_corrupt", "episodes", "corrupt"),
    _c("episodes_too_big", "episodes", "too_big"),
    _c("episodes_refused_too_big", "episodes", "refused_too_big"),
    _s("episodes_put_seconds", ("episodes", "recorded"), ("episodes", "put_seconds")),
    _g("episodes_durable", "episodes", "durable"),
    _c("fallbacks"),
    _c("turn_replays"),
    _c("refused_overload"),
    _c("refused_quota"),
    _c("refused_too_large"),
    _c("expired_games"),
    _c("refused_payoffs"),
    _c("games_resumed"),
    _c("resumed_fragments_dropped"),
    _c("episodes_cut"),
    _c("episodes_ended_by_fallback"),
    _c("forced_moves"),
    _c("before_first_version"),
    _c("search_decisions", "search", "decisions", label="base"),
    _c("search_fallbacks", "search", "fallbacks", label="base"),
    _c("search_late", "search", "late"),
    _c("search_labels", "search", "labels"),
    _c("search_labels_missed", "search", "labels_missed"),
    _c("search_labels_kept_base", "search", "labels_kept_base"),
    _s("search_decision_seconds", ("search", "answered"), ("search", "seconds")),
    _c("search_failed", "search", "failed"),
    _c("search_workers_died", "search", "workers_died"),
    _c("search_workers_replaced", "search", "workers_replaced"),
    _g("search_workers", "search", "workers"),
    _g("search_ready", "search", "ready"),
    _c("weights_refused"),
    _g("recording_held_bytes", "recording", "held_bytes"),
    _c("recording_steps_over_episode_budget", "recording", "steps_over_episode_budget"),
    _c("recording_steps_over_total_budget", "recording", "steps_over_total_budget"),
    _g("versions_pinned"),
    _g("versions_pinned_not_held"),
    _g("trainer_link_thread_alive", "trainer_link", "thread_alive"),
    _g("trainer_link_connected", "trainer_link", "connected"),
    _g("trainer_link_authenticated", "trainer_link", "authenticated"),
    _c("trainer_link_connects", "trainer_link", "connects"),
    _c("trainer_link_versions_installed", "trainer_link", "versions_installed"),
    _c("trainer_link_versions_refused", "trainer_link", "versions_refused"),
    _c("trainer_link_errors", "trainer_link", "errors"),
    _g("trainer_link_trainer_acks", "trainer_link", "trainer_acks"),
    _g("trainer_link_max_message_bytes", "trainer_link", "max_message_bytes"),
    _g("trainer_link_last_error_timestamp_seconds", "trainer_link", "last_error_at"),
    _g("versions_loaded"),
    _g("production"),
    _g("canary_share"),
    _g("ingest_oldest_waiting_lag_versions", "ingest", "oldest_waiting_lag_versions"),
)
# Numbers in the snapshot deliberately not exported: configuration echoed in health(), or
# summaries Prometheus derives itself.
NOT_EXPORTED = {
    ("batcher", "max_batch"),
    ("batcher", "max_wait_ms"),
    ("batcher", "mean_batch"),
    ("episodes", "put_us_mean"),  # = episodes_put_seconds' sum / count
    ("recording", "max_episode_bytes"),
    ("recording", "max_total_bytes"),
    ("search", "max_ms"),  # since the start: the tests' check, not a rate Prometheus can use
}

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
    if path.endswith("/resume"):  # failover: a game taken over from a dead server
        return "resume_game"
    if path.startswith("/v1/games/"):
        return "abort_game"
    if path in ("/healthz", "/metrics", "/v1/policies"):
        return path.strip("/").replace("/", "_")
    if path.startswith("/dashboard"):
        return "dashboard"
    if path == "/v1/arena/results":
        return "arena_results"
    return "other"


def numeric_paths(
    values: dict[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """The key path of every number (or bool) in a nested snapshot dict."""
    for key, value in values.items():
        path = (*prefix, str(key))
        if isinstance(value, dict):
            yield from numeric_paths(value, path)
        elif _number(value) is not None:
            yield path


def _lookup(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(values, dict):
            return None
        values = values.get(key)
    return values


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


class Isolated(Collector):
    """One collector whose failure costs only its own metrics: its families are built whole
    before any is yielded, and an exception is logged and counted
    (`croupier_metrics_collector_errors_total{collector=…}`), never a failed scrape. A scrape
    is how an operator sees a sick server: one bad number must not blind it."""

    def __init__(self, name: str, inner: Collector, errors: dict[str, int]):
        self.name, self.inner, self.errors = name, inner, errors

    def collect(self) -> Iterable[Any]:
        try:
            families = list(self.inner.collect())
        except Exception:  # noqa: BLE001 — any bug in a collector, by design
            self.errors[self.name] = self.errors.get(self.name, 0) + 1
            log.exception("metrics collector %r failed; its metrics are left out", self.name)
            return
        yield from families


class ErrorsCollector(Collector):
    def __init__(self, errors: dict[str, int]):
        self.errors = errors

    def collect(self) -> Iterable[Any]:
        family = CounterMetricFamily(
            f"{PREFIX}_metrics_collector_errors",
            "Scrapes in which a collector failed and its metrics were left out",
            labels=["collector"],
        )
        for name, n in list(self.errors.items()):
            family.add_metric([name], n)
        yield family


class RequestsCollector(Collector):
    def __init__(self, requests: RequestStats):
        self._requests = requests

    def collect(self) -> Iterable[Any]:
        yield from self._requests.families()


class ServiceCollector(Collector):
    """Reads the server's own counters when Prometheus scrapes."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]):
        self._snapshot = snapshot

    def collect(self) -> Iterable[Any]:
        snapshot = self._snapshot()
        for m in EXPORTED:
            value = _lookup(snapshot, m.path)
            name = f"{PREFIX}_{m.name}"
            family = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
            what = f"health(): {'_'.join(m.path)}"
            if m.kind == "summary":
                assert m.sum_path is not None
                total = _number(_lookup(snapshot, m.sum_path))
                if (count := _number(value)) is not None and total is not None:
                    what = f"health(): {'_'.join(m.sum_path)} over {'_'.join(m.path)}"
                    yield SummaryMetricFamily(name, what, count_value=count, sum_value=total)
            elif m.label is not None:
                if not isinstance(value, dict):
                    continue
                metric = family(name, f"{what} by {m.label}", labels=[m.label])
                for key, v in value.items():
                    if (n := _number(v)) is not None:
                        metric.add_metric([str(key)], n)
                yield metric
            elif (number := _number(value)) is not None:
                yield family(name, what, value=number)


class BatchSizeCollector(Collector):
    """Forward-pass batch sizes, from the batcher's per-size counts, in powers of two."""

    def __init__(self, batch_sizes: Callable[[], Any]):
        self._batch_sizes = batch_sizes

    def collect(self) -> Iterable[Any]:
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
        yield HistogramMetricFamily(
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
    """One registry per app (tests build many apps in one process); every collector
    `Isolated` from the others."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]], batch_sizes: Callable[[], Any]):
        self.registry = CollectorRegistry()
        self.requests = RequestStats()
        self.collector_errors: dict[str, int] = {}
        self._errors = ErrorsCollector(self.collector_errors)
        self._errors_registered = False
        self.register("requests", RequestsCollector(self.requests))
        self.register("service", ServiceCollector(snapshot))
        self.register("batch_size", BatchSizeCollector(batch_sizes))
        self.register("process", ProcessCollector(registry=None))

    def register(self, name: str, collector: Collector) -> None:
        """Add `collector`, isolated; the errors count stays last, so a scrape counts its own
        failures."""
        if self._errors_registered:
            self.registry.unregister(self._errors)
        self.registry.register(Isolated(name, collector, self.collector_errors))
        self.registry.register(self._errors)
        self._errors_registered = True

    def render(self) -> bytes:
        return generate_latest(self.registry)


metrics_router = APIRouter()


@metrics_router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format. Open like /healthz: it carries the same counters, no secrets."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
