"""The HTTP contract as third-party tools read it: the OpenAPI document with what FastAPI does
not write by itself, derived from the routes so a route added later is documented the same way.

- `operationId`s a generated client can use (`decide`, `createGame`: the endpoint's name);
- `securitySchemes` (bearer keys) and each route's `security`, read from its key dependency
  (engine, admin or read: the key kinds of `croupier.api.auth`, as roles), with its 401/403;
- every status a route can answer: 401/403 (a key route), 413/415/422 (a JSON body: the size
  limit, the content type, the schema), 422 for a malformed `game_id` in the path, and what the
  route itself declares (404, 409, 410, 429, 503...), each with the one error body `Problem`;
  429/503 with their `Retry-After` header;
- the request bodies of routes that read their own body (`json_body`), as component schemas;
- `links` from `POST /v1/games` to the routes that take its `game_id`, so a client (or
  schemathesis's stateful phase) can chain create → decide → end / abort;
- a `servers` block.
`tests/test_contract.py` runs schemathesis (`--checks all`, stateful phase included) against a
real server to hold the document to what the server does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema
from starlette.types import Scope

from croupier.api.auth import require_admin_key, require_engine_key, require_read_key
from croupier.api.schemas import GAME_ID_MAX, GAME_ID_PATTERN, Problem
from croupier.games.base import GameAdapter
from croupier.policies.seats import SEAT_SPEC_PATTERN

SCHEME = "bearerKey"
REF = "#/components/schemas/{model}"
# The key kinds, as roles of the one bearer scheme (OpenAPI 3.1 allows roles on any scheme).
KEY_ROLES: dict[Callable[..., Any], str] = {
    require_engine_key: "engine",
    require_admin_key: "admin",
    require_read_key: "read",
}
ROLE_TEXT = {
    "engine": "an engine key (`--api-keys`) or an admin key",
    "admin": "an admin key (`--admin-keys`)",
    "read": "a read key (`--read-keys`), an engine key or an admin key",
}
BODY_ERRORS = {
    413: "The body is over the server's limit (`--max-body-kb`); the body is read (up to a "
    "bound) before this answer, so every client can read it",
    415: "The body is not JSON (`Content-Type` other than `application/json` or `+json`)",
    422: "The body does not fit the schema (`invalid-request`: one `detail` entry per field), "
    "or makes no sense for this game (`unprocessable`)",
}
STARTING = (
    "The server is starting (`starting`): its port answers before it is ready; retry after "
    "`Retry-After` seconds"
)
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (also `retry_after` in the body).",
        "schema": {"type": "integer", "minimum": 0},
    }
}
# Bodies read by the route itself (`json_body`): model (or adapter) per component name.
_BODIES: dict[str, type[BaseModel] | TypeAdapter[Any]] = {}


def operation_id(route: APIRoute) -> str:
    """`create_game` → `createGame`: a generated client's method name."""
    head, *rest = route.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def json_body(model: type[BaseModel] | TypeAdapter[Any], name: str | None = None) -> dict:
    """`openapi_extra` documenting `model` as the JSON request body of a route that reads the
    raw body itself (FastAPI only documents bodies it parses); its schema becomes a component."""
    name = name or getattr(model, "__name__", None)
    assert name, "name a TypeAdapter's body"
    _BODIES[name] = model
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF.format(model=name)}}},
        }
    }


def allowed_methods(app: FastAPI, scope: Scope) -> str:
    """The `Allow` header of a 405: every method of every route whose path matches (Starlette
    lists only the first matching route's, e.g. POST alone for `/v1/arena/results`)."""
    methods: set[str] = set()
    path = scope["path"]
    for route in iter_route_contexts(app.router.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path):
            methods |= set(route.methods or ())
    return ", ".join(sorted(methods))


def install_contract(app: FastAPI) -> None:
    """Replace `app.openapi` by the contract's document (built once, like FastAPI's)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def build_openapi(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        summary=app.summary,
        description=DESCRIPTION,
        routes=app.routes,
        separate_input_output_schemas=app.separate_input_output_schemas,
    )
    doc["servers"] = [
        {"url": "http://127.0.0.1:8000", "description": "`croupier serve`'s default address"}
    ]
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    _add_bodies(schemas)
    _this_game(schemas, app.state.components.adapter)
    schemas.update(_component(Problem, schemas))
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422, replaced
        schemas.pop(unused, None)
    components["securitySchemes"] = {
        SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": "`Authorization: Bearer <key>`. A server started without keys is "
            "open; with keys, each route says which kind of key it takes (its role: "
            + "; ".join(f"`{r}`: {t}" for r, t in ROLE_TEXT.items())
            + "). No key: 401; a key of the wrong kind: 403.",
        }
    }
    for route in iter_route_contexts(app.routes):  # FastAPI's routes, included routers' too
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():
            op = doc["paths"].get(route.path_format, {}).get(method.lower())
            if op is not None:
                _complete(op, route)
    _link_created_games(doc)
    _optional_without_defaults(doc)
    return doc


DESCRIPTION = (
    "Every error answer (and every failed batch item's `error`) is a `Problem`. A game id is "
    "letters, digits and `. _ ~ : -`, up to 128 characters, and not `.` or `..`. Unknown "
    "game: 404 (`unknown-game`); ended: 409 (`game-ended`); aborted by the server for being "
    "idle: 410 (`game-expired`). Overloaded: 503 with `Retry-After`."
)


def _add_bodies(schemas: dict[str, Any]) -> None:
    """The self-read bodies' schemas (validation mode) as components, with their nested
    models."""
    models = [(m, "validation") for m in _BODIES.values() if isinstance(m, type)]
    _, top = models_json_schema(models, ref_template=REF)  # type: ignore[arg-type]
    found: dict[str, Any] = dict(top.get("$defs", {}))
    for name, body in _BODIES.items():
        if isinstance(body, TypeAdapter):
            schema = body.json_schema(ref_template=REF)
            found.update(schema.pop("$defs", {}))
            found[name] = schema
    # A model FastAPI wrote for an answer (serialization mode, fields with defaults required)
    # differs from the request's: the request's becomes `<Name>Input`, as FastAPI names them.
    clashes = [n for n, schema in found.items() if n in schemas and schemas[n] != schema]
    text = json.dumps(found)
    for name in clashes:
        text = text.replace(f'"{REF.format(model=name)}"', f'"{REF.format(model=name + "Input")}"')
    for name, schema in json.loads(text).items():
        schemas[name + "Input" if name in clashes else name] = schema


def game_type_name(game: str) -> str:
    """A game's name as the prefix of its component names: `leduc-holdem` → `LeducHoldem`
    (`LeducHoldemState`, `LeducHoldemAction`, `LeducHoldemPayoff`)."""
    words = re.findall(r"[A-Za-z0-9]+", game)
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Game"
    return "Game" + name if name[0].isdigit() else name


def _this_game(schemas: dict[str, Any], adapter: GameAdapter) -> None:
    """What this server's game makes exact: the game's name, its seats (as `seat`, as the keys
    of `seats`, and as the payoffs `end` needs, every one of them), the seat-spec grammar, and
    the game's own types: its state (`decide`'s `state`), its action (`action` in an answer),
    a payoff (and so a reward's bound). A schema that says less would call requests valid that
    the server must refuse."""
    prefix = game_type_name(adapter.name)
    state, action, payoff = (f"{prefix}{t}" for t in ("State", "Action", "Payoff"))
    schemas[state] = adapter.state_schema() or {
        "type": "object",
        "description": f"A {adapter.name} state: the game's adapter publishes no schema "
        "(`GameAdapter.state_schema`), so any JSON object; the server says what it refuses.",
    }
    schemas[state].setdefault("title", state)
    schemas[action] = adapter.action_schema() or {
        "anyOf": [{"type": "string"}, {"type": "integer"}],
        "description": "The engine's own action value (the adapter publishes no schema).",
    }
    schemas[payoff] = {**adapter.payoff_schema(), "description": "One seat's payoff at `end`."}
    bound = adapter.reward_bound
    for name in ("DecideRequest", "BatchItem"):
        fields = schemas[name]["properties"]
        fields["state"] = {**_ref(state), "description": fields["state"]["description"]}
        fields["reward"] = {
            "anyOf": [{"type": "number", "minimum": -bound, "maximum": bound}, {"type": "null"}],
            "description": fields["reward"]["description"],
        }
    for name in ("DecideAnswer", "Decided"):
        fields = schemas[name]["properties"]
        fields["action"] = {**_ref(action), "description": fields["action"]["description"]}
        fields["action_index"] = {
            "type": "integer",
            "minimum": 0,
            "maximum": adapter.num_actions - 1,
            "description": fields["action_index"]["description"],
        }
    seats = list(adapter.seats)
    seat = {"type": "string", "enum": seats, "description": "A seat of this game."}
    create = schemas["CreateGame"]["properties"]
    create["game"] = {
        "type": "string",
        "enum": [adapter.name],
        "description": "The game this server plays (the only value it takes).",
    }
    create["seats"]["anyOf"][0].update(
        propertyNames={"enum": seats},
        additionalProperties={"type": "string", "pattern": SEAT_SPEC_PATTERN},
    )
    resume = schemas["ResumeGame"]["properties"]
    resume["game"] = create["game"]
    resume["seats"].update(propertyNames={"enum": seats}, minProperties=len(seats))
    for name in ("DecideRequest", "BatchItem"):
        schemas[name]["properties"]["seat"] = seat
    for name in ("EndRequest", "EndBatchItem"):
        payoffs = schemas[name]["properties"]["payoffs"]
        payoffs.update(
            properties={s: _ref(payoff) for s in seats},
            required=seats,
            additionalProperties=False,
        )


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _component(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    _, top = models_json_schema([(model, "serialization")], ref_template=REF)
    return {k: v for k, v in top.get("$defs", {}).items() if k not in schemas}


def _dependencies(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dep in dependant.dependencies:
        if dep.call is not None:
            yield dep.call
        yield from _dependencies(dep)


def _problem(description: str, retry: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model="Problem")}}},
    }
    if retry:
        out["headers"] = RETRY_AFTER
    return out


def _complete(op: dict[str, Any], route: Any) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    roles = sorted({KEY_ROLES[c] for c in _dependencies(route.dependant) if c in KEY_ROLES})
    if roles:
        op["security"] = [{SCHEME: [role]} for role in roles]
        needs = " or ".join(ROLE_TEXT[r] for r in roles)
        responses.setdefault("401", _problem(f"No bearer key (the route takes {needs})"))
        mine = "; or a game another engine key created" if "{game_id}" in route.path else ""
        responses.setdefault("403", _problem(f"A key that may not use this route ({needs}){mine}"))
    else:
        op["security"] = []  # open, keys or not
    if "requestBody" in op:
        for status, text in BODY_ERRORS.items():
            responses.setdefault(str(status), _problem(text))
    for param in op.get("parameters", ()):
        if param.get("in") == "path" and param.get("name") == "game_id":
            param["schema"] = {
                "type": "string",
                "minLength": 1,
                "maxLength": GAME_ID_MAX,
                "pattern": GAME_ID_PATTERN,
                "title": "Game Id",
            }
            responses.setdefault(
                "422", _problem("A malformed `game_id` (`invalid-game-id`), or a bad request")
            )
    # While the server starts, every request is answered so (`api/early.py`).
    if "503" in responses:
        responses["503"]["description"] += f"; or {STARTING.lower()}"
    else:
        responses["503"] = _problem(STARTING)
    for status, response in responses.items():
        if status.isdigit() and int(status) >= 400:
            # One error body everywhere: FastAPI's default 422 model is replaced.
            response["content"] = _problem("")["content"]
            if int(status) in (429, 503):
                response["headers"] = RETRY_AFTER


def _optional_without_defaults(doc: dict[str, Any]) -> None:
    """A request field that may be left out carries no `default` in the document, its default
    said in words: client generators (openapi-typescript's default flags) make a property with
    a `default` required, so the README's `{"game": "leduc-holdem"}` would not type-check.
    Applied to every schema a request body reaches; answers keep theirs (always sent)."""
    schemas = doc["components"]["schemas"]
    seen: set[str] = set()
    todo = [
        op["requestBody"]["content"]["application/json"]["schema"]
        for ops in doc["paths"].values()
        for op in ops.values()
        if "requestBody" in op
    ]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    todo.append(schemas[name])
            for field in (node.get("properties") or {}).values():
                if "default" in field:
                    value = field.pop("default")
                    text = field.get("description", "")
                    if "Default" not in text and value is not None:
                        field["description"] = f"{text} Default: {json.dumps(value)}.".strip()
            todo.extend(v for k, v in node.items() if k != "properties" and k != "examples")
            todo.extend((node.get("properties") or {}).values())


def _link_created_games(doc: dict[str, Any]) -> None:
    """`POST /v1/games` → the routes whose `game_id` is the created game's."""
    created = doc["paths"]["/v1/games"]["post"]["responses"]["201"]
    game_id = "$response.body#/game_id"
    links = {}
    for path, ops in doc["paths"].items():
        if "{game_id}" not in path:
            continue
        for op in ops.values():
            name = op["operationId"]
            links[name] = {
                "operationId": name,
                "parameters": {"game_id": game_id},
                "description": f"`{name}` on the game just created",
            }
    created["links"] = dict(sorted(links.items()))
