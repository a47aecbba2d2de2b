"""Refusals that protect the server and the games: a turn out of order (409), overload (503),
a key's quota of games full (429)."""

from __future__ import annotations


class TurnConflict(RuntimeError):
    """A decide with a `turn` older than (or equal to, for another seat) the game's last."""


class Overloaded(RuntimeError):
    """Too many games in flight, or too many decisions waiting for the model: try later."""


class QuotaExceeded(RuntimeError):
    """This API key already has its share of the server's games in flight: try later."""
