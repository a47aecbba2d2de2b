"""The FastAPI application: the routes over the components `croupier.api.components` builds,
started and stopped with the app's lifespan."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import torch
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from croupier.api.auth import ApiKeys
from croupier.api.components import build_components, build_service
from croupier.api.contract import allowed_methods, install_contract, operation_id
from croupier.api.errors import (
    CLIENT_ERRORS,
    RETRY_STATUSES,
    problem,
    problem_of,
    validation_problem,
)
from croupier.api.fast_lane import FastLane, check_fast_lane
from croupier.api.hosts import TrustedHosts
from croupier.api.limits import BodySizeLimit
from croupier.api.live_arena import install_live_arena
from croupier.api.observability import install_observability
from croupier.api.rollout_routes import rollout_router
from croupier.api.routes import hot_router, open_router, router
from croupier.config import ServerConfig
from croupier.dashboard import install_dashboard
from croupier.sessions.guards import Overloaded, QuotaExceeded

log = logging.getLogger(__name__)

__all__ = ["build_service", "create_app"]


_NO_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False}


# Decisions waiting on the batcher keep their coroutines and futures alive across loop turns,
# so with hundreds in flight each young-generation collection finds most of them alive and
# promotes them, to be traversed again by the older generations. CPython's default threshold
# (700) cost ~27 us of collector time per learned decision at 1000 concurrent decides (measured
# in-process) and made (c) ~15% slower than the no-model floor over HTTP; at 100,000 a young
# collection runs only when that many tracked objects are alive, so requests' objects die before
# any collection sees them. The price: cyclic garbage waits longer (bounded by the threshold).
GC_YOUNG_THRESHOLD = 100_000


class CroupierAPI(FastAPI):
    """FastAPI with the engine's per-hand routes on a short stack (`croupier.api.fast_lane`)."""

    hot_path = True

    def build_middleware_stack(self) -> ASGIApp:
        full_stack = super().build_middleware_stack()
        if not self.hot_path:
            return full_stack
        return FastLane(
            full_stack, hot_router.routes, self.user_middleware, self.exception_handlers
        )


def create_app(config: ServerConfig) -> FastAPI:
    # A small model gains nothing from intra-op threads; they only fight the event loop.
    torch.set_num_threads(1)
    components = build_components(config)
    service = components.service

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Importing RLlib and torch leaves ~300k long-lived objects; every full collection then
        # stalls the event loop for ~0.2 s. Freeze them out of the collector's sight.
        gc.collect()
        gc.freeze()
        gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc_threshold[1:])
        await components.start()
        app.state.link = components.link
        await app.state.history.start()
        try:
            yield
        finally:
            gc.set_threshold(*gc_threshold)
            await app.state.history.stop()
            await components.stop()

    app = CroupierAPI(
        title="croupier",
        version="1",
        summary="Decisions for turn-based card games from rules, random or a learned policy.",
        lifespan=lifespan,
        # FastAPI's native OpenTelemetry asks three environment variables and three global
        # providers on every request (~7% of a decide's CPU) even with nothing configured.
        telemetry=None if config.opentelemetry else _NO_TELEMETRY,
        generate_unique_id_function=operation_id,
    )
    # FastAPI's telemetry middlewares see every request only on the full stack.
    app.hot_path = not config.opentelemetry
    app.state.components = components
    app.state.service = service
    app.state.api_keys = ApiKeys(config.api_keys, config.admin_keys, config.read_keys)
    app.state.seats = frozenset(components.adapter.seats)  # the game's seats, as routes check
    app.state.link = None
    check_fast_lane(hot_router.routes)  # refuse, at build, what the lane would ignore
    app.include_router(hot_router)
    app.include_router(router)
    app.include_router(open_router)
    install_dashboard(app, config.arena_results, install_observability(app, service).requests)
    app.include_router(rollout_router)
    install_live_arena(app, components.rollout.live, app.state.metrics)

    # Every error answer is a `Problem` (schemas.py), the shape the OpenAPI document declares.
    retry_after_s = int(config.retry_after_s)

    def retry_headers(status: int) -> dict[str, str] | None:
        return {"Retry-After": str(retry_after_s)} if status in RETRY_STATUSES else None

    async def client_error(request: Request, exc: Exception) -> JSONResponse:
        body = problem_of(exc, retry_after_s)
        status = body["status"]
        return JSONResponse(body, status_code=status, headers=retry_headers(status))

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's default handler echoes the offending input back; a NaN or undecodable bytes
        # there would make the error handler itself fail (a 500). Say where and what, not echo.
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        return JSONResponse(validation_problem(errors), status_code=422)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        status = exc.status_code
        headers = dict(exc.headers or {})
        if status == 405:  # every method the path has, not only the first route's
            headers["Allow"] = allowed_methods(request.app, request.scope)
        if status in RETRY_STATUSES:
            headers.setdefault("Retry-After", str(retry_after_s))
        if status in (204, 304):  # no body allowed
            return Response(status_code=status, headers=headers)
        retry = retry_after_s if status in RETRY_STATUSES else None
        body = problem(status, str(exc.detail), retry_after=retry)
        return JSONResponse(body, status_code=status, headers=headers)

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    for exc_type in CLIENT_ERRORS:
        app.add_exception_handler(exc_type, client_error)
    assert Overloaded in CLIENT_ERRORS and QuotaExceeded in CLIENT_ERRORS  # + Retry-After
    install_contract(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=config.max_body_bytes, on_refuse=service.count_too_large
    )
    if config.allowed_hosts is not None:  # outermost: before any body is read
        app.add_middleware(TrustedHosts, allowed=config.allowed_hosts)
    return app
