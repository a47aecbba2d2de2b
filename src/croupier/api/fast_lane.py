"""The fast lane: the engine's per-hand routes (create, decide, end and their batch forms) served
past most of FastAPI, in one place: the route class, the short ASGI stack, and the check that
refuses, when the app is built, any route on the lane that declares what the lane would ignore.

Why: profiling `croupier bench serve` showed FastAPI's per-request machinery costing more than
the decision itself (docs/performance.md: the lane is ~2x): dependency solving
(`solve_dependencies`, ~30% of a request's CPU in FastAPI 0.165), stdlib-json body parsing into
dicts that pydantic then walks, re-validating the returned model against `response_model`, and
about fifteen coroutine calls of middleware (Starlette's `ServerErrorMiddleware`, FastAPI's
exception, telemetry and body-limit middlewares, `ExceptionMiddleware`,
`AsyncExitStackMiddleware`, router, included router, route, request/response wrapper).

What a `FastLaneRoute` does per request, and nothing more:
- the API-key check (`require_engine_key`) called directly, not through dependency solving;
- a body without `Content-Type: application/json` (or `+json`) refused with 415: a browser
  page on another origin can only send a JSON content type after a CORS preflight, which
  this server never grants, so it cannot drive the API with a "simple" form or text POST;
- the endpoint called as `endpoint(request, **path_params)`; it parses its own body with
  `parse_body` (pydantic-core validates the raw JSON bytes in one pass; errors become the usual
  `RequestValidationError`, so the app's 422 handler answers them) and returns a `Response`,
  usually `json_response` (orjson bytes).

`FastLane` sits in front of the app's full stack and sends requests to these routes through a
short one: the app's own middlewares (the same classes with the same arguments: body size
limit, request metrics), then the route's handler, with the app's exception handlers applied
to what it raises; an unexpected error is answered 500 and re-raised for the server to log, as
`ServerErrorMiddleware` does. Everything else (other routes, methods, a path that only nearly
matches) takes the full stack unchanged. FastAPI's body limit is unset (ours runs); telemetry
is off (an app with OpenTelemetry on keeps the full stack).

What the lane does NOT do, and so refuses to be told (`check_fast_lane`, run by `create_app`
and by `FastLane` itself): run dependencies other than the engine-key check, enforce a
`response_model` (document answers with `responses={status: {"model": ...}}`: documentation
only; `tests/test_fast_lane.py` validates every answer against them), fill query, header, cookie
or body parameters, background tasks or a `Response` parameter, use a `response_class`, or
serve a method other than POST. `tests/test_hot_path.py` plays the same requests, good and bad,
to an app with and without the lane and compares the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
from fastapi import HTTPException, Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from croupier import stages
from croupier.api.auth import require_engine_key
from croupier.api.contract import json_body

__all__ = [
    "FastLane", "FastLaneRoute", "answers", "json_body", "json_response", "parse_body", "read_json"
]  # fmt: skip

Model = TypeVar("Model", bound=BaseModel)
Handler = Callable[[Request], Coroutine[Any, Any, Response]]
ExceptionHandler = Callable[[Request, Exception], Any]

HANDLER_KEY = "croupier.handler"  # the matched route's handler, for the short stack's end
T0_KEY = "croupier.t0"  # the thread clock at the lane's entry (`stages.HTTP_IN`), when timed
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
# The only dependency the lane runs (directly, in `FastLaneRoute`'s handler).
LANE_DEPENDENCIES = (require_engine_key,)
# Answered by the lane itself on every route besides what a route declares: a missing or wrong
# key (401, 403), a body over the limit (413), not JSON (415), a body that fails its model (422).
LANE_ERROR_STATUSES = (401, 403, 413, 415, 422)


class FastLaneRefused(TypeError):
    """A route on the fast lane declares something the lane would silently ignore."""


# --- the route ---------------------------------------------------------------------------------


class FastLaneRoute(APIRoute):
    def get_route_handler(self) -> Handler:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            await require_engine_key(request)
            check_json(request)
            if stages.ON and request.scope.get(T0_KEY):
                stages.add(stages.HTTP_IN, request.scope[T0_KEY])
            return await endpoint(request, **request.path_params)

        return handle


def check_json(request: Request) -> None:
    """415 unless the request says its body is JSON (a missing Content-Type included: what a
    cross-origin page may send without asking first is form or text, never JSON)."""
    content_type = request.headers.get("content-type")
    if content_type is None or not _is_json(content_type):
        raise HTTPException(415, "send the body as JSON (Content-Type: application/json)")


def _is_json(content_type: str) -> bool:
    # application/json, application/json; charset=utf-8, application/problem+json ...
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def parse_body(model: type[Model] | TypeAdapter[Any], raw: bytes) -> Any:
    """Parse and validate a JSON request body; a 422 (located under `body`) if it is not one."""
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_json(raw)
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_input=False)]
        ) from None


async def read_json(
    request: Request, model: type[Model] | TypeAdapter[Any], optional: bool = False
) -> Any:
    """A route's JSON body read as the lane reads it (415, then 422 by the model), for routes
    off the lane: one behaviour for every body (FastAPI's own parsing answers a non-JSON body
    422 and undecodable bytes 400). `optional`: an empty body is None (and needs no
    Content-Type: there is nothing to read)."""
    raw = await request.body()
    if optional and not raw.strip():
        return None
    check_json(request)
    return parse_body(model, raw)


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(
        orjson.dumps(content, option=_ORJSON_OPTIONS),
        status_code=status_code,
        media_type="application/json",
    )


def answers(
    model: type[BaseModel],
    status: int = 200,
    errors: Mapping[int | str, dict[str, Any]] | None = None,
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a lane route: its good answer's model under its status (what FastAPI
    writes for a `response_model`, as documentation only), then the declared errors."""
    return {status: {"model": model, "description": "Successful Response"}, **(errors or {})}


def declared_model(route: APIRoute, status: int) -> type[BaseModel] | None:
    """The model a lane route documents for answers with `status` (None: none declared)."""
    spec = route.responses.get(status) or route.responses.get(str(status))
    return spec.get("model") if spec else None


# --- the check -----------------------------------------------------------------------------


def check_fast_lane(routes: Iterable[BaseRoute]) -> None:
    """Raise `FastLaneRefused` naming every route on the lane that declares what it ignores."""
    problems = [f"{getattr(r, 'path', r)}: {p}" for r in routes for p in _refusals(r)]
    if problems:
        raise FastLaneRefused("the fast lane would ignore: " + "; ".join(problems))


def _refusals(route: BaseRoute) -> list[str]:
    if not isinstance(route, FastLaneRoute):
        return [f"{type(route).__name__} is not a FastLaneRoute"]
    out = []
    if route.response_model is not None:
        out.append(
            f"response_model={route.response_model!r} is not enforced; document it with "
            "responses=answers(Model) (checked by tests/test_fast_lane.py)"
        )
    if not isinstance(route.response_class, DefaultPlaceholder):
        out.append(f"response_class={route.response_class!r} is not used")
    if route.methods != {"POST"}:
        out.append(f"methods {sorted(route.methods)}: the lane serves POST only")
    dependant = route.dependant
    calls = [d.call for d in dependant.dependencies]
    out += [f"dependency {c!r} is not run" for c in calls if c not in LANE_DEPENDENCIES]
    out += [f"{c.__name__} is run but not declared" for c in LANE_DEPENDENCIES if c not in calls]
    for kind in ("query_params", "header_params", "cookie_params", "body_params"):
        names = [p.name for p in getattr(dependant, kind)]
        if names:
            out.append(f"{kind} {names} are not filled (the endpoint gets request, path params)")
    for kind in ("background_tasks", "response", "websocket", "http_connection"):
        if getattr(dependant, f"{kind}_param_name", None):
            out.append(f"a {kind} parameter is not filled")
    if not dependant.request_param_name:
        out.append("the endpoint must take the request (it is called with it)")
    return out


# --- the short stack -------------------------------------------------------------------------


class FastLane:
    def __init__(
        self,
        full_stack: ASGIApp,
        routes: Sequence[APIRoute],
        middleware: Sequence[Middleware],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ):
        check_fast_lane(routes)
        self.full_stack = full_stack
        self.routes: list[tuple[APIRoute, Handler]] = [(r, r.get_route_handler()) for r in routes]
        # Split as Starlette does: a 500/Exception handler answers what nothing else handles.
        handlers = dict(exception_handlers)
        last_resort = [handlers.pop(key) for key in (500, Exception) if key in handlers]
        self.error_handler = last_resort[-1] if last_resort else None
        self.exception_handlers = handlers
        short: ASGIApp = self._serve
        for cls, args, kwargs in reversed(middleware):  # as Starlette builds its stack
            short = cls(short, *args, **kwargs)
        self.short_stack = short

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            t0 = stages.clock() if stages.ON else 0
            path = scope["path"]
            for route, handler in self.routes:
                # The route's regex alone first: the full match (root path, convertors,
                # method) costs several times more, so only the route the path fits pays it.
                if route.path_regex.match(path) is None:
                    continue
                match, child = route.matches(scope)
                if match is Match.FULL:
                    scope.update(child)  # path_params and route, as the router sets them
                    scope[HANDLER_KEY] = handler
                    scope[T0_KEY] = t0
                    await self.short_stack(scope, receive, send)
                    return
        await self.full_stack(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await scope[HANDLER_KEY](request)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is not None:
                response = await handler(request, exc)
            else:  # as ServerErrorMiddleware: answer 500, then let the server log it
                response = (
                    await self.error_handler(request, exc)
                    if self.error_handler is not None
                    else PlainTextResponse("Internal Server Error", status_code=500)
                )
                await response(scope, receive, send)
                raise
        t0 = stages.clock() if stages.ON else 0
        await response(scope, receive, send)
        if stages.ON and t0:
            stages.add(stages.HTTP_OUT, t0)

    def _handler_for(self, exc: Exception) -> ExceptionHandler | None:
        """The app's handler for `exc`, looked up as Starlette's `ExceptionMiddleware` does:
        an `HTTPException`'s status code first, then the exception's classes in MRO order."""
        if isinstance(exc, StarletteHTTPException) and exc.status_code in self.exception_handlers:
            return self.exception_handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in self.exception_handlers:
                return self.exception_handlers[cls]
        return None
