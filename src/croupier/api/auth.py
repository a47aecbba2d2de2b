"""API keys: engine routes take a bearer key, admin routes an admin key, the dashboard's
data a read key.

No keys configured means an open server (development, tests). With keys configured:
no `Authorization: Bearer …` header → 401, a key that is not valid for the route → 403.
An admin key is also valid on engine routes, and either on read routes; a read key opens
the read routes only (`/dashboard/data.json`, `GET /v1/arena/results`). Keys are compared in
constant time. See docs/security.md for what each key opens.

A game belongs to the key that created it: the key a request passed with is kept in its ASGI
scope (`caller`), as a label that is not the key (`key-3`) and whether it is an admin key, for
the routes on a game to refuse another engine key (403, `routes.py`).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from typing import NamedTuple

from fastapi import HTTPException, Request

# The ASGI scope's key for the request's `Caller` (absent on an open server).
CALLER = "croupier.caller"


class Caller(NamedTuple):
    """Who made a request: its key's label (`key-<i>`, never the key) and whether an admin key."""

    label: str
    admin: bool


class ApiKeys:
    def __init__(
        self,
        engine_keys: Iterable[str] = (),
        admin_keys: Iterable[str] = (),
        read_keys: Iterable[str] = (),
    ):
        self.admin = tuple(k.encode() for k in admin_keys if k)
        self.engine = tuple(k.encode() for k in engine_keys if k) + self.admin
        self.read = tuple(k.encode() for k in read_keys if k) + self.engine
        # `read` is read keys, then engine keys, then admin keys: each kind's valid keys are a
        # tail of it, and the index of the key that matched says who called.
        first_admin = len(self.read) - len(self.admin)
        self.callers = tuple(Caller(f"key-{i}", i >= first_admin) for i in range(len(self.read)))

    @property
    def open(self) -> bool:
        return not self.read

    def check(self, authorization: str | None, *, admin: bool, read: bool = False) -> Caller | None:
        """Who calls (None on an open server); 401/403 unless `authorization` carries a key
        valid for this kind of route (`admin`, or `read`: a read-only route; neither: an
        engine route)."""
        if self.open:
            return None
        token = _bearer(authorization)
        if token is None:
            raise HTTPException(
                401, "missing bearer API key", headers={"WWW-Authenticate": "Bearer"}
            )
        # Admin routes stay closed when keys exist but no admin key was configured.
        valid = len(self.admin if admin else self.read if read else self.engine)
        at = _match(token, self.read)
        if at < len(self.read) - valid:  # no key (-1), or one of a kind this route refuses
            raise HTTPException(403, "this key may not use this route")
        return self.callers[at]


def _bearer(authorization: str | None) -> bytes | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip().encode("utf-8", "replace")


def _match(token: bytes, keys: tuple[bytes, ...]) -> int:
    """The index of the last key equal to `token` (a key listed twice is its most powerful
    kind's), -1 for none. Compared with every key (no early exit): timing says nothing about
    which key is close."""
    found = -1
    for i, key in enumerate(keys):
        if hmac.compare_digest(token, key):
            found = i
    return found


def parse_keys(text: str | None) -> list[str]:
    """`a,b,c` (CLI flag or environment variable) → keys; blanks ignored."""
    return [k.strip() for k in (text or "").split(",") if k.strip()]


async def require_engine_key(request: Request) -> None:
    """FastAPI dependency for engine routes (games, decisions, policies). `async` so FastAPI
    calls it on the event loop: a plain `def` would hop to a worker thread per request."""
    _require(request, admin=False)


async def require_admin_key(request: Request) -> None:
    """FastAPI dependency for admin routes (promote, rollback, config)."""
    _require(request, admin=True)


async def require_read_key(request: Request) -> None:
    """FastAPI dependency for read-only routes (dashboard data, arena results)."""
    _require(request, admin=False, read=True)


def _require(request: Request, *, admin: bool, read: bool = False) -> None:
    keys: ApiKeys = request.app.state.api_keys
    if not keys.open:  # an open server need not parse the headers (every decide asks)
        request.scope[CALLER] = keys.check(
            request.headers.get("authorization"), admin=admin, read=read
        )


def caller(request: Request) -> Caller | None:
    """Who made `request` (after its route's key dependency); None on an open server."""
    return request.scope.get(CALLER)
