"""The engine's per-hand routes served through a short ASGI stack.

A request to a FastAPI app passes Starlette's `ServerErrorMiddleware`, FastAPI's exception
telemetry and body-limit middlewares, the app's own middlewares, `ExceptionMiddleware`, FastAPI's
`AsyncExitStackMiddleware`, the router, the included router, the route and its request/response
wrapper: about fifteen coroutine calls, several of them wrapping `send` once more. For a decide
that skips the model, those layers were a large share of the server's CPU per request.

`HotPath` sits in front of that stack and sends the hot routes (`routes.hot_router`: create,
decide, end and their batch forms; all `LeanRoute`s) through a short one instead: the app's own
middlewares (the same classes with the same arguments: body size limit, request metrics), then
the route's handler, with the app's exception handlers applied to what it raises; an unexpected
error is answered 500 and re-raised for the server to log, as `ServerErrorMiddleware` does. What
it skips does nothing for these routes: they have no dependencies to close and no files;
FastAPI's body limit is unset (ours runs); telemetry is off (an app with OpenTelemetry on keeps
the full stack). Everything else (other routes, other methods, a path that only nearly matches)
takes the full stack unchanged. `tests/test_hot_path.py` plays the same requests, good and bad,
to an app with and without it and compares the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

HANDLER_KEY = "croupier.handler"  # the matched route's handler, for the short stack's end

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
ExceptionHandler = Callable[[Request, Exception], Any]


class HotPath:
    def __init__(
        self,
        full_stack: ASGIApp,
        routes: Sequence[APIRoute],
        middleware: Sequence[Middleware],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ):
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
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> ExceptionHandler | None:
        """The app's handler for `exc`, looked up as Starlette's `ExceptionMiddleware` does:
        an `HTTPException`'s status code first, then the exception's classes in MRO order."""
        if isinstance(exc, HTTPException) and exc.status_code in self.exception_handlers:
            return self.exception_handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in self.exception_handlers:
                return self.exception_handlers[cls]
        return None
