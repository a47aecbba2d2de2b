"""`/dashboard`, its sampled history and the arena results behind its learning curve.

The dashboard builds on the API (its keys, its request stats); the API does not import it: the
app's builder (api/app.py, the composition root) calls `install_dashboard`."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from croupier.api.metrics import RequestStats
from croupier.dashboard.arena import ArenaResults
from croupier.dashboard.history import History
from croupier.dashboard.routes import arena_router, dashboard_router


def install_dashboard(app: FastAPI, arena_results: Path | None, requests: RequestStats) -> None:
    """The dashboard's routes, its history sampler (started by the app's lifespan) and the
    arena results store, on `app` (whose `state.snapshot` the history samples)."""
    app.state.history = History(app.state.snapshot, requests)
    app.state.arena = ArenaResults(arena_results)
    app.include_router(dashboard_router)
    app.include_router(arena_router)
