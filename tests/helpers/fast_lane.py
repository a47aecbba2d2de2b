"""Requests both the fast lane and the full FastAPI stack must answer alike (moved from
test_hot_path.py; test_fast_lane.py uses them too)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from croupier.config import ServerConfig
from tests.helpers.api import bad_requests

GAME = "leduc-holdem"


KEY = {"authorization": "Bearer engine-key"}


AS_JSON = {"content-type": "application/json", **KEY}


LIMIT = 64 * 1024


def keyed_config() -> ServerConfig:
    return ServerConfig(
        game=GAME, api_keys=["engine-key"], admin_keys=["admin-key"], max_body_bytes=LIMIT
    )


async def streamed(n: int) -> AsyncIterator[bytes]:  # no Content-Length: read as it comes
    for _ in range(n):
        yield b" " * 1024


def paired_requests(state: dict[str, Any]) -> Iterator[tuple[str, str, Any, dict[str, str]]]:
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
    yield "POST", "/v1/games/g1/decide", streamed(LIMIT // 1024 + 1), KEY
    yield "POST", "/v1/games/g1/decide", streamed(2), KEY  # under the limit, not JSON
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
    for method, path, raw, headers in bad_requests("g1"):
        yield method, path, raw, {**headers, **KEY}
