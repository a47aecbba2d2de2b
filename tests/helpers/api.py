"""Malformed requests every route must answer with a 4xx."""

from __future__ import annotations

import json
import random

STATE = {
    "hand": "SJ",
    "public_card": None,
    "all_chips": [2, 1],
    "my_chips": 1,
    "legal_actions": ["call", "raise", "fold"],
    "current_player": 0,
}


def bad_requests(game_id: str) -> list[tuple[str, str, bytes | None, dict]]:
    """(method, path, body, headers) that a server must answer with a 4xx, never a 5xx."""
    rng = random.Random(1234)
    nested = b"[" * 1_000_000 + b"]" * 1_000_000  # 2 MB, far past any parser's depth
    nested_obj = b'{"a":' * 200_000 + b"1" + b"}" * 200_000
    wide = json.dumps({"seat": "0", "state": {**STATE, "hand": "x" * 2_000_000}}).encode()
    many_keys = json.dumps({"seat": "0", "state": {str(i): i for i in range(100_000)}}).encode()
    as_json = {"content-type": "application/json"}
    paths = ["/v1/games", f"/v1/games/{game_id}/decide", f"/v1/games/{game_id}/end"]
    out: list[tuple[str, str, bytes | None, dict]] = []
    for path in paths:
        for body in (
            b"",
            b"null",
            b"[]",
            b"42",
            b'"text"',
            b"{",
            b"}{",
            b'{"game": }',
            b"\x00\x00\x00",
            nested,
            nested_obj,
            wide,
            json.dumps({"seat": ["0"], "state": [STATE]}).encode(),
            json.dumps({"payoffs": [1, 2]}).encode(),
            json.dumps({"game": {"nested": [1, {"x": None}]}}).encode(),
        ):
            out.append(("POST", path, body, as_json))
        for _ in range(6):  # random bytes sent as JSON
            out.append(("POST", path, rng.randbytes(rng.randrange(1, 4096)), as_json))
        for ctype in ("text/plain", "application/xml", "application/x-www-form-urlencoded"):
            out.append(("POST", path, b'{"game": "leduc-holdem"}', {"content-type": ctype}))
            out.append(("POST", path, b"a=1&b=2", {"content-type": ctype}))
        out.append(("GET", path, None, {}))
        out.append(("PUT", path, b"{}", as_json))
    out += [
        ("POST", paths[1], many_keys, as_json),
        ("GET", "/v1/games/" + "%" * 10, None, {}),
        ("GET", "/" + "a" * 4000, None, {}),
        ("DELETE", "/v1/games/" + "ü" * 50, None, {}),
        ("POST", "/v1/games/%00/decide", b"{}", as_json),
        ("POST", "/healthz", b"{}", as_json),
        ("POST", "/v1/games?game=leduc-holdem", None, {}),
    ]
    return out
