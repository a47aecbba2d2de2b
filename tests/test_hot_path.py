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
from typing import Any

import httpx

from croupier.api.app import create_app
from croupier.api.fast_lane import FastLane
from croupier.config import ServerConfig
from tests.helpers.fast_lane import (
    GAME,
    KEY,
    keyed_config,
    paired_requests,
)


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
            app = create_app(keyed_config())
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
        for method, path, body, headers in paired_requests(state):
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
