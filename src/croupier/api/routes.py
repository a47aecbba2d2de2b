"""HTTP API v1 routes. Thin: parse, call the decision service, answer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import TypeAdapter, ValidationError

from croupier.api.auth import require_engine_key
from croupier.api.errors import CLIENT_ERRORS, status_and_detail
from croupier.api.lean import LeanRoute, json_body, json_response, parse_body
from croupier.api.schemas import (
    BatchItem,
    CreateGame,
    DecideBatchRequest,
    DecideBatchResponse,
    DecideRequest,
    DecideResponse,
    EndRequest,
    GameCreated,
    GameEndedResponse,
    Problem,
)
from croupier.sessions.service import DecisionService

# Engine routes; /healthz and the docs stay open for load balancers and people.
router = APIRouter(dependencies=[Depends(require_engine_key)])
open_router = APIRouter()

GAME_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "Unknown game"},
    409: {"model": Problem, "description": "The game has already ended"},
    422: {"model": Problem, "description": "Seat not in the game, or a bad state"},
}


def service(request: Request) -> DecisionService:
    return request.app.state.service


# The routes an engine calls for every hand (create, decide, end) are the hot path: see
# `croupier.api.lean`. Same models, same 422s, same OpenAPI docs as the other routes.
hot_router = APIRouter(route_class=LeanRoute, dependencies=[Depends(require_engine_key)])


@hot_router.post(
    "/v1/games",
    status_code=201,
    response_model=GameCreated,
    responses={409: {"model": Problem, "description": "Duplicate game_id"}},
    openapi_extra=json_body(CreateGame),
)
async def create_game(request: Request) -> Response:
    """Start a game: each seat gets a policy (and, for learned seats, a weights version)."""
    body = parse_body(CreateGame, await request.body())
    created = service(request).create_game(
        body.game, body.game_id, body.seats, body.pin, body.record
    )
    return json_response(created, status_code=201)


@hot_router.post(
    "/v1/games/{game_id}/decide",
    response_model=DecideResponse,
    responses=GAME_ERRORS,
    openapi_extra=json_body(DecideRequest),
)
async def decide(request: Request, game_id: str) -> Response:
    """The seat's next action for this state."""
    body = parse_body(DecideRequest, await request.body())
    decision = await service(request).decide(game_id, body.seat, body.state, body.reward)
    return json_response(decision.to_dict())


@hot_router.post(
    "/v1/decide:batch",
    response_model=DecideBatchResponse,
    openapi_extra=json_body(DecideBatchRequest),
)
async def decide_batch(request: Request) -> Response:
    """Many games' decisions in one request (an engine running many tables in one process
    amortises HTTP). Learned decisions among them share forward passes."""
    body = parse_body(DecideBatchRequest, await request.body())
    items = _validate_items(body.items)
    requests = [
        it if isinstance(it, Exception) else (it.game_id, it.seat, it.state, it.reward)
        for it in items
    ]
    outcomes = await service(request).decide_many(requests)
    return json_response({"results": [_batch_result(o) for o in outcomes]})


_ITEMS = TypeAdapter(list[BatchItem])
_NO_RESULT = {"action": None, "action_index": None, "policy": None, "version": None}


def _validate_items(raw: list[Any]) -> list[BatchItem | Exception]:
    """All items in one validation; only when something is off, item by item."""
    try:
        return list(_ITEMS.validate_python(raw))
    except ValidationError:
        pass
    out: list[BatchItem | Exception] = []
    for item in raw:
        try:
            out.append(BatchItem.model_validate(item))
        except ValidationError as e:
            out.append(e)
    return out


def _batch_result(outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, ValidationError):
        detail = [{"loc": list(x["loc"]), "msg": x["msg"]} for x in outcome.errors()]
        return {**_NO_RESULT, "error": {"status": 422, "detail": detail}}
    if isinstance(outcome, CLIENT_ERRORS):
        status, detail = status_and_detail(outcome)
        return {**_NO_RESULT, "error": {"status": status, "detail": detail}}
    return {**outcome.to_dict(), "error": None}


@hot_router.post(
    "/v1/games/{game_id}/end",
    response_model=GameEndedResponse,
    responses=GAME_ERRORS,
    openapi_extra=json_body(EndRequest),
)
async def end_game(request: Request, game_id: str) -> Response:
    """Close the game with every seat's payoff; learned seats' episodes go to the trainer."""
    body = parse_body(EndRequest, await request.body())
    return json_response(service(request).end_game(game_id, body.payoffs))


@router.delete("/v1/games/{game_id}", status_code=204, responses={404: GAME_ERRORS[404]})
async def abort_game(game_id: str, request: Request) -> Response:
    """Abort the game and discard whatever it recorded."""
    service(request).abort_game(game_id)
    return Response(status_code=204)


@router.get("/v1/policies")
async def policies(request: Request) -> dict[str, Any]:
    """The policies this server can seat, and the learned policy's loaded versions."""
    return service(request).policies()


@open_router.get("/healthz")
async def healthz(request: Request) -> dict[str, Any]:
    """Liveness plus the counters an operator looks at first, and the trainer link's state."""
    health = service(request).health()
    link = request.app.state.link
    health["trainer_link"] = link.stats() if link is not None else None
    return health
