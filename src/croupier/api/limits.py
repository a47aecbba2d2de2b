"""Request body size limit (413), as plain ASGI middleware so it runs before any parsing.

A declared `Content-Length` over the limit is refused before a byte of the body is read; a
chunked body is counted as it arrives and refused once it passes the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]


class BodyTooLarge(Exception):
    pass


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
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        if self.on_refuse is not None:
            self.on_refuse()
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes"}).encode()
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
