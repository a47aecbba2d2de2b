"""Prometheus metrics for `croupier train --metrics-port`: read from the trainer at scrape time.

Everything comes from what the training loop already computes each iteration (its progress
line) and the env runner's link counters, so serving metrics costs the loop nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

PREFIX = "croupier_trainer"
# Version-lag histogram buckets (versions behind the learner when an episode arrived).
LAG_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128)
# Link counters (LinkEnvRunner.link_stats()) exported as `croupier_trainer_<name>_total`.
LINK_COUNTERS = (
    "episodes_received",
    "episodes_rejected",
    "episodes_duplicate",
    "episodes_dropped_lag",
    "episodes_dropped_backlog",
    "steps_received",
    "steps_sampled",
    "steps_dropped_backlog",
    "frames_rejected",
    "connections_refused",
    "connections_over_cap",
    "connections_not_reading",
    "connections_total",
)


def learner_trained_lifetime(result: dict[str, Any]) -> float | None:
    """Env steps the learner(s) trained on so far, from an RLlib (new API stack) result. Each
    pass over the data counts: PPO's epochs multiply it."""
    learners = result.get("learners", {}).get("__all_modules__", {})
    value = learners.get("num_env_steps_trained_lifetime")
    return float(value) if isinstance(value, int | float) else None


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
        gauges = {
            "weights_version": ("Newest weights version", stats.get("weights_seq_no", 0)),
            "connected_servers": ("Policy servers connected", stats.get("connected_servers", 0)),
            "env_steps_per_second": ("Env steps ingested/s", progress.get("env_steps_per_s")),
            "learner_steps_per_second": (
                "Env steps trained/s",
                progress.get("learner_steps_per_s"),
            ),
            "episode_return_mean": ("RLlib's episode return", progress.get("episode_return_mean")),
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

    def _live_stats(self) -> dict[str, Any] | None:
        """The local runner's counters as of now (cheap, in-process); None with remote
        runners, whose numbers come from the last iteration instead of a remote call."""
        try:
            runner = self.trainer._runner() if self.trainer.algo is not None else None
        except Exception:
            return None
        return runner.link_stats() if runner is not None else None


def serve_trainer_metrics(trainer: Any, port: int, host: str = "127.0.0.1") -> Any:
    """Start the /metrics HTTP server on its own thread; returns the server (shutdown())."""
    registry = CollectorRegistry()
    registry.register(TrainerCollector(trainer))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
