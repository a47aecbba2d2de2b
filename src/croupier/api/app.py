"""The FastAPI application: wires adapter → policies → batcher → service → routes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from croupier.api.routes import router
from croupier.config import ServerConfig
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions
from croupier.sessions.batcher import InferenceBatcher
from croupier.sessions.games import GameEnded, GameExists, GameNotFound
from croupier.sessions.service import DecisionService, Unprocessable
from croupier.trajectories.outbox import EpisodeOutbox

log = logging.getLogger(__name__)


def build_service(config: ServerConfig) -> DecisionService:
    adapter = load_adapter(
        config.game,
        obs_size=config.obs_size,
        num_actions=config.num_actions,
        num_players=config.num_players,
    )
    versions = PolicyVersions(
        adapter, keep=config.keep_versions, weights_dir=config.weights_dir, seed=config.seed
    )
    batcher = InferenceBatcher(versions, config.max_batch, config.max_wait_ms)
    outbox = EpisodeOutbox(config.outbox_max_episodes)
    return DecisionService(config, adapter, versions, batcher, outbox)


def create_app(config: ServerConfig) -> FastAPI:
    # A small model gains nothing from intra-op threads; they only fight the event loop.
    torch.set_num_threads(1)
    service = build_service(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.batcher.start()
        link = None
        if config.trainer:
            from croupier.link.client import TrainerLink

            link = TrainerLink(config, service.versions, service.outbox)
            link.start()
        app.state.link = link
        try:
            yield
        finally:
            if link is not None:
                link.stop()
            await service.batcher.stop()

    app = FastAPI(
        title="croupier",
        version="1",
        summary="Decisions for turn-based card games from rules, random or a learned policy.",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.link = None
    app.include_router(router)

    def problem(status: int):
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": _detail(exc)}, status_code=status)

        return handler

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's default handler echoes the offending input back; a NaN or undecodable bytes
        # there would make the error handler itself fail (a 500). Say where and what, not echo.
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        detail = [
            {
                "loc": [str(p) for p in e.get("loc", ())],
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
            for e in errors
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(GameNotFound, problem(404))
    app.add_exception_handler(GameEnded, problem(409))
    app.add_exception_handler(GameExists, problem(409))
    app.add_exception_handler(Unprocessable, problem(422))
    return app


def _detail(exc: Exception) -> str:
    if isinstance(exc, GameNotFound):
        return f"unknown game {exc.args[0]!r}"
    if isinstance(exc, GameEnded):
        return f"game {exc.args[0]!r} has already ended"
    if isinstance(exc, GameExists):
        return f"game {exc.args[0]!r} already exists"
    return str(exc)
