"""The engine's hot routes on their short stack answer exactly as FastAPI's full stack does.

Two apps with the same configuration, one with `FastLane` and one without, get the same
requests in the same order: good ones, every bad request of `test_api`, wrong methods, near-miss
paths, missing and wrong API keys, bodies over the size limit (declared and streamed), batch
items with errors, and a service that fails unexpectedly. Status, headers and body must match
(decisions' sampled actions aside); so must the request metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from croupier.api.app import create_app
from croupier.api.fast_lane import FastLane
from croupier.config import ServerConfig
from tests.test_api import _bad_requests

GAME = "leduc-holdem"
KEY = {"authorization": "Bearer engine-key"}
AS_JSON = {"content-type": "application/json", **KEY}
LIMIT = 64 * 1024


def _config() -> ServerConfig:
    return ServerConfig(
        game=GAME, api_keys=["engine-key"], admin_keys=["admin-key"], max_body_bytes=LIMIT
    )


async def _streamed(n: int) -> AsyncIterator[bytes]:  # no Content-Length: read as it comes
    for _ in range(n):
        yield b" " * 1024


def _requests(state: dict[str, Any]) -> Iterator[tuple[str, str, Any, dict[str, str]]]:
    """(method, path, body, headers); ids are fixed so both apps see the same games."""

    def body(value: Any) -> bytes:
        return json.dumps(value).encode()

    seats = {"0": "learned", "1": "rules"}
    decide = body({"seat": "0", "state": state})
    yield "POST", "/v1/games", body({"game": GAME, "game_id": "g1", "seats": seats}), AS_JSON
    yield "POST", "/v1/games", body({"game": GAME, "game_id": "g1", "seats": seats}), AS_JSON
    yield "POST", "/v1/games", body({"game": GAME, "game_id": "g2", "seats": seats}), AS_JSON
    yield "POST", "/v1/games/g1/decide", decide, AS_JSON
    yield "POST", "/v1/games/g1/decide", decide, {}  # no key
    yield "POST", "/v1/games/g1/decide", decide, {"authorization": "Bearer nope"}
    yield "POST", "/v1/games/g1/decide", decide, {"authorization": "Basic engine-key"}
    yield "POST", "/v1/games/g1/decide", decide, {"authorization": "Bearer admin-key"}
    yield "POST", "/v1/games/g1/decide", decide, {"content-type": "text/plain", **KEY}
    yield "POST", "/v1/games/g1/decide", body({"seat": "0", "state": {}}), AS_JSON
    yield "POST", "/v1/games/nope/decide", decide, AS_JSON
    yield "POST", "/v1/games/a%0Ab/decide", decide, AS_JSON  # an unsafe id: 422
    yield "POST", "/v1/games/g1/decide", body({"seat": "0", "state": state, "turn": 1}), AS_JSON
    # the same turn again with another state: 409, not the first answer
    yield (
        "POST",
        "/v1/games/g1/decide",
        body({"seat": "0", "state": {**state, "x": 1}, "turn": 1}),
        AS_JSON,
    )
    yield "POST", "/v1/games/g1/decide", body({"seat": "0", "pad": "x" * LIMIT}), AS_JSON
    yield "POST", "/v1/games/g1/decide", _streamed(LIMIT // 1024 + 1), KEY
    yield "POST", "/v1/games/g1/decide", _streamed(2), KEY  # under the limit, not JSON
    yield "GET", "/v1/games/g1/decide", None, KEY
    yield "PUT", "/v1/games", b"{}", AS_JSON
    yield "POST", "/v1/games/g1/decide/", decide, AS_JSON
    yield "POST", "/v1/games/g1/decide?x=1", decide, AS_JSON
    yield "POST", "/v1/games//decide", decide, AS_JSON
    yield "POST", "/v1/games/g1/g2/decide", decide, AS_JSON
    items = [
        {"game_id": "g2", "seat": "0", "state": state},
        {"game_id": "nope", "seat": "0", "state": state},
        {"game_id": "g2", "seat": 5},
    ]
    yield "POST", "/v1/decide:batch", body({"items": items}), AS_JSON
    yield "POST", "/v1/decide:batch", body({"items": "x"}), AS_JSON
    yield "POST", "/v1/games:batch", body({"games": [{"game": GAME, "game_id": "g2"}, {}]}), AS_JSON
    ends = [{"game_id": "g2", "payoffs": {"0": 1, "1": -1}}, {"game_id": "g2", "payoffs": {}}]
    yield "POST", "/v1/end:batch", body({"items": ends}), AS_JSON
    yield "POST", "/v1/games/g1/end", body({"payoffs": {"0": 1, "1": -1}}), AS_JSON
    yield "POST", "/v1/games/g1/end", body({"payoffs": {"0": 1, "1": -1}}), AS_JSON
    for method, path, raw, headers in _bad_requests("g1"):
        yield method, path, raw, {**headers, **KEY}


def _comparable(response: httpx.Response) -> tuple[int, list[tuple[str, str]], Any]:
    headers = sorted((k, v) for k, v in response.headers.items() if k != "content-length")
    try:
        content: Any = response.json()
    except ValueError:
        return response.status_code, headers, response.content
    if response.status_code == 200 and isinstance(content, dict):
        for result in [content, *content.get("results", [])]:
            if result.get("action") is not None:  # sampled: equal only by chance
                result["action"] = result["action_index"] = "sampled"
    return response.status_code, headers, content


async def play_both(play: Any) -> tuple[Any, Any]:
    """`play(app, client)` on an app with the hot path, then on one without."""
    out = {}
    async with contextlib.AsyncExitStack() as stack:
        for hot in (True, False):
            app = create_app(_config())
            app.hot_path = hot
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://croupier")
            )
            out[hot] = await play(app, client)
    return out[True], out[False]


def test_hot_routes_answer_as_the_full_stack(leduc_states):
    state = next(s for s in leduc_states if s.get("current_player") == 0)

    async def play(app: Any, client: httpx.AsyncClient) -> Any:
        answers = []
        for method, path, body, headers in _requests(state):
            response = await client.request(method, path, content=body, headers=headers)
            answers.append(((method, path[:60]), _comparable(response)))
        health = (await client.get("/healthz")).json()
        counts = {k: health[k] for k in ("games_created", "refused_too_large", "decisions")}
        return answers, app.state.metrics.requests.requests, counts

    out = asyncio.run(play_both(play))
    (hot_answers, hot_metrics, hot_counts), (full_answers, full_metrics, full_counts) = out
    assert len(hot_answers) == len(full_answers) > 100
    for hot, full in zip(hot_answers, full_answers, strict=True):
        assert hot == full
    statuses = {answer[1][0] for answer in hot_answers}
    assert {200, 201, 401, 403, 404, 405, 409, 413, 415, 422} <= statuses
    assert hot_metrics == full_metrics
    assert hot_counts == full_counts and hot_counts["refused_too_large"] >= 2


def test_hot_routes_skip_the_full_stack_and_unexpected_errors_answer_500(leduc_states):
    state = next(s for s in leduc_states if s.get("current_player") == 0)

    async def play(app: Any, client: httpx.AsyncClient) -> Any:
        await client.get("/healthz")  # builds the middleware stack
        stack = app.middleware_stack
        full_calls: list[str] = []
        if isinstance(stack, FastLane):
            full = stack.full_stack

            async def counted(scope: Any, receive: Any, send: Any) -> None:
                full_calls.append(scope["path"])
                await full(scope, receive, send)

            stack.full_stack = counted
        game = {"game": GAME, "game_id": "g", "seats": {"0": "learned", "1": "rules"}}
        await client.post("/v1/games", json=game, headers=KEY)
        decide = {"seat": "0", "state": state}
        ok = await client.post("/v1/games/g/decide", json=decide, headers=KEY)
        await client.get("/healthz")

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug, not the client's fault")

        app.state.service.decide = broken
        failed = await client.post("/v1/games/g/decide", json=decide, headers=KEY)
        health = await client.get("/healthz")
        return full_calls, ok.status_code, _comparable(failed), health.status_code

    hot, full = asyncio.run(play_both(play))
    assert hot[0] == ["/healthz", "/healthz"]  # create and decide never reached the full stack
    assert hot[1:] == full[1:]
    assert hot[2][0] == 500 and hot[2][2] == b"Internal Server Error"
    assert hot[3] == 200


def test_opentelemetry_keeps_the_full_stack():
    assert create_app(ServerConfig(game=GAME)).hot_path is True
    assert create_app(ServerConfig(game=GAME, opentelemetry=True)).hot_path is False
