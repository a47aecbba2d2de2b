"""Hostile HTTP input: property-based fuzzing of every route of the app (hypothesis).

The routes are read from the app's own OpenAPI schema, so a route added later is fuzzed too.
Each example is one request: near-valid bodies (a real template with a field replaced, dropped
or added), arbitrary JSON, or arbitrary bytes, on live or made-up game ids, with random content
types and authorization headers.
Property: no 5xx, ever; afterwards the server is healthy and still plays a normal game.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croupier.api.app import create_app
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import RLCardTable

GAME = "leduc-holdem"
EXAMPLES = 1500


class App:
    """One app (lifespan running) on a private event loop, shared by every example."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.app = create_app(ServerConfig(game=GAME, max_body_bytes=64 * 1024, seed=1))
        self._lifespan = self.app.router.lifespan_context(self.app)
        self.run(self._lifespan.__aenter__())
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://croupier"
        )
        table = RLCardTable(GAME)
        table.reset(3)
        self.state = table.state_json(table.current_player())
        self.seat = str(table.current_player())
        # Fixed for the run (hypothesis replays draws): the fuzz may end or delete them.
        self.game_ids = tuple(self.new_game() for _ in range(6))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.run(self.client.request(method, path, **kw))

    def new_game(self) -> str:
        seats = {"0": "learned", "1": "rules"}
        resp = self.request("POST", "/v1/games", json={"game": GAME, "seats": seats})
        assert resp.status_code == 201, resp.text
        return resp.json()["game_id"]

    def routes(self) -> list[tuple[str, str]]:
        """Every (method, path) of the app's own OpenAPI schema, plus the schema and docs."""
        paths = self.app.openapi()["paths"]
        out = [(m.upper(), path) for path, ops in paths.items() for m in ops]
        return sorted(out) + [("GET", "/openapi.json"), ("GET", "/docs")]

    def close(self) -> None:
        self.run(self.client.aclose())
        self.run(self._lifespan.__aexit__(None, None, None))
        self.loop.close()


@pytest.fixture(scope="module")
def fuzz_app() -> Iterator[App]:
    app = App()
    yield app
    app.close()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)
WEIRD_TEXT = st.sampled_from(
    [
        "",
        "0",
        "1",
        "-1",
        "9" * 40,
        "NaN",
        "Infinity",
        "../etc",
        "%00",
        "é",
        "\u202e",
        " ",
        "a" * 300,
    ]
) | st.text(max_size=40)


def templates(app: App, game_id: str) -> dict[str, Any]:
    """A valid body per route path (those without a body get none)."""
    decide = {"seat": app.seat, "state": app.state, "reward": 0.5, "turn": 1}
    return {
        "/v1/games": {"game": GAME, "seats": {"0": "learned", "1": "rules"}, "pin": "latest"},
        "/v1/games/{game_id}/decide": decide,
        "/v1/decide:batch": {"items": [{**decide, "game_id": game_id}, {**decide, "turn": 2}]},
        "/v1/games/{game_id}/end": {"payoffs": {"0": 1.0, "1": -1.0}},
    }


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    """The template with one nested value replaced, one key dropped or one key added."""
    if not isinstance(template, dict | list) or not template or draw(st.integers(0, 4)) == 0:
        return draw(JSON)
    if isinstance(template, list):
        i = draw(st.integers(0, len(template) - 1))
        out = list(template)
        out[i] = draw(mutated(template[i]))
        return out
    key = draw(st.sampled_from(sorted(template)))
    out = dict(template)
    action = draw(st.sampled_from(["replace", "recurse", "drop", "add"]))
    if action == "drop":
        del out[key]
    elif action == "add":
        out[draw(st.text(max_size=8))] = draw(JSON)
    elif action == "recurse":
        out[key] = draw(mutated(template[key]))
    else:
        out[key] = draw(JSON)
    return out


@st.composite
def requests(draw: st.DrawFn, app: App) -> tuple[str, str, dict[str, Any]]:
    method, path = draw(st.sampled_from(app.routes()))
    game_id = draw(st.sampled_from(app.game_ids) | WEIRD_TEXT)
    url = path
    for name in re.findall(r"{(\w+)}", path):
        value = game_id if name == "game_id" else draw(WEIRD_TEXT)
        url = url.replace("{" + name + "}", quote(value, safe="") or "x")
    kind = draw(st.sampled_from(["template", "template", "json", "bytes", "none"]))
    kw: dict[str, Any] = {}
    template = templates(app, game_id).get(path)
    if kind == "template" and template is not None:
        body = draw(mutated(template)) if draw(st.booleans()) else template
        kw["content"] = json.dumps(body).encode()
    elif kind == "json":
        kw["content"] = json.dumps(draw(JSON)).encode()
    elif kind == "bytes":
        kw["content"] = draw(st.binary(max_size=200))
    content_types = ["application/json"] * 4 + ["application/x+json", "text/plain", "", "x/y"]
    headers = {"content-type": draw(st.sampled_from(content_types))}
    if draw(st.integers(0, 9)) == 0:
        headers["authorization"] = draw(
            st.sampled_from(["Bearer ", "Bearer x", "Basic Og==", "é".encode("latin-1")])
        )
    kw["headers"] = headers
    return method, url, kw


def test_no_route_answers_5xx(fuzz_app: App):
    statuses: dict[int, int] = {}
    seen_routes: set[tuple[str, str]] = set()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        method, url, kw = data.draw(requests(fuzz_app))
        try:
            resp = fuzz_app.request(method, url, **kw)
        except httpx.InvalidURL:
            return  # httpx refuses to send it; nothing reached the server
        statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
        seen_routes.add((method, url.split("/")[2] if url.count("/") > 1 else url))
        assert resp.status_code < 500, (method, url, kw, resp.status_code, resp.text[:500])

    check()
    assert {path for _, path in fuzz_app.routes()} >= set(templates(fuzz_app, "x"))
    print("\nstatus counts:", dict(sorted(statuses.items())))
    assert sum(v for k, v in statuses.items() if 200 <= k < 300) > EXAMPLES // 20
    assert sum(v for k, v in statuses.items() if 400 <= k < 500) > EXAMPLES // 4

    health = fuzz_app.request("GET", "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    # And a normal game still plays end to end.
    gid = fuzz_app.new_game()
    decided = fuzz_app.request(
        "POST",
        f"/v1/games/{gid}/decide",
        json={"seat": fuzz_app.seat, "state": fuzz_app.state},
    )
    assert decided.status_code == 200, decided.text
    ended = fuzz_app.request("POST", f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
    assert ended.status_code == 200, ended.text
