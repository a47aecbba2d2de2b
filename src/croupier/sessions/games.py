"""Game sessions: which policy plays each seat, and the recorders of the learned seats."""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from croupier.policies.seats import SeatPolicy
from croupier.policies.tables import table_kind
from croupier.trajectories.recorder import SeatRecorder


class GameNotFound(KeyError):
    pass


class GameEnded(RuntimeError):
    pass


class GameExists(RuntimeError):
    pass


class NotYourGame(PermissionError):
    """The game was created with another API key: only that key, or an admin key, may act on
    it (403). The id is the game's, the key never named."""


class GameExpired(RuntimeError):
    """The game was aborted by the server for being idle (`--idle-game-timeout`): it existed,
    unlike an unknown id, and can no longer be played or ended."""


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
    # The API key that created it (a label, not the key; None on an open server): only it, or
    # an admin key, may act on the game; per-key quotas count by it.
    owner: str | None = None
    # Partners (seats sharing one result), as the adapter read them from the game's first
    # state; [] when the game has none. None: not read yet.
    teams: list[list[str]] | None = None
    # Expert iteration: searches still labelling this game's recorded steps (`deciding.py`);
    # `end` waits for them (each bounded by its search's deadline) before closing episodes.
    pending_labels: set[Any] = field(default_factory=set)

    def table(self, seat: str) -> str:
        """The kind of table `seat` plays at (`policies/tables.py`): what its episodes carry."""
        return table_kind(self.seats, seat, self.teams)


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
    """Games in flight, plus a bounded memory of ended ones (so a late call gets 409, not 404)
    and of expired ones (410, not 404)."""

    def __init__(self, ended_remembered: int = 100_000):
        self._live: dict[str, GameSession] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._ended_remembered = ended_remembered
        self.created_total = 0
        self._owned: Counter[str] = Counter()  # live games per owner
        self._versions: dict[int, int] = {}  # live games per weights version they pin

    def __len__(self) -> int:
        return len(self._live)

    def add(self, session: GameSession) -> None:
        gid = session.game_id
        if gid in self._live or gid in self._ended or gid in self._expired:
            raise GameExists(gid)
        self._live[session.game_id] = session
        self.created_total += 1
        if session.owner is not None:
            self._owned[session.owner] += 1
        for version in {p.version for p in session.seats.values()} - {None}:
            self._versions[version] = self._versions.get(version, 0) + 1

    def versions_in_use(self) -> set[int]:
        """The weights versions live games are pinned to (weights retention keeps them).
        Called from the trainer link's thread: `dict.copy` runs in C under the GIL, so it
        never sees the dict change size halfway as iterating it could."""
        return set(dict.copy(self._versions))

    def owned(self, owner: str) -> int:
        """Live games created by `owner`."""
        return self._owned[owner]

    def _forget_live(self, session: GameSession) -> None:
        for version in {p.version for p in session.seats.values()} - {None}:
            left = self._versions.get(version, 0) - 1
            if left > 0:
                self._versions[version] = left
            else:
                self._versions.pop(version, None)
        if session.owner is not None:
            self._owned[session.owner] -= 1
            if self._owned[session.owner] <= 0:
                del self._owned[session.owner]

    def is_live(self, game_id: str) -> bool:
        return game_id in self._live

    def pending_labels(self, game_id: str) -> list[Any]:
        """The live game's searches still labelling its steps (none for another game)."""
        session = self._live.get(game_id)
        return [f for f in session.pending_labels if not f.done()] if session else []

    def check_owner(self, game_id: str, owner: str) -> None:
        """`NotYourGame` when the live game `game_id` was created by another key than `owner`
        (a game not live here is left to the route's own answer: 404, 409, 410; one created
        without a key, in-process, is anybody's)."""
        session = self._live.get(game_id)
        if session is not None and session.owner not in (owner, None):
            raise NotYourGame(game_id)

    def get(self, game_id: str) -> GameSession:
        session = self._live.get(game_id)
        if session is None:
            if game_id in self._ended:
                raise GameEnded(game_id)
            if game_id in self._expired:
                raise GameExpired(game_id)
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
        self._forget_live(session)
        _remember(self._ended, game_id, self._ended_remembered)
        return session

    def discard(self, game_id: str, expired: bool = False) -> GameSession:
        """Drop a live game, recording nothing; an expired one is remembered as such. An
        ended or expired game raises as `get` does: there is nothing left to drop."""
        session = self.get(game_id)
        del self._live[game_id]
        self._forget_live(session)
        if expired:
            _remember(self._expired, game_id, self._ended_remembered)
        return session


def _remember(ids: OrderedDict[str, None], game_id: str, limit: int) -> None:
    ids[game_id] = None
    while len(ids) > limit:
        ids.popitem(last=False)
