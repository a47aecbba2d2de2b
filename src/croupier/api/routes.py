"""HTTP API v1 routes. Thin: parse, call the decision service, answer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError

from croupier import stages
from croupier.api.auth import CALLER, caller, require_engine_key
from croupier.api.errors import problem_of
from croupier.api.fast_lane import (
    FastLaneRoute,
    answers,
    json_body,
    json_response,
    parse_body,
    read_json,
)
from croupier.api.health import Health, Policies
from croupier.api.schemas import (
    GAME_ID_MAX,
    GAME_ID_RULE,
    SAFE_GAME_ID,
    CreateGame,
    CreateGamesAnswer,
    CreateGamesRequest,
    DecideAnswer,
    DecideArgs,
    DecideBatchAnswer,
    DecideBatchRequest,
    DecideRequest,
    EndBatchAnswer,
    EndBatchRequest,
    EndRequest,
    GameCreated,
    GameEndedResponse,
    GameResumed,
    Problem,
    ResumeGame,
    well_formed_batch,
)
from croupier.games.base import GameAdapter
from croupier.policies.seats import well_formed_spec
from croupier.sessions.deciding import Decision
from croupier.sessions.games import NotYourGame
from croupier.sessions.service import DecisionService

# Engine routes; /healthz and the docs stay open for load balancers and people.
router = APIRouter(dependencies=[Depends(require_engine_key)])
open_router = APIRouter()

# What a route on a game answers besides its success and the statuses every route with a key,
# a body or a game id in its path answers (`croupier.api.contract`).
UNKNOWN = {404: {"model": Problem, "description": "No game has this id (`unknown-game`)"}}
EXPIRED = {
    410: {
        "model": Problem,
        "description": "The server aborted the game for being idle past "
        "`--idle-game-timeout` (`game-expired`)",
    }
}
OVERLOADED = {
    503: {
        "model": Problem,
        "description": "Overloaded (`overloaded`): retry after `Retry-After` seconds",
    }
}
GAME_ERRORS: dict[int | str, dict[str, Any]] = {
    **UNKNOWN,
    409: {
        "model": Problem,
        "description": "The game has already ended (`game-ended`), or a turn out of order "
        "(`turn-conflict`)",
    },
    **EXPIRED,
    **OVERLOADED,
}


def service(request: Request) -> DecisionService:
    return request.app.state.service


def _owner(request: Request) -> str | None:
    """The key a new game belongs to (its label; None on an open server): only it, or an admin
    key, may act on the game, and a per-key cap counts its games."""
    who = caller(request)
    return None if who is None else who.label


def _check_owner(request: Request, game_id: str) -> None:
    """403 (`not-your-game`) when another engine key created the game (docs/security.md). An
    open server has no callers: one dict lookup, nothing else, on its decide path."""
    who = caller(request)
    if who is not None and not who.admin:
        service(request).games.check_owner(game_id, who.label)


def _owned_items(request: Request, items: list[Any]) -> list[Any]:
    """A batch's items, those on another key's game replaced by their 403 (`each` answers an
    item that is an exception with itself)."""
    who = caller(request)
    if who is None or who.admin:
        return items
    games = service(request).games
    out = []
    for item in items:
        try:
            games.check_owner(item[0], who.label)
        except NotYourGame as e:
            item = e
        out.append(item)
    return out


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
            409: {"model": Problem, "description": "Duplicate game_id (`game-exists`)"},
            **OVERLOADED,
            429: {
                "model": Problem,
                "description": "This API key has its share of games in flight "
                "(`--max-games-per-key`, `quota-exceeded`): retry after `Retry-After` seconds",
            },
        },
    ),
    openapi_extra=json_body(CreateGame),
)
async def create_game(request: Request) -> Response:
    """Start a game: each seat gets a policy (and, for learned seats, a weights version)."""
    body = parse_body(CreateGame, await request.body())
    _refuse(_misfits(body, request.app.state.components.adapter))
    created = service(request).create_game(
        body.game, body.game_id, body.seats, body.pin, body.record, _owner(request)
    )
    return json_response(created, status_code=201)


@router.post(
    "/v1/games/{game_id}/resume",
    response_model=GameResumed,
    responses={
        409: {"model": Problem, "description": "The game has already ended on this server"},
        422: {"model": Problem, "description": "Seats not the game's, or an unknown policy"},
        429: {"model": Problem, "description": "This API key has its share of games in flight"},
        503: {"model": Problem, "description": "Overloaded: retry after `Retry-After` seconds"},
    },
    openapi_extra=json_body(ResumeGame),
)
async def resume_game(game_id: str, request: Request) -> dict[str, Any]:
    """Failover: take over a game whose server died, with the same id and seats (as its create
    answered them). Its learned seats record afresh from here; docs/scale-out.md. A plain
    create with an existing id stays a 409: only this route re-creates a game."""
    body = await read_json(request, ResumeGame)  # as every route: 415/422, never 400
    _check_game_id(game_id)
    adapter = request.app.state.components.adapter
    misfits = []
    if body.game != adapter.name:
        misfits.append(("game", f"this server plays {adapter.name!r}"))
    if body.seats.keys() != _seats(request):  # a resume names every seat, as create answered
        misfits.append(("seats", f"seats must be exactly {adapter.seats}"))
    _refuse(misfits)
    seats = {seat: (info.policy, info.version) for seat, info in body.seats.items()}
    return service(request).resume_game(body.game, game_id, seats, body.record, _owner(request))


def _check_game_id(game_id: str) -> None:
    # The path's id becomes a game's id here: the rule every created id follows.
    if len(game_id) > GAME_ID_MAX or not SAFE_GAME_ID.fullmatch(game_id):
        raise RequestValidationError(
            [{"loc": ("path", "game_id"), "msg": GAME_ID_RULE, "type": "value_error"}]
        )


def _refuse(misfits: list[tuple[str, str]]) -> None:
    """422 (`invalid-request`, by field) for what a request breaks of this server's document
    (`_misfits`): the same answer as for the rest of the schema."""
    if misfits:
        raise RequestValidationError(
            [{"loc": ("body", f), "msg": m, "type": "value_error"} for f, m in misfits]
        )


@hot_router.post(
    "/v1/games/{game_id}/decide",
    responses=answers(DecideAnswer, errors=GAME_ERRORS),
    openapi_extra=json_body(DecideRequest),
)
async def decide(request: Request, game_id: str) -> Response:
    """The seat's next action for this state."""
    raw = await request.body()
    t0 = stages.clock() if stages.ON else 0
    body = parse_body(DecideRequest, raw)
    if stages.ON:
        stages.add(stages.PARSE, t0)
        stages.decisions()
    if body.seat not in _seats(request):  # the document's seat enum, as decide:batch's items
        _refuse([("seat", "seat must be one of this game's seats")])
    if CALLER in request.scope:  # a server with keys: the game's owner or an admin key
        _check_owner(request, game_id)
    decision = await service(request).decide(game_id, body.seat, body.state, body.reward, body.turn)
    t0 = stages.clock() if stages.ON else 0
    answer = json_response(decision.to_dict())
    if stages.ON:
        stages.add(stages.RESPONSE, t0)
    return answer


@hot_router.post(
    "/v1/decide:batch",
    responses=answers(DecideBatchAnswer),
    openapi_extra=json_body(DecideBatchRequest),
)
async def decide_batch(request: Request) -> Response:
    """Many games' decisions in one request (an engine running many tables in one process
    amortises HTTP). Learned decisions among them share forward passes."""
    raw = await request.body()
    t0 = stages.clock() if stages.ON else 0
    requests: list[DecideArgs] | None = well_formed_batch(raw)  # the common case
    if requests is None:  # anything the schema refuses answers 422, located by item
        body = parse_body(DecideBatchRequest, raw)
        requests = [(it.game_id, it.seat, it.state, it.reward, it.turn) for it in body.items]
    if stages.ON:
        stages.add(stages.PARSE, t0)
        stages.decisions(len(requests))
    seats = _seats(request)
    _refuse_items(
        ("items", i, "seat", "seat must be one of this game's seats")
        for i, args in enumerate(requests)
        if args[1] not in seats
    )
    outcomes = await service(request).decide_many(_owned_items(request, list(requests)))
    t0 = stages.clock() if stages.ON else 0
    answer = json_response({"results": _item_results(request, "items", outcomes)})
    if stages.ON:
        stages.add(stages.RESPONSE, t0)
    return answer


def _seats(request: Request) -> frozenset[str]:
    # Built once (`create_app`): every decide asks, and building it cost ~1.6 us (busy 2 cores).
    return request.app.state.seats


def _refuse_items(errors: Iterable[tuple[str, int, str, str]]) -> None:
    """422 for the whole batch when an item breaks what this server's OpenAPI document says
    of its game (its name, its seats, the seat-spec grammar: `croupier.api.contract`): the
    document calls such a request invalid, so the server refuses it as it refuses the rest
    of the schema, located by item."""
    found = [
        {"loc": ("body", where, str(i), field), "msg": msg, "type": "value_error"}
        for where, i, field, msg in errors
    ]
    if found:
        raise RequestValidationError(found)


def _misfits(game: CreateGame, adapter: GameAdapter) -> list[tuple[str, str]]:
    """(field, message) for what a game to create breaks of this server's document."""
    out = []
    if game.game != adapter.name:
        out.append(("game", f"this server plays {adapter.name!r}"))
    seats = game.seats or {}
    if not all(seat in adapter.seats and well_formed_spec(spec) for seat, spec in seats.items()):
        out.append(("seats", f"seats are {adapter.seats}, each given a seat spec"))
    return out


def _retry_after_s(request: Request) -> int:
    return int(request.app.state.components.config.retry_after_s)


def _item_results(
    request: Request, where: str, outcomes: list[Decision | dict[str, Any] | Exception]
) -> list[dict[str, Any]]:
    """A batch answer's items: each its result (a decision, or a fresh dict extended in
    place) or its error, told apart by `outcome` (a discriminated union in the OpenAPI
    document); an error's fields are located under the item (`body.<where>.<i>`)."""
    retry = _retry_after_s(request)
    return [
        o.to_batch_item() if type(o) is Decision else _item_result(o, retry, (where, i))
        for i, o in enumerate(outcomes)
    ]


def _item_result(
    outcome: dict[str, Any] | Exception, retry_after_s: int, item: tuple[str, int]
) -> dict[str, Any]:
    if isinstance(outcome, Exception):
        error = problem_of(outcome, retry_after_s, ("body", item[0], str(item[1])))
        return {"outcome": "error", "error": error}
    outcome["outcome"] = "ok"
    outcome["error"] = None
    return outcome


@hot_router.post(
    "/v1/games:batch",
    responses=answers(CreateGamesAnswer),
    openapi_extra=json_body(CreateGamesRequest),
)
async def create_games(request: Request) -> Response:
    """Start many games in one request (each item as the body of `POST /v1/games`)."""
    body = parse_body(CreateGamesRequest, await request.body())
    adapter = request.app.state.components.adapter
    _refuse_items(
        ("games", i, field, msg)
        for i, g in enumerate(body.games)
        for field, msg in _misfits(g, adapter)
    )
    # A CreateGame's fields are `create_game`'s keyword arguments.
    outcomes = service(request).create_games([g.model_dump() for g in body.games], _owner(request))
    return json_response({"results": _item_results(request, "games", outcomes)})


@hot_router.post(
    "/v1/end:batch",
    responses=answers(EndBatchAnswer),
    openapi_extra=json_body(EndBatchRequest),
)
async def end_games(request: Request) -> Response:
    """Close many games in one request; their episodes are stored together."""
    body = parse_body(EndBatchRequest, await request.body())
    seats = _seats(request)
    _refuse_items(
        ("items", i, "payoffs", "payoffs must name every seat of this game, and only those")
        for i, it in enumerate(body.items)
        if it.payoffs.keys() != seats
    )
    items = _owned_items(request, [(it.game_id, it.payoffs) for it in body.items])
    outcomes = await service(request).end_games(items)
    return json_response({"results": _item_results(request, "items", outcomes)})


@hot_router.post(
    "/v1/games/{game_id}/end",
    responses=answers(GameEndedResponse, errors={k: v for k, v in GAME_ERRORS.items() if k != 503}),
    openapi_extra=json_body(EndRequest),
)
async def end_game(request: Request, game_id: str) -> Response:
    """Close the game with every seat's payoff; learned seats' episodes go to the trainer."""
    body = parse_body(EndRequest, await request.body())
    _check_owner(request, game_id)
    return json_response(await service(request).end_game(game_id, body.payoffs))


@router.delete(
    "/v1/games/{game_id}",
    status_code=204,
    responses={
        **UNKNOWN,
        409: {"model": Problem, "description": "The game has already ended (`game-ended`)"},
        **EXPIRED,
    },
)
async def abort_game(game_id: str, request: Request) -> Response:
    """Abort a game in flight and discard whatever it recorded (an ended game: 409, its
    episodes already stored; an expired one: 410)."""
    _check_owner(request, game_id)
    service(request).abort_game(game_id)
    return Response(status_code=204)


@router.get(
    "/v1/policies",
    response_model=None,
    responses={200: {"model": Policies, "description": "Successful Response"}},
)
async def policies(request: Request) -> dict[str, Any]:
    """The policies this server can seat, and the learned policy's loaded versions."""
    return service(request).policies()


@open_router.get(
    "/healthz",
    response_model=None,
    responses={200: {"model": Health, "description": "Ready: the counters"}},
)
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
