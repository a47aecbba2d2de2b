"""The decision service's client errors, and running a batch request's items one by one.

Errors are raised as these exceptions; the API layer maps each to its status code
(`croupier.api.errors`), so every client mistake has a clear 4xx and none reaches a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from croupier.sessions.games import GameEnded, GameExists, GameExpired, GameNotFound, NotYourGame
from croupier.sessions.guards import Overloaded, QuotaExceeded, TurnConflict

T = TypeVar("T")


class Unprocessable(ValueError):
    """The request is well-formed JSON but makes no sense for this game (422). `field`: where
    in the request (or batch item), e.g. `("state",)`, `("seats", "1")`; the answer names it."""

    def __init__(self, message: str, field: tuple[str, ...] = ()):
        super().__init__(message)
        self.field = field


class Unavailable(RuntimeError):
    """The request is right, but this server cannot do it now (409): a seat's version is not
    loaded, no production version yet, no rules policy, no offline writer."""


CLIENT_ERRORS = (
    GameNotFound,
    GameEnded,
    GameExpired,
    GameExists,
    NotYourGame,
    Unprocessable,
    Unavailable,
    TurnConflict,
    Overloaded,
    QuotaExceeded,
)


def each(items: list[Any], act: Callable[[Any], T]) -> list[T | Exception]:
    """`act` on every item of a batch request that is not already an error (a malformed
    item); a client error fails its item alone, in its place."""
    out: list[T | Exception] = []
    for item in items:
        if isinstance(item, Exception):
            out.append(item)
            continue
        try:
            out.append(act(item))
        except CLIENT_ERRORS as e:
            out.append(e)
    return out
