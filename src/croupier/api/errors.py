"""One mapping from the decision service's exceptions to HTTP status and message."""

from __future__ import annotations

from croupier.api.schemas import SAFE_GAME_ID
from croupier.sessions.errors import CLIENT_ERRORS
from croupier.sessions.games import GameEnded, GameExists, GameNotFound
from croupier.sessions.guards import Overloaded, QuotaExceeded, TurnConflict

__all__ = ["CLIENT_ERRORS", "status_and_detail"]


def status_and_detail(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, GameNotFound):
        # No game has such an id (created ids are checked): say so without echoing it.
        if not SAFE_GAME_ID.fullmatch(str(exc.args[0])):
            return 422, "game_id must be letters, digits and . _ ~ : - only"
        return 404, f"unknown game {exc.args[0]!r}"
    if isinstance(exc, GameEnded):
        return 409, f"game {exc.args[0]!r} has already ended"
    if isinstance(exc, GameExists):
        return 409, f"game {exc.args[0]!r} already exists"
    if isinstance(exc, TurnConflict):
        return 409, str(exc)
    if isinstance(exc, Overloaded):
        return 503, str(exc)
    if isinstance(exc, QuotaExceeded):
        return 429, str(exc)
    return 422, str(exc)
