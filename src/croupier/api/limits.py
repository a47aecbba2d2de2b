"""Request body size limit (413), as plain ASGI middleware so it runs before any parsing.

A declared `Content-Length` over the limit is refused without handing a byte of the body to
the app; a chunked body is read here as it arrives and refused once it passes the limit.

Either way the rest of the body is read and thrown away (never kept: memory stays flat) before
the 413 goes out with `Connection: close`. Answering first and closing with the body unread
makes the kernel reset the connection, and a client still sending (Node's `fetch` with a
4–16 MiB body: 17 failures in 20) sees the reset, not the 413; curl happened to read it. The
drain is bounded (`DRAIN_MAX_BYTES`, `DRAIN_MAX_S`): past either, the answer goes out anyway.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]


# How much of a refused body is read and dropped so the client can read the 413, and for how
# long: a client sending more, or slower, gets the answer and a closed connection as before.
DRAIN_MAX_BYTES = 256 * 1024 * 1024
DRAIN_MAX_S = 30.0


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int, on_refuse: Callable[[], None] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.on_refuse = on_refuse

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if declared > self.max_bytes:
                await self._refuse(receive, send)
                return
            await self.app(scope, receive, send)  # the server enforces the declared length
            return
        # No declared length (chunked): read it here, up to the limit, then hand it on.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                if message.get("more_body", False):
                    await self._refuse(receive, send)
                else:
                    await self._answer(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, receive: Any, send: Any) -> None:
        """Drain what is left of the body (bounded), then answer."""
        drained, deadline = 0, time.monotonic() + DRAIN_MAX_S
        while drained <= DRAIN_MAX_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                break
            if message["type"] != "http.request":  # the client went away
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await self._answer(send)

    async def _answer(self, send: Any) -> None:
        if self.on_refuse is not None:
            self.on_refuse()
        body = json.dumps(
            {
                "type": "about:blank",
                "title": "Content Too Large",
                "status": 413,
                "detail": f"request body over {self.max_bytes} bytes",
                "retry_after": None,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
