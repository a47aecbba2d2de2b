"""API keys: engine routes take a bearer key, admin routes an admin key, the dashboard's
data a read key.

No keys configured means an open server (development, tests). With keys configured:
no `Authorization: Bearer …` header → 401, a key that is not valid for the route → 403.
An admin key is also valid on engine routes, and either on read routes; a read key opens
the read routes only (`/dashboard/data.json`, `GET /v1/arena/results`). Keys are compared in
constant time. See docs/security.md for what each key opens.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from fastapi import HTTPException, Request


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

    @property
    def open(self) -> bool:
        return not self.read

    def check(self, authorization: str | None, *, admin: bool, read: bool = False) -> None:
        """Raise 401/403 unless `authorization` carries a key valid for this kind of route
        (`admin`, or `read`: a read-only route; neither: an engine route)."""
        if self.open:
            return
        token = _bearer(authorization)
        if token is None:
            raise HTTPException(
                401, "missing bearer API key", headers={"WWW-Authenticate": "Bearer"}
            )
        # Admin routes stay closed when keys exist but no admin key was configured.
        valid = self.admin if admin else self.read if read else self.engine
        if not _any_equal(token, valid):
            raise HTTPException(403, "this key may not use this route")

    def owner(self, authorization: str | None) -> str | None:
        """Which configured key made a request, as a label that is not the key (`key-3`),
        for per-key quotas; None on an open server. Call after `check` passed."""
        token = _bearer(authorization)
        if self.open or token is None:
            return None
        for i, key in enumerate(self.read):
            if hmac.compare_digest(token, key):
                return f"key-{i}"
        return None


def _bearer(authorization: str | None) -> bytes | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip().encode("utf-8", "replace")


def _any_equal(token: bytes, keys: tuple[bytes, ...]) -> bool:
    # Compare with every key (no early exit): timing says nothing about which key is close.
    found = False
    for key in keys:
        found |= hmac.compare_digest(token, key)
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
        keys.check(request.headers.get("authorization"), admin=admin, read=read)
