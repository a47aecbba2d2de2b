"""HTTP API v1 routes. Thin: parse, call the decision service, answer."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import TypeAdapter, ValidationError

from croupier.api.auth import require_engine_key
from croupier.api.errors import status_and_detail
from croupier.api.fast_lane import FastLaneRoute, answers, json_body, json_response, parse_body
from croupier.api.schemas import (
    BatchItem,
    CreateGame,
    CreateGamesRequest,
    CreateGamesResponse,
    DecideArgs,
    DecideBatchRequest,
    DecideBatchResponse,
    DecideRequest,
    DecideResponse,
    EndBatchItem,
    EndBatchRequest,
    EndBatchResponse,
    EndRequest,
    GameCreated,
    GameEndedResponse,
    Problem,
    well_formed_batch,
)
from croupier.sessions.service import DecisionService

Item = TypeVar("Item", BatchItem, CreateGame, EndBatchItem)

# Engine routes; /healthz and the docs stay open for load balancers and people.
router = APIRouter(dependencies=[Depends(require_engine_key)])
open_router = APIRouter()

GAME_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "Unknown game"},
    409: {"model": Problem, "description": "The game has already ended, or a turn out of order"},
    422: {"model": Problem, "description": "Seat not in the game, or a bad state"},
    503: {"model": Problem, "description": "Overloaded: retry after `Retry-After` seconds"},
}


def service(request: Request) -> DecisionService:
    return request.app.state.service


def _owner(request: Request) -> str | None:
    """The key a game is counted against, where a per-key cap is set (else not looked up)."""
    if request.app.state.components.config.max_games_per_key is None:
        return None
    return request.app.state.api_keys.owner(request.headers.get("authorization"))


# The routes an engine calls for every hand (create, decide, end) are on the fast lane: see
# `croupier.api.fast_lane`. Same models, same 422s, same OpenAPI docs as the other routes; their
# answers' models are documented in `responses` (the lane enforces no `response_model`).
hot_router = APIRouter(route_class=FastLaneRoute, dependencies=[Depends(require_engine_key)])


@hot_router.post(
    "/v1/games",
    status_code=201,
    responses=answers(
        GameCreated,
        201,
        {
            409: {"model": Problem, "description": "Duplicate game_id"},
            429: {
                "model": Problem,
                "description": "This API key has its share of games in flight "
                "(`--max-games-per-key`): retry after `Retry-After` seconds",
            },
        },
    ),
    openapi_extra=json_body(CreateGame),
)
async def create_game(request: Request) -> Response:
    """Start a game: each seat gets a policy (and, for learned seats, a weights version)."""
    body = parse_body(CreateGame, await request.body())
    created = service(request).create_game(
        body.game, body.game_id, body.seats, body.pin, body.record, _owner(request)
    )
    return json_response(created, status_code=201)


@hot_router.post(
    "/v1/games/{game_id}/decide",
    responses=answers(DecideResponse, errors=GAME_ERRORS),
    openapi_extra=json_body(DecideRequest),
)
async def decide(request: Request, game_id: str) -> Response:
    """The seat's next action for this state."""
    body = parse_body(DecideRequest, await request.body())
    decision = await service(request).decide(game_id, body.seat, body.state, body.reward, body.turn)
    return json_response(decision.to_dict())


@hot_router.post(
    "/v1/decide:batch",
    responses=answers(DecideBatchResponse),
    openapi_extra=json_body(DecideBatchRequest),
)
async def decide_batch(request: Request) -> Response:
    """Many games' decisions in one request (an engine running many tables in one process
    amortises HTTP). Learned decisions among them share forward passes."""
    raw = await request.body()
    requests: list[DecideArgs | Exception] | None = well_formed_batch(raw)  # the common case
    if requests is None:  # the envelope's errors answer 422; an item's, that item
        items = _validate_items(parse_body(DecideBatchRequest, raw).items)
        requests = [
            it if isinstance(it, Exception) else (it.game_id, it.seat, it.state, it.reward, it.turn)
            for it in items
        ]
    outcomes = await service(request).decide_many(requests)
    return json_response({"results": [_batch_result(o) for o in outcomes]})


_ITEMS = {model: TypeAdapter(list[model]) for model in (BatchItem, CreateGame, EndBatchItem)}
_NO_RESULT = {"action": None, "action_index": None, "policy": None, "version": None}


def _validate_items(raw: list[Any], model: type[Item] = BatchItem) -> list[Item | Exception]:
    """All items in one validation; only when something is off, item by item."""
    try:
        return list(_ITEMS[model].validate_python(raw))
    except ValidationError:
        pass
    out: list[Item | Exception] = []
    for item in raw:
        try:
            out.append(model.model_validate(item))
        except ValidationError as e:
            out.append(e)
    return out


def _item_error(outcome: Exception) -> dict[str, Any]:
    if isinstance(outcome, ValidationError):
        detail = [{"loc": list(x["loc"]), "msg": x["msg"]} for x in outcome.errors()]
        return {"status": 422, "detail": detail}
    status, detail = status_and_detail(outcome)
    return {"status": status, "detail": detail}


def _batch_result(outcome: Any) -> dict[str, Any]:
    return _item_result(
        outcome if isinstance(outcome, Exception) else outcome.to_dict(), _NO_RESULT
    )


@hot_router.post(
    "/v1/games:batch",
    responses=answers(CreateGamesResponse),
    openapi_extra=json_body(CreateGamesRequest),
)
async def create_games(request: Request) -> Response:
    """Start many games in one request (each item as the body of `POST /v1/games`)."""
    body = parse_body(CreateGamesRequest, await request.body())
    # A CreateGame's fields are `create_game`'s keyword arguments.
    items = [
        it if isinstance(it, Exception) else it.model_dump()
        for it in _validate_items(body.games, CreateGame)
    ]
    outcomes = service(request).create_games(items, _owner(request))
    return json_response({"results": [_item_result(o, _NO_GAME) for o in outcomes]})


@hot_router.post(
    "/v1/end:batch",
    responses=answers(EndBatchResponse),
    openapi_extra=json_body(EndBatchRequest),
)
async def end_games(request: Request) -> Response:
    """Close many games in one request; their episodes are stored together."""
    body = parse_body(EndBatchRequest, await request.body())
    items = [
        it if isinstance(it, Exception) else (it.game_id, it.payoffs)
        for it in _validate_items(body.items, EndBatchItem)
    ]
    outcomes = await service(request).end_games(items)
    return json_response({"results": [_item_result(o, _NO_END) for o in outcomes]})


_NO_GAME = {"game_id": None, "seats": None}
_NO_END = {"game_id": None, "episodes": None}


def _item_result(outcome: dict[str, Any] | Exception, empty: dict[str, None]) -> dict[str, Any]:
    """One item of a batch answer: its result (a fresh dict, extended in place) or, in the
    result's shape with every field null, its error."""
    if isinstance(outcome, Exception):
        return {**empty, "error": _item_error(outcome)}
    outcome["error"] = None
    return outcome


@hot_router.post(
    "/v1/games/{game_id}/end",
    responses=answers(GameEndedResponse, errors=GAME_ERRORS),
    openapi_extra=json_body(EndRequest),
)
async def end_game(request: Request, game_id: str) -> Response:
    """Close the game with every seat's payoff; learned seats' episodes go to the trainer."""
    body = parse_body(EndRequest, await request.body())
    return json_response(await service(request).end_game(game_id, body.payoffs))


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
    if health["trainer_link"] is not None and not _may_read(request):
        # Open to load balancers, but where the trainer is and why the link failed is for
        # key holders (as on /dashboard/data.json): the link's state stays.
        for private in ("trainer", "last_error"):
            health["trainer_link"].pop(private, None)
    return health


def _may_read(request: Request) -> bool:
    keys = request.app.state.api_keys
    try:
        keys.check(request.headers.get("authorization"), admin=False, read=True)
    except HTTPException:
        return False
    return True
