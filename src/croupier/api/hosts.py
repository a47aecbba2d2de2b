"""Answer only requests addressed to this server by a name it expects (the `Host` header).

Why: a server on loopback without keys trusts whoever can reach it, meaning this machine. A web
page from anywhere, open in a browser on this machine, can still reach it by DNS rebinding (its
own name made to resolve to 127.0.0.1): the browser then treats the server as that page's own
origin and lets it send anything, JSON included, and read the answers. What the browser cannot
change is the `Host` header, which names the page's site. So a server bound to loopback answers
only `Host: localhost`, `127.0.0.1` or `[::1]` (any port) by default, `--allowed-hosts` names
others (a reverse proxy that passes its public name), and `*` turns the check off (the default
on any other address, where keys and a proxy are the protection). Requests without a `Host`
(HTTP/1.0 clients) pass: every browser sends one.

A plain ASGI middleware, so it runs for the fast lane too (`FastLane` builds its short stack
from the app's middleware) and before any body is read. A refused request gets 400 and the one
error body, `Problem`.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, "localhost"); a
    name is not resolved. Here, not beside the warnings that use it (`api/exposure.py`):
    `config.py` asks it too, and exposure reads the config."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:  # a name other than localhost: it may resolve to anything
        return False


def host_name(value: str) -> str:
    """A `Host` header (or an allowed name) → the name alone: no port, brackets or final dot,
    lower case (`[::1]:8000` → `::1`, `LocalHost:80` → `localhost`)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def loopback_hosts(bind_host: str) -> list[str]:
    """The names a server bound to the loopback address `bind_host` answers by default."""
    return list(dict.fromkeys([*LOOPBACK_NAMES, host_name(bind_host)]))


# The raw `Host` values already judged: a server sees a handful, and parsing one each request
# made the check ~3.0 us a request, the lookup ~0.9 us (the middleware layer included; measured
# in-process on a 2-core box: ~1% of the 83-94 us of server CPU a decision costs at the floor,
# docs/performance.md). Bounded: past it, each new value is parsed.
_KNOWN_MAX = 256


class TrustedHosts:
    def __init__(self, app: Any, allowed: Iterable[str]):
        self.app = app
        self.allowed = frozenset(host_name(h) for h in allowed)
        self._known: dict[bytes, bool] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"host":
                    ok = self._known.get(value)
                    if ok is None:
                        ok = host_name(value.decode("latin-1")) in self.allowed
                        if len(self._known) < _KNOWN_MAX:
                            self._known[value] = ok
                    if not ok:
                        await self._refuse(send)
                        return
                    break
        await self.app(scope, receive, send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps(
            {
                "type": "urn:croupier:problem:untrusted-host",
                "title": "Bad Request",
                "status": 400,
                "detail": "this server does not answer requests addressed to that host "
                "(the Host header; --allowed-hosts names the hosts it answers)",
                "retry_after": None,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
