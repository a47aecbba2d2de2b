"""A game's life: created (seats planned, quotas checked), ended with payoffs (episodes to the
spool before the answer), or ended early (aborted by the engine or expired idle: nothing
recorded, one code path for both)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from croupier.config import ServerConfig
from croupier.games.base import GameAdapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.rollout import Rollout
from croupier.policies.search_pool import SearchSeats, SearchStarting
from croupier.policies.seats import (
    SEARCH,
    BadPolicySpec,
    SeatPolicy,
    SeatUnavailable,
    resumed_seat_policy,
)
from croupier.sessions.errors import Unavailable, Unprocessable, each
from croupier.sessions.games import GameNotFound, GameSession, GameStore, team_payoffs
from croupier.sessions.guards import Overloaded, QuotaExceeded
from croupier.trajectories.recorder import RecordingBudget, SeatRecorder
from croupier.trajectories.spool import EpisodeSpool


class GameKeeper:
    def __init__(
        self,
        config: ServerConfig,
        adapter: GameAdapter,
        versions: PolicyVersions,
        games: GameStore,
        rollout: Rollout,
        outbox: EpisodeSpool,
        has_rules: bool,
        budget: RecordingBudget | None = None,
        search: SearchSeats | None = None,
    ):
        self.config = config
        self.adapter = adapter
        self.versions = versions
        self.games = games
        self.rollout = rollout
        self.outbox = outbox
        self.has_rules = has_rules
        self.budget = budget  # what the learned seats' recorders may hold (deciding.py)
        self.search = search  # search seats' workers (None: this server seats none)
        self.refused_overload = 0  # games refused: the server's limit of games in flight
        self.refused_quota = 0
        self.expired_games = 0
        self.refused_payoffs = 0  # `end`s refused: a payoff outside the game's range
        # Hands in which a learned seat never acted (no episode), and their payoffs, carried
        # by the next episode recorded (`hands`, `silent_payoff`): the trainer's payoff per
        # hand counts them. Event loop only, like every caller here.
        self._silent_hands = 0
        self._silent_payoff = 0.0
        # Failover: games taken over from a dead server, and their learned seats' episode
        # fragments left behind with it (each at most one; none where the seat had not acted).
        self.games_resumed = 0
        self.fragments_dropped = 0

    def create_game(
        self,
        game: str,
        game_id: str | None = None,
        seats: dict[str, str] | None = None,
        pin: str | None = None,
        record: bool | str = True,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Start a game; `owner` (the API key's label) counts it against that key's quota."""
        self._admit(game, owner)
        seats = seats or {}
        unknown = set(seats) - set(self.adapter.seats)
        if unknown:
            raise Unprocessable(
                f"unknown seats {sorted(unknown)}; seats are {self.adapter.seats}",
                ("seats", min(unknown)),
            )
        mix = self.config.seat_mix
        shift = self.games.created_total % len(mix)
        latest, loaded = self.versions.current, self.versions.versions()
        plan: dict[str, SeatPolicy] = {}
        parse_seat_policy = self.rollout.parser(record)
        for i, seat in enumerate(self.adapter.seats):
            spec = seats[seat] if seat in seats else mix[(i + shift) % len(mix)]
            try:
                policy = parse_seat_policy(
                    spec, latest=latest, pin=pin or self.config.pin, loaded=loaded
                )
            except SeatUnavailable as e:
                raise Unavailable(str(e)) from None
            except BadPolicySpec as e:
                raise Unprocessable(str(e), ("seats", seat)) from None
            if (policy.kind == "rules" or policy.rules_share) and not self.has_rules:
                raise Unavailable(f"{self.adapter.name!r} has no rules policy")
            if policy.kind in ("frozen", SEARCH) and (
                policy.version is not None and policy.version not in loaded
            ):
                raise Unavailable(f"version {policy.version} is not loaded; loaded: {loaded}")
            self._admit_search(policy)
            if not record and policy.record:
                policy = SeatPolicy(policy.kind, policy.version, record=False)
            plan[seat] = policy
        game_id = game_id or uuid.uuid4().hex
        recorders = self._recorders(game_id, plan)
        self.games.add(GameSession(game_id, plan, recorders, owner=owner))
        self.rollout.begin_game(game_id, plan, record)
        return {"game_id": game_id, "seats": _seat_infos(plan, latest)}

    def _admit_search(self, policy: SeatPolicy) -> None:
        """A search seat: 409 where this game cannot be searched (its simulator does not set
        a table from a seat's view), 503 + Retry-After while the workers start."""
        if policy.kind != SEARCH:
            return
        if self.search is None or policy.search is None:
            raise Unavailable("this server seats no search seats")
        try:
            self.search.admit(policy.search)
        except SearchStarting as e:
            raise Overloaded(str(e)) from None
        except SeatUnavailable as e:
            raise Unavailable(str(e)) from None

    def _recorders(self, game_id: str, plan: dict[str, SeatPolicy]) -> dict[str, SeatRecorder]:
        """A recorder per recorded seat, each counting its bytes in the server's budget."""
        return {
            seat: SeatRecorder(game_id, seat, p.label(), budget=self.budget)
            for seat, p in plan.items()
            if p.record
        }

    def _admit(self, game: str, owner: str | None) -> None:
        """A new game here: this server's game, under its limit and the key's quota."""
        if game != self.adapter.name:
            raise Unprocessable(f"this server plays {self.adapter.name!r}, not {game!r}", ("game",))
        if len(self.games) >= self.config.max_games:
            self.refused_overload += 1
            raise Overloaded(f"{len(self.games)} games in flight, the server's limit")
        quota = self.config.max_games_per_key
        if quota is not None and owner is not None and self.games.owned(owner) >= quota:
            self.refused_quota += 1
            raise QuotaExceeded(f"this key has {quota} games in flight, its limit")

    def resume_game(
        self,
        game: str,
        game_id: str,
        seats: dict[str, tuple[str, int | None]],
        record: bool | str = True,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Take over a game whose server died (failover, docs/scale-out.md): the same id and
        seats, `seats` being what its create answered ({seat: (policy label, version)}).

        A pinned version this server does not hold is served by the one `PolicyVersions.resolve`
        picks (the oldest loaded at or after it; the newest if it is newer than all), named in
        the answer's `substituted`. The learned seats record afresh from here: what the dead
        server recorded of this game is lost (counted in `fragments_dropped`), never stitched.
        A game already live here is answered as it is (a retried resume changes nothing);
        an ended one is a 409, as for any call on it."""
        try:
            session = self.games.get(game_id)  # GameEnded (409) when it ended here
        except GameNotFound:
            session = None
        if session is not None:
            return {
                "game_id": game_id,
                "seats": _seat_infos(session.seats, self.versions.current),
                "resumed": False,
                "substituted": {},
            }
        self._admit(game, owner)
        if set(seats) != set(self.adapter.seats):
            raise Unprocessable(
                f"a resumed game names every seat exactly: seats are {self.adapter.seats}",
                ("seats",),
            )
        if record == "rules" and self.rollout.offline is None:
            raise Unprocessable(
                "this server records no rules episodes: use --offline-dir", ("record",)
            )
        substituted: dict[str, dict[str, int]] = {}
        plan: dict[str, SeatPolicy] = {}
        for seat in self.adapter.seats:
            label, asked = seats[seat]

            def served(version: int, seat: str = seat) -> int:
                given = self.versions.resolve(version)[0]
                if given != version:
                    substituted[seat] = {"asked": version, "served": given}
                return given

            try:
                if label.startswith("tier:"):  # the tier as this server calibrated it now
                    policy = self.rollout.parser(False)(
                        label, latest=self.versions.current, pin="created",
                        loaded=self.versions.versions(),
                    )  # fmt: skip
                else:
                    policy = resumed_seat_policy(label, asked, record=bool(record), served=served)
            except SeatUnavailable as e:
                raise Unavailable(str(e)) from None
            except BadPolicySpec as e:
                raise Unprocessable(str(e), ("seats", seat)) from None
            if (policy.kind == "rules" or policy.rules_share) and not self.has_rules:
                raise Unprocessable(f"{self.adapter.name!r} has no rules policy", ("seats", seat))
            self._admit_search(policy)
            plan[seat] = policy
        recorders = self._recorders(game_id, plan)
        self.games.add(GameSession(game_id, plan, recorders, owner=owner))
        self.rollout.begin_game(game_id, plan, record)
        self.games_resumed += 1
        self.fragments_dropped += len(recorders)
        return {
            "game_id": game_id,
            "seats": _seat_infos(plan, self.versions.current),
            "resumed": True,
            "substituted": substituted,
        }

    def create_games(
        self, items: list[dict[str, Any] | Exception], owner: str | None = None
    ) -> list[Any]:
        """Many `create_game`s; each item's outcome (or its error) in order."""
        return each(items, lambda item: self.create_game(**item, owner=owner))

    async def end_game(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        """Close the game; returns once its episodes are committed to the spool (by the
        spool's writer thread: the event loop serves other requests meanwhile)."""
        await self._labels_of([game_id])
        ended, episodes = self._close_game(game_id, payoffs)
        if episodes:
            await self.outbox.write(episodes)
        return ended

    async def end_games(self, items: list[tuple[str, dict[str, float]] | Exception]) -> list[Any]:
        """Many games closed at once: their episodes reach the spool in one transaction
        (before the answer, as for one game); a failing item fails alone."""
        episodes: list[dict[str, Any]] = []

        def close(item: tuple[str, dict[str, float]]) -> dict[str, Any]:
            ended, recorded = self._close_game(*item)
            episodes.extend(recorded)
            return ended

        await self._labels_of([i[0] for i in items if not isinstance(i, Exception)])
        results = each(items, close)
        if episodes:
            await self.outbox.write(episodes)
        return results

    async def _labels_of(self, game_ids: list[str]) -> None:
        """Wait for the searches still labelling these games' steps (expert iteration), each
        bounded by its own deadline; an unknown or ended game is left to `_close_game`."""
        pending = [f for game_id in game_ids for f in self.games.pending_labels(game_id)]
        if pending:
            await asyncio.wait(pending)

    def _close_game(
        self, game_id: str, payoffs: dict[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        session = self.games.get(game_id)
        missing = set(session.seats) - set(payoffs)
        extra = set(payoffs) - set(session.seats)
        if missing or extra:
            raise Unprocessable(
                f"payoffs must name every seat exactly: missing {sorted(missing)}, "
                f"unknown {sorted(extra)}",
                ("payoffs",),
            )
        problem = self.adapter.payoff_problem(payoffs)
        if problem is not None:  # nothing recorded: the game stays open for a correct `end`
            self.refused_payoffs += 1
            raise Unprocessable(problem, ("payoffs",))
        self.games.finish(game_id)
        self.rollout.on_end(game_id, payoffs)
        self.rollout.live.add_game(session.seats, payoffs)
        episodes = []
        terminal = self.adapter.terminal_observation()
        recorded = team_payoffs(payoffs, session.teams)  # partners: the team's payoff
        for seat, recorder in session.recorders.items():
            episode = recorder.close(float(recorded[seat]), terminal)
            if episode is None:
                self._silent_hands += 1
                self._silent_payoff += float(recorded[seat])
                continue
            episode["table"] = session.table(seat)  # the learner reads the rules' hands apart
            episode["hands"] = 1 + self._silent_hands
            episode["silent_payoff"] = self._silent_payoff
            self._silent_hands, self._silent_payoff = 0, 0.0
            episodes.append(episode)
        return {"game_id": game_id, "episodes": len(episodes)}, episodes

    def abort_game(self, game_id: str) -> None:
        """The engine gave the game up: nothing is recorded. Unknown (404), already ended
        (409) or expired (410) games raise: there is nothing to abort."""
        self._end_early(game_id)

    def expire_idle_games(self, idle_s: float) -> int:
        """End games nobody has touched for `idle_s` seconds, as an abort does."""
        expired = self.games.idle_game_ids(idle_s)
        for game_id in expired:
            self._end_early(game_id, expired=True)
        self.expired_games += len(expired)
        return len(expired)

    def _end_early(self, game_id: str, expired: bool = False) -> None:
        """The one way a game ends without payoffs: forgotten with what it recorded, and by the
        rollout (before this was shared, expired games stayed in the rollout's memory)."""
        session = self.games.discard(game_id, expired)
        for recorder in session.recorders.values():  # what they held is dropped: give it back
            recorder.release()
        self.rollout.on_abort(game_id)


def _seat_infos(plan: dict[str, SeatPolicy], latest: int) -> dict[str, dict[str, Any]]:
    """A game's seats as its create (and resume) answer them: policy label and version."""
    return {
        seat: {
            "policy": p.label(),
            "version": latest if p.version is None and p.uses_model else p.version,
        }
        for seat, p in plan.items()
    }
