"""`GET /dashboard` (a static page, shipped in the package), the JSON it polls, and the arena
results behind its learning curve."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import TypeAdapter

from croupier.api.auth import require_admin_key, require_read_key
from croupier.api.fast_lane import json_body, read_json
from croupier.api.schemas import Problem
from croupier.dashboard.arena import ArenaResult

STATIC = Path(__file__).parent / "static"
ASSETS = {
    "dashboard.js": "text/javascript",
    "dashboard.css": "text/css",
}

# The live arena's rows the page shows (most games first; dashboard.js's LIVE_ROWS): the
# table itself holds up to 4,096 (~330 KB), the whole of it at `GET /v1/arena/live`.
LIVE_ROWS = 20

dashboard_router = APIRouter()
arena_router = APIRouter()


@dashboard_router.get("/dashboard", include_in_schema=False)
async def dashboard_page() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@dashboard_router.get(
    "/dashboard/data.json", include_in_schema=False, dependencies=[Depends(require_read_key)]
)
async def dashboard_data(request: Request) -> dict[str, Any]:
    """Everything the page draws: the sampled history, the current state, the arena curve.
    Behind a key (a read key will do): it holds the arena results and the trainer link's
    address and last error, which `/v1/arena/results` and the link keep to key holders."""
    state = request.app.state
    rollout = state.components.rollout
    live = rollout.live.table()
    return {
        "now": time.time(),
        "history": list(state.history.samples),
        "current": state.snapshot(),
        "arena": [r.model_dump() for r in state.arena.all()],
        "live_arena": {**live, "rows": live["rows"][:LIVE_ROWS], "rows_total": len(live["rows"])},
        "tiers": rollout.tiers.state(rollout.channels.production),
    }


@dashboard_router.get("/dashboard/{asset}", include_in_schema=False)
async def dashboard_asset(asset: str) -> FileResponse:
    if asset not in ASSETS:  # a fixed list: no path from the URL ever reaches the filesystem
        raise HTTPException(404, "no such dashboard file")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset])


ARENA_RESULTS = TypeAdapter(list[ArenaResult])


@arena_router.post(
    "/v1/arena/results",
    status_code=201,
    dependencies=[Depends(require_admin_key)],
    openapi_extra=json_body(ARENA_RESULTS, "ArenaResults"),
    responses={503: {"model": Problem, "description": "The results file cannot be written"}},
)
async def post_arena_results(request: Request) -> dict[str, int]:
    """Record arena results (payoff of a version against an opponent) for the learning curve."""
    results: list[ArenaResult] = await read_json(request, ARENA_RESULTS)
    try:
        request.app.state.arena.add(results)
    except OSError as e:  # the results file cannot be written: the server's problem, not a 500
        raise HTTPException(503, f"could not store arena results: {e.strerror}") from None
    return {"added": len(results)}


@arena_router.get("/v1/arena/results", dependencies=[Depends(require_read_key)])
async def get_arena_results(request: Request) -> list[ArenaResult]:
    """Every arena result the server knows, by version."""
    return request.app.state.arena.all()
