"""One error shape for every answer (`schemas.Problem`), and one mapping from the decision
service's exceptions to HTTP status, problem type and message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from croupier.api.schemas import GAME_ID_RULE, PROBLEM_KINDS, PROBLEM_URN, SAFE_GAME_ID
from croupier.sessions.errors import CLIENT_ERRORS, Unavailable, Unprocessable
from croupier.sessions.games import GameEnded, GameExists, GameExpired, GameNotFound, NotYourGame
from croupier.sessions.guards import Overloaded, QuotaExceeded, TurnConflict

__all__ = ["CLIENT_ERRORS", "classify", "problem", "problem_of", "validation_problem"]

RETRY_STATUSES = (429, 503)  # overloaded, or a key's quota of games is full: come back later


def problem(
    status: int,
    detail: Any,
    kind: str | None = None,
    retry_after: int | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A `Problem` body: `kind` names the problem (`urn:croupier:problem:<kind>`, one of
    `PROBLEM_KINDS`); without one the status says it all (`about:blank`). `errors`: the
    fields at fault (`field_errors`)."""
    assert kind is None or kind in PROBLEM_KINDS, kind
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    return {
        "type": PROBLEM_URN + kind if kind else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "retry_after": retry_after,
        "errors": errors,
    }


def field_error(loc: Iterable[Any], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": [str(p) for p in loc], "msg": msg, "type": kind}


def classify(exc: Exception) -> tuple[int, str, str]:
    """(status, problem kind, message) for one of the service's `CLIENT_ERRORS`."""
    if isinstance(exc, GameNotFound):
        # No game has such an id (created ids are checked): say so without echoing it.
        if not SAFE_GAME_ID.fullmatch(str(exc.args[0])):
            return 422, "invalid-game-id", GAME_ID_RULE
        return 404, "unknown-game", f"unknown game {exc.args[0]!r}"
    if isinstance(exc, GameExpired):
        return 410, "game-expired", f"game {exc.args[0]!r} expired: idle past the server's limit"
    if isinstance(exc, GameEnded):
        return 409, "game-ended", f"game {exc.args[0]!r} has already ended"
    if isinstance(exc, NotYourGame):
        return (
            403,
            "not-your-game",
            (
                f"game {exc.args[0]!r} was created with another API key: only that key, or an "
                "admin key, may act on it"
            ),
        )
    if isinstance(exc, GameExists):
        return 409, "game-exists", f"game {exc.args[0]!r} already exists"
    if isinstance(exc, TurnConflict):
        return 409, "turn-conflict", str(exc)
    if isinstance(exc, Unavailable):
        return 409, "seat-unavailable", str(exc)
    if isinstance(exc, Overloaded):
        return 503, "overloaded", str(exc)
    if isinstance(exc, QuotaExceeded):
        return 429, "quota-exceeded", str(exc)
    return 422, "unprocessable", str(exc)


def problem_of(
    exc: Exception, retry_after_s: int, where: tuple[str, ...] = ("body",)
) -> dict[str, Any]:
    """The `Problem` for a service error (a whole answer's body, or a batch item's `error`:
    `where` is then the item's place, e.g. `("body", "items", "3")`)."""
    status, kind, detail = classify(exc)
    errors = None
    if isinstance(exc, Unprocessable) and exc.field:
        errors = [field_error((*where, *exc.field), detail)]
    elif kind == "invalid-game-id":  # a path's id (a body's is the schema's)
        errors = [field_error(("path", "game_id"), detail)]
    retry = retry_after_s if status in RETRY_STATUSES else None
    return problem(status, detail, kind, retry, errors)


def field_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validation errors as `FieldError`s: where and what, never the input (a NaN or
    undecodable bytes echoed back would make the answer itself fail)."""
    return [
        {
            "loc": [str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ]


def validation_problem(errors: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    fields = field_errors(errors)
    return problem(422, fields, "invalid-request", errors=fields)
