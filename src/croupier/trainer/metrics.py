"""Prometheus metrics and `/healthz` for `croupier train --metrics-port`, read at request time.

Everything comes from what the training loop already computes each iteration (its progress
line), the env runner's link counters and `Trainer.health()`, so serving them costs the loop
nothing. `/healthz` answers 200 while the trainer trains or idles, 503 while it starts
(restoring: its link is not open yet) or stops; the body says which, and more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from croupier.link.auth import is_loopback

# The link counters (`link.server.LINK_COUNTERS`, what `LinkEnvRunner.link_stats()` reports)
# are exported as `croupier_trainer_<name>_total`.
from croupier.link.server import LINK_COUNTERS

log = logging.getLogger(__name__)

PREFIX = "croupier_trainer"
# The states in which `/healthz` answers 200 (and `croupier_trainer_healthy` is 1).
HEALTHY_STATES = ("training", "idle")
# Version-lag histogram buckets (versions behind the learner when an episode arrived).
LAG_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128)


def learner_trained_lifetime(result: dict[str, Any]) -> float | None:
    """Env steps the learner(s) trained on so far, from an RLlib (new API stack) result. Each
    pass over the data counts: PPO's epochs multiply it."""
    learners = result.get("learners", {}).get("__all_modules__", {})
    value = learners.get("num_env_steps_trained_lifetime")
    return float(value) if isinstance(value, int | float) else None


# What the progress line carries of the learner's own report on its last update (RLlib's
# PPO and APPO, logged per module; APPO logs no explained variance): its name there -> ours.
LEARNER_STATS = {
    "entropy": "policy_entropy",
    "policy_loss": "policy_loss",
    "vf_loss": "value_loss",
    "vf_explained_var": "value_explained_variance",
}


def learner_stats(result: dict[str, Any]) -> dict[str, float | None]:
    """Over the last update, as the learner logged them (None where it logged none): the
    policy's mean entropy and the policy and value losses (its last minibatch), and the share
    of the value targets' variance the critic explained. An entropy falling toward 0 while
    the payoff stays flat says the policy stopped exploring; an explained variance near 0 or
    below, that the advantages are about as noisy as the returns themselves."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    logged = result.get("learners", {}).get(DEFAULT_MODULE_ID, {})
    out: dict[str, float | None] = {}
    for theirs, ours in LEARNER_STATS.items():
        value = logged.get(theirs)
        ok = isinstance(value, int | float) and math.isfinite(value)
        out[ours] = float(value) if ok else None
    return out


def lag_histogram_family(histogram: dict[int, int]) -> HistogramMetricFamily:
    buckets = []
    for edge in LAG_BUCKETS:
        buckets.append(
            (str(float(edge)), float(sum(n for lag, n in histogram.items() if lag <= edge)))
        )
    buckets.append(("+Inf", float(sum(histogram.values()))))
    return HistogramMetricFamily(
        f"{PREFIX}_version_lag",
        "Versions behind the learner of each ingested episode (its oldest step)",
        buckets=buckets,
        sum_value=float(sum(lag * n for lag, n in histogram.items())),
    )


class TrainerCollector(Collector):
    def __init__(self, trainer: Any):
        self.trainer = trainer

    def collect(self) -> Iterable[Any]:
        progress: dict[str, Any] = dict(self.trainer.last_progress or {})
        stats = self._live_stats() or progress
        yield CounterMetricFamily(
            f"{PREFIX}_iterations", "Training iterations done", value=progress.get("iteration", 0)
        )
        # /healthz's verdict as a number, so that Prometheus alone (no HTTP probe) can alert
        # on a trainer that is up but not training (starting for too long, stopping).
        yield GaugeMetricFamily(
            f"{PREFIX}_healthy",
            "1 while /healthz answers 200 (training or idle), else 0",
            value=float(getattr(self.trainer, "state", None) in HEALTHY_STATES),
        )
        gauges = {
            "weights_version": ("Newest weights version", stats.get("weights_seq_no", 0)),
            "connected_servers": ("Policy servers connected", stats.get("connected_servers", 0)),
            "env_steps_per_second": ("Env steps ingested/s", progress.get("env_steps_per_s")),
            "learner_steps_per_second": (
                "Env steps trained/s",
                progress.get("learner_steps_per_s"),
            ),
            "episode_return_mean": ("RLlib's episode return", progress.get("episode_return_mean")),
            "payoff_per_hand": (
                "Learned seats' payoff per hand, hands they never acted in included",
                progress.get("payoff_per_hand"),
            ),
            "waiting_env_steps": ("Env steps queued for the learner", stats.get("waiting_steps")),
            # What an iteration waits for: with this many waiting and no iteration, the
            # learner is stuck (an alert compares the two).
            "train_batch_steps": (
                "Env steps an iteration waits for (--train-batch-size)",
                self._train_batch_steps(),
            ),
            "unacked_episodes": (
                "Episodes taken, not yet trained or dropped (not acknowledged: still spooled)",
                stats.get("unacked_episodes"),
            ),
            "seconds_since_episode": ("Seconds since an episode arrived", stats.get("idle_s")),
            "trained_share": (
                "Share of the episodes taken that were trained (not dropped)",
                progress.get("trained_share"),
            ),
            "policy_entropy": (
                "The policy's mean entropy over the last update's last minibatch",
                progress.get("policy_entropy"),
            ),
        }
        for name, (doc, value) in gauges.items():
            if isinstance(value, int | float):
                yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=float(value))
        trained = progress.get("env_steps_trained")
        if isinstance(trained, int | float):
            yield CounterMetricFamily(
                f"{PREFIX}_learner_env_steps_trained", "Env steps trained on", value=trained
            )
        for name in LINK_COUNTERS:
            if isinstance(stats.get(name), int | float):
                base = name.removesuffix("_total")
                yield CounterMetricFamily(f"{PREFIX}_{base}", f"link: {name}", value=stats[name])
        histogram = stats.get("lag_histogram") or self.trainer.last_lag_histogram or {}
        yield lag_histogram_family({int(k): int(v) for k, v in histogram.items()})

    def _train_batch_steps(self) -> int | None:
        hyper = getattr(getattr(self.trainer, "options", None), "hyper", None)
        return getattr(hyper, "train_batch_size", None)

    def _live_stats(self) -> dict[str, Any] | None:
        """The local runner's counters as of now (cheap, in-process); None with remote
        runners, whose numbers come from the last iteration instead of a remote call."""
        try:
            runner = self.trainer._runner() if self.trainer.algo is not None else None
        except Exception:
            return None
        return runner.link_stats() if runner is not None else None


# A scrape is one small request answered in milliseconds. The server is one asyncio loop on a
# thread of its own: a connection costs a coroutine, not a thread, and a request is answered the
# moment its head has arrived, so peers that connect and then send slowly or nothing cannot
# keep a scrape waiting. The review's 8 slow connections turned every scrape away when each
# took one of 8 threads; now up to `MAX_CONNECTIONS` wait at once, the longest waiting is
# closed to make room for a new one (a scraper's request arrives with its connection), and
# each is cut at `REQUEST_DEADLINE_S` (a timer for the whole request: a peer pacing its bytes
# cannot stretch it) or past `MAX_HEAD_BYTES`.
MAX_CONNECTIONS = 64
REQUEST_DEADLINE_S = 10.0
MAX_HEAD_BYTES = 8192
Answer = tuple[str, str, bytes]  # status line, content type, body


class MetricsServer:
    """`/metrics` and `/healthz` over HTTP/1.0-style GETs (one request a connection)."""

    def __init__(self, app: Callable[[str], Answer], host: str, port: int):
        self._answer = app  # path -> (status line, content type, body)
        self._sock = socket.create_server((host, port), backlog=128)
        self._loop = asyncio.new_event_loop()
        self._waiting: dict[asyncio.Task[None], float] = {}  # connections before their answer
        self.served = 0
        self.cut = 0  # closed: past the deadline, a too-big head, or to make room
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="trainer-metrics")
        self._thread.start()
        self._started.wait(10)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, sock=self._sock, limit=MAX_HEAD_BYTES)
        )
        self._server = server
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in list(self._waiting):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._waiting) >= MAX_CONNECTIONS:  # room for this one: the longest waiting goes
            oldest = min(self._waiting, key=self._waiting.__getitem__)
            self._waiting.pop(oldest)
            oldest.cancel()
        self._waiting[task] = time.monotonic()
        try:
            async with asyncio.timeout(REQUEST_DEADLINE_S):
                head = await reader.readuntil(b"\r\n\r\n")
                status, content_type, body = self._respond(head)
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                self.served += 1
        except (TimeoutError, asyncio.CancelledError, asyncio.LimitOverrunError,
                asyncio.IncompleteReadError, ConnectionError):  # fmt: skip
            self.cut += 1
        finally:
            self._waiting.pop(task, None)
            writer.transport.abort()  # no lingering close handshake with a peer gone quiet

    def _respond(self, head: bytes) -> Answer:
        method, _, rest = head.partition(b" ")
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        path = rest.partition(b" ")[0].partition(b"?")[0].decode("latin-1")
        try:
            return self._answer(path)
        except Exception:  # a bug in a collector answers 500, never ends the server
            log.exception("trainer metrics request %r failed", path)
            return "500 Internal Server Error", "text/plain", b"failed\n"

    def shutdown(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def server_close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


def health_app(trainer: Any, registry: CollectorRegistry) -> Callable[[str], Answer]:
    """Answers by path: `/healthz` from `trainer.health()`, everything else the metrics."""

    def app(path: str) -> Answer:
        if path != "/healthz":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(registry)
        try:
            body = trainer.health()
        except Exception as e:  # a health check must answer, even mid-build
            body = {"alive": True, "state": "unknown", "error": f"{type(e).__name__}: {e}"}
        ok = body.get("state") in HEALTHY_STATES
        payload = json.dumps(body, default=str).encode()
        return ("200 OK" if ok else "503 Service Unavailable"), "application/json", payload

    return app


def serve_trainer_metrics(trainer: Any, port: int, host: str = "127.0.0.1") -> Any:
    """Start the /metrics and /healthz HTTP server on its own thread; returns the server
    (`shutdown()`, then `server_close()`)."""
    if not is_loopback(host):
        log.warning(
            "trainer metrics on %s:%d: /metrics and /healthz are open to whoever reaches that "
            "port (no key; they show the run's counters and state): firewall it to your "
            "Prometheus", host, port,
        )  # fmt: skip
    registry = CollectorRegistry()
    registry.register(TrainerCollector(trainer))
    return MetricsServer(health_app(trainer, registry), host, port)
