"""Prometheus metrics and `/healthz` for `croupier train --metrics-port`, read at request time.

Everything comes from what the training loop already computes each iteration (its progress
line), the env runner's link counters and `Trainer.health()`, so serving them costs the loop
nothing. `/healthz` answers 200 while the trainer trains or idles, 503 while it starts
(restoring: its link is not open yet) or stops; the body says which, and more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
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


# A scrape is one small request answered in milliseconds. A connection that does not finish
# its request in time is closed (a timer, so a peer pacing its bytes cannot stretch it), and at
# most this many are served at once: past that a new connection is closed at once (a scraper
# retries). Without these, every connection held a thread of its own, for ever if it sent
# nothing.
MAX_REQUESTS_AT_ONCE = 8
REQUEST_DEADLINE_S = 10.0


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # the listen backlog (socketserver's 5 made a 7th connect wait 1 s)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.active = 0  # requests being served now
        self.refused_busy = 0  # connections closed on arrival: MAX_REQUESTS_AT_ONCE were busy

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            busy = self.active >= MAX_REQUESTS_AT_ONCE
            self.active += not busy
            self.refused_busy += busy
        if busy:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done()
            raise

    def _done(self) -> None:
        with self._lock:
            self.active -= 1

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        deadline = threading.Timer(REQUEST_DEADLINE_S, _cut, (request,))
        deadline.daemon = True
        deadline.start()
        try:
            super().process_request_thread(request, client_address)
        finally:
            deadline.cancel()
            self._done()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics request from %s failed", client_address, exc_info=True)


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_DEADLINE_S  # each read; the timer above bounds the whole request

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # a scrape every few seconds is not news


def health_app(trainer: Any, metrics: Callable[..., Any]) -> Callable[..., Any]:
    """A WSGI app: `/healthz` from `trainer.health()`, everything else the metrics."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") != "/healthz":
            return metrics(environ, start_response)
        try:
            body = trainer.health()
        except Exception as e:  # a health check must answer, even mid-build
            body = {"alive": True, "state": "unknown", "error": f"{type(e).__name__}: {e}"}
        ok = body.get("state") in HEALTHY_STATES
        payload = json.dumps(body, default=str).encode()
        start_response(
            "200 OK" if ok else "503 Service Unavailable",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    return app


def serve_trainer_metrics(trainer: Any, port: int, host: str = "127.0.0.1") -> Any:
    """Start the /metrics and /healthz HTTP server on its own thread; returns the server
    (shutdown())."""
    if not is_loopback(host):
        log.warning(
            "trainer metrics on %s:%d: /metrics and /healthz are open to whoever reaches that "
            "port (no key; they show the run's counters and state): firewall it to your "
            "Prometheus", host, port,
        )  # fmt: skip
    registry = CollectorRegistry()
    registry.register(TrainerCollector(trainer))
    app = health_app(trainer, make_wsgi_app(registry))
    server = make_server(host, port, app, _Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True, name="trainer-metrics").start()
    return server
