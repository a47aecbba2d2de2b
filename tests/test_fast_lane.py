"""The fast lane refuses, when the app is built, a route declaring what it would ignore; and
every answer of every lane route, good or bad, fits the model that route documents for it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, Header, Request, Response
from pydantic import BaseModel, ValidationError

from croupier.api.app import create_app
from croupier.api.auth import require_admin_key, require_engine_key
from croupier.api.fast_lane import (
    LANE_ERROR_STATUSES,
    FastLaneRefused,
    FastLaneRoute,
    answers,
    check_fast_lane,
    declared_model,
)
from croupier.api.routes import hot_router
from croupier.api.schemas import DecideAnswer, Problem
from tests.helpers.fast_lane import AS_JSON, GAME, keyed_config, paired_requests


async def _endpoint(request: Request) -> Response:
    return Response()


def _lane(**route: Any) -> APIRouter:
    """A router with one lane route: the engine key and `route`'s other arguments."""
    router = APIRouter(route_class=FastLaneRoute, dependencies=[Depends(require_engine_key)])
    endpoint = route.pop("endpoint", _endpoint)
    router.add_api_route("/x", endpoint, methods=route.pop("methods", ["POST"]), **route)
    return router


async def _with_query(request: Request, n: int) -> Response:
    return Response()


async def _with_header(request: Request, x_thing: str = Header()) -> Response:
    return Response()


async def _without_request() -> Response:
    return Response()


REFUSED = {
    "response_model": ({"response_model": DecideAnswer}, "response_model"),
    "a dependency": ({"dependencies": [Depends(require_admin_key)]}, "require_admin_key"),
    "a query parameter": ({"endpoint": _with_query}, "query_params"),
    "a header parameter": ({"endpoint": _with_header}, "header_params"),
    "no request": ({"endpoint": _without_request}, "must take the request"),
    "a GET": ({"methods": ["GET"]}, "POST only"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_the_check_refuses_what_the_lane_would_ignore(what: str) -> None:
    route, reason = REFUSED[what]
    with pytest.raises(FastLaneRefused, match=reason):
        check_fast_lane(_lane(**route).routes)


def test_the_check_passes_the_lane_as_it_is_and_wants_the_engine_key_declared() -> None:
    check_fast_lane(hot_router.routes)
    check_fast_lane(_lane(responses=answers(DecideAnswer)).routes)
    bare = APIRouter(route_class=FastLaneRoute)
    bare.add_api_route("/x", _endpoint, methods=["POST"])
    with pytest.raises(FastLaneRefused, match="require_engine_key is run but not declared"):
        check_fast_lane(bare.routes)
    plain = APIRouter(dependencies=[Depends(require_engine_key)])
    plain.add_api_route("/x", _endpoint, methods=["POST"])
    with pytest.raises(FastLaneRefused, match="not a FastLaneRoute"):
        check_fast_lane(plain.routes)


def test_the_app_is_not_built_with_a_route_the_lane_would_ignore() -> None:
    bad = _lane(response_model=DecideAnswer).routes[0]
    hot_router.routes.append(bad)
    try:
        with pytest.raises(FastLaneRefused, match="response_model"):
            create_app(keyed_config())
    finally:
        hot_router.routes.remove(bad)
    create_app(keyed_config())  # and is, once it is gone


# --- answers against the documented models ---------------------------------------------------


def _fits(body: Any, model: type[BaseModel]) -> None:
    """`body` validates as `model`, with no key the model lacks and no value it would change
    (at every depth): what enforcing `response_model` would have let through unchanged."""
    _same(body, model.model_validate(body).model_dump(mode="json"), model.__name__)


def _same(body: Any, dumped: Any, where: str) -> None:
    if isinstance(body, dict):
        assert isinstance(dumped, dict), where
        extra = set(body) - set(dumped)
        assert not extra, f"{where}: {sorted(extra)} not in the model"
        for key, value in body.items():
            _same(value, dumped[key], f"{where}.{key}")
    elif isinstance(body, list):
        assert isinstance(dumped, list) and len(body) == len(dumped), where
        for i, (a, b) in enumerate(zip(body, dumped, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert body == dumped, f"{where}: {body!r} is {dumped!r} in the model"


def test_the_fit_check_itself_fails_on_a_wrong_answer() -> None:
    good = {"action": "call", "action_index": 1, "policy": "rules", "version": None}
    _fits(good, DecideAnswer)
    for wrong in ({**good, "extra": 1}, {**good, "action_index": "1"}, {"action": "call"}):
        with pytest.raises((AssertionError, ValidationError)):
            _fits(wrong, DecideAnswer)


def _more_requests(state: dict[str, Any]) -> list[tuple[str, str, Any, dict[str, str]]]:
    def body(value: Any) -> bytes:
        return json.dumps(value).encode()

    seats = {"0": "learned", "1": "rules"}
    return [
        ("POST", "/v1/games", body({"game": GAME, "game_id": "k", "seats": seats}), AS_JSON),
        (
            "POST",
            "/v1/decide:batch",
            body({"items": [{"game_id": "k", "seat": "0", "state": state}]}),
            AS_JSON,
        ),
        ("POST", "/v1/games:batch", body({"games": [{"game": GAME, "game_id": "k2"}]}), AS_JSON),
        (
            "POST",
            "/v1/end:batch",
            body({"items": [{"game_id": "k2", "payoffs": {"0": 1, "1": -1}}]}),
            AS_JSON,
        ),
        ("POST", "/v1/games:batch", body({"games": "x"}), AS_JSON),
        ("POST", "/v1/end:batch", body({"items": 5}), AS_JSON),
        ("POST", "/v1/end:batch", b"{}", {}),  # no key
        ("POST", "/v1/games/k/end", b"[", AS_JSON),
    ]


def test_every_lane_answer_fits_its_documented_model(leduc_states) -> None:
    state = next(s for s in leduc_states if s.get("current_player") == 0)

    async def play() -> list[tuple[str, int, Any]]:
        app = create_app(keyed_config())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
                out = []
                for method, path, raw, headers in [*_more_requests(state), *paired_requests(state)]:
                    r = await client.request(method, path, content=raw, headers=headers)
                    if r.headers.get("content-type") == "application/json":
                        out.append((method + " " + path.split("?")[0], r.status_code, r.json()))
                return out

    seen: dict[str, set[str]] = {route.path: set() for route in hot_router.routes}
    for where, status, body in asyncio.run(play()):
        method, path = where.split(" ", 1)
        route = next((r for r in hot_router.routes if r.path_regex.match(path)), None)
        if route is None or method != "POST":
            continue  # not on the lane
        if status < 400:
            assert status == (route.status_code or 200), where
            model = declared_model(route, status)
        else:
            model = declared_model(route, status) or (
                Problem if status in LANE_ERROR_STATUSES else None
            )
        assert model is not None, f"{where} answered {status}, which it does not document"
        _fits(body, model)
        seen[route.path].add("good" if status < 400 else "error")
    assert all(kinds == {"good", "error"} for kinds in seen.values()), seen
