"""Game sessions: which policy plays each seat, and the recorders of the learned seats."""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from croupier.policies.seats import SeatPolicy
from croupier.trajectories.recorder import SeatRecorder


class GameNotFound(KeyError):
    pass


class GameEnded(RuntimeError):
    pass


class GameExists(RuntimeError):
    pass


@dataclass
class GameSession:
    game_id: str
    seats: dict[str, SeatPolicy]
    recorders: dict[str, SeatRecorder]
    created: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    # Idempotent decisions, the last decide with a turn: (turn, seat, future of its Decision,
    # its state, its reward); a retry must match the last two.
    last_turn: tuple[int, str, Any, dict[str, Any], float | None] | None = None
    # The API key that created it (a label, not the key): per-key quotas count by it.
    owner: str | None = None
    # Partners (seats sharing one result), as the adapter read them from the game's first
    # state; [] when the game has none. None: not read yet.
    teams: list[list[str]] | None = None


def team_payoffs(payoffs: dict[str, float], teams: list[list[str]] | None) -> dict[str, float]:
    """Each partner's payoff is the team's: the mean of what the engine gave its members (an
    engine may credit only the partner who went out; both played for that result)."""
    if not teams:
        return payoffs
    shared = dict(payoffs)
    for team in teams:
        members = [s for s in team if s in payoffs]
        if len(members) > 1:
            mean = sum(payoffs[s] for s in members) / len(members)
            for s in members:
                shared[s] = mean
    return shared


class GameStore:
    """Games in flight, plus a bounded memory of ended ones (so a late call gets 409, not 404)."""

    def __init__(self, ended_remembered: int = 100_000):
        self._live: dict[str, GameSession] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._ended_remembered = ended_remembered
        self.created_total = 0
        self._owned: Counter[str] = Counter()  # live games per owner

    def __len__(self) -> int:
        return len(self._live)

    def add(self, session: GameSession) -> None:
        if session.game_id in self._live or session.game_id in self._ended:
            raise GameExists(session.game_id)
        self._live[session.game_id] = session
        self.created_total += 1
        if session.owner is not None:
            self._owned[session.owner] += 1

    def owned(self, owner: str) -> int:
        """Live games created by `owner`."""
        return self._owned[owner]

    def _forget_owner(self, session: GameSession) -> None:
        if session.owner is not None:
            self._owned[session.owner] -= 1
            if self._owned[session.owner] <= 0:
                del self._owned[session.owner]

    def is_live(self, game_id: str) -> bool:
        return game_id in self._live

    def get(self, game_id: str) -> GameSession:
        session = self._live.get(game_id)
        if session is None:
            if game_id in self._ended:
                raise GameEnded(game_id)
            raise GameNotFound(game_id)
        session.last_seen = time.monotonic()
        return session

    def idle_game_ids(self, idle_s: float) -> list[str]:
        """Live games not touched (created, decided) for `idle_s` seconds."""
        cutoff = time.monotonic() - idle_s
        return [gid for gid, s in self._live.items() if s.last_seen < cutoff]

    def finish(self, game_id: str) -> GameSession:
        """Remove a live game and remember that it ended."""
        session = self.get(game_id)
        del self._live[game_id]
        self._forget_owner(session)
        self._ended[game_id] = None
        while len(self._ended) > self._ended_remembered:
            self._ended.popitem(last=False)
        return session

    def discard(self, game_id: str) -> GameSession | None:
        """Drop a game, live or ended, recording nothing. None when unknown."""
        if game_id in self._ended:
            del self._ended[game_id]
            return None
        session = self._live.pop(game_id, None)
        if session is None:
            raise GameNotFound(game_id)
        self._forget_owner(session)
        return session
