"""What Prometheus sees: `/metrics` and the request timing, wired onto the app (the dashboard,
which reads the same snapshot, is wired by the composition root: see dashboard/__init__.py)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from croupier.api.metrics import RequestMetrics, ServerMetrics, metrics_router
from croupier.sessions.service import DecisionService
from croupier.trajectories.recorder import episode_versions


def server_snapshot(app: FastAPI) -> dict[str, Any]:
    """health() plus the trainer link, loaded versions and ingest lag: one read of everything."""
    service: DecisionService = app.state.service
    health = service.health()
    link = app.state.link
    health["trainer_link"] = link.stats() if link is not None else None
    health["versions_loaded"] = len(service.versions.versions())
    # The production channel's version (None until a promotion): the dashboard's second line.
    rollout = getattr(service, "rollout", None)
    health["production"] = rollout.channels.production if rollout is not None else None
    # Beside production: the two numbers a fleet must agree on (alerts compare servers).
    health["canary_share"] = rollout.channels.canary_share if rollout is not None else None
    oldest = service.outbox.oldest()
    versions = episode_versions(oldest) if oldest is not None else []
    health["ingest"] = {
        # How many versions behind the newest the longest-waiting episode was played.
        "oldest_waiting_lag_versions": max(0, service.versions.latest - min(versions))
        if versions
        else 0,
    }
    return health


def install_observability(app: FastAPI, service: DecisionService) -> ServerMetrics:
    """`/metrics` and the request timing; returns the metrics (the dashboard reads them)."""
    app.state.snapshot = lambda: server_snapshot(app)
    metrics = ServerMetrics(app.state.snapshot, lambda: service.batcher.batch_size_counts)
    app.state.metrics = metrics
    app.add_middleware(RequestMetrics, stats=metrics.requests)
    app.include_router(metrics_router)
    return metrics
