"""One mapping from the decision service's exceptions to HTTP status and message."""

from __future__ import annotations

from croupier.sessions.games import GameEnded, GameExists, GameNotFound
from croupier.sessions.guards import Overloaded, TurnConflict
from croupier.sessions.service import CLIENT_ERRORS

__all__ = ["CLIENT_ERRORS", "status_and_detail"]


def status_and_detail(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, GameNotFound):
        return 404, f"unknown game {exc.args[0]!r}"
    if isinstance(exc, GameEnded):
        return 409, f"game {exc.args[0]!r} has already ended"
    if isinstance(exc, GameExists):
        return 409, f"game {exc.args[0]!r} already exists"
    if isinstance(exc, TurnConflict):
        return 409, str(exc)
    if isinstance(exc, Overloaded):
        return 503, str(exc)
    return 422, str(exc)
