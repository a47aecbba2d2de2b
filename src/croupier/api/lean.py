"""Lean handling for the hot routes (create, decide, decide:batch, end).

Profiling `croupier bench serve` showed FastAPI's per-request machinery costing more than the
decision itself: dependency solving (`solve_dependencies`, ~30% of a request's CPU in FastAPI
0.165), stdlib-json body parsing into dicts that pydantic then walks, and re-validating the
returned model against `response_model`. A `LeanRoute` keeps everything FastAPI documents (path,
body and response models, errors, security dependencies in OpenAPI) but handles a request with:

- the API-key check (`require_engine_key`) called directly, not through dependency solving,
- a body that says it is not JSON refused with 415 (no Content-Type is taken as JSON),
- pydantic-core parsing and validating the raw JSON bytes in one pass (`parse_body`); errors
  become the usual `RequestValidationError`, so the app's 422 handler answers them,
- orjson bytes as the answer (`json_response`).

The endpoint is called as `endpoint(request, **path_params)` and must return a `Response`.
`croupier.api.hot_path` then serves these routes past FastAPI's own middleware stack.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson
from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from croupier.api.auth import require_engine_key

Model = TypeVar("Model", bound=BaseModel)

_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


class LeanRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            await require_engine_key(request)
            content_type = request.headers.get("content-type")
            if content_type is not None and not _is_json(content_type):
                raise HTTPException(415, "send the body as JSON (Content-Type: application/json)")
            return await endpoint(request, **request.path_params)

        return handle


def _is_json(content_type: str) -> bool:
    # application/json, application/json; charset=utf-8, application/problem+json ...
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def parse_body(model: type[Model], raw: bytes) -> Model:
    """Parse and validate a JSON request body; a 422 (located under `body`) if it is not one."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_input=False)]
        ) from None


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(
        orjson.dumps(content, option=_ORJSON_OPTIONS),
        status_code=status_code,
        media_type="application/json",
    )


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` documenting `model` as the JSON request body of a route that reads the
    raw body itself (FastAPI only documents bodies it parses)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }
