"""Safe rollout around the seats: production, canary, shadow, league and rules recording.

The decision service asks this module three things, each one call:
- `parser()`: one per new game, turns seat specs into `SeatPolicy`s, resolving the rollout
  specs (`production`, `canary`, `shadow[@latest|@N]`, `league`) besides the plain ones (one
  grammar for both: `policies.seats.parse_spec`);
- `on_rules_decision(...)`: after the rules answered a seat: a shadow seat's learned version is
  computed beside them (off the answer's path, through the injected `ShadowForward`) and
  compared; a recorded game keeps the step;
- `on_end(...)` / `on_abort(...)`: outcomes per canary arm and per shadowed version, and the
  recorded rules episodes go to the offline writer.

Its collaborators are injected (the composition root, `croupier.api.components`, builds them):
they are later stages of the data flow (the batcher, the offline writer), so this module knows
them only as the small protocols below.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from croupier.policies.best_response import BestResponseSeat
from croupier.policies.learned import ModelDecision
from croupier.policies.rollout.channels import Channels
from croupier.policies.rollout.league import LeaguePool, LeagueSampling
from croupier.policies.rollout.live import LiveArena
from croupier.policies.rollout.outcomes import Mean, ShadowStats
from croupier.policies.seats import (
    BEST_RESPONSE,
    SeatPolicy,
    SeatSpec,
    SeatUnavailable,
    parse_spec,
    resolve_plain,
)
from croupier.policies.tiers import TierTable

GAMES_TRACKED = 100_000  # games with rollout state; older ones (never ended) are forgotten
# Shadow outcomes are kept per learned version: the newest this many versions' (plus the
# failures of `shadow@latest` seats, -1); an older version's are dropped, counted, or they
# grew with every version ever shadowed.
SHADOW_VERSIONS = 16
CANARY_ARMS = {"canary:production": "production", "canary:rules": "rules"}


class ShadowForward(Protocol):
    """Runs a learned version beside the rules (the server's batcher): the future resolves to
    the model's answer, or None when it was late."""

    def submit(
        self, obs: np.ndarray, mask: np.ndarray, version: int | None
    ) -> asyncio.Future[ModelDecision | None]: ...


class OfflineEpisodes(Protocol):
    """Where `record: rules` games' rules decisions go (`trajectories.offline.OfflineWriter`)."""

    def add_episode(
        self,
        game_id: str,
        seat: str,
        steps: list[tuple[np.ndarray, np.ndarray, int]],
        payoff: float,
    ) -> None: ...

    def stats(self) -> dict[str, Any]: ...

    def flush(self) -> None: ...


@dataclass
class _GameState:
    canary: dict[str, str] = field(default_factory=dict)  # seat -> arm
    shadow: dict[str, list[Any]] = field(default_factory=dict)  # seat -> [version, disagreed]
    recorded: dict[str, list[tuple[np.ndarray, np.ndarray, int]]] | None = None
    pending: int = 0  # shadow forwards still running
    payoffs: dict[str, float] | None = None


class Rollout:
    def __init__(
        self,
        channels: Channels,
        shadow_forward: ShadowForward,
        canary_share: float | None = None,
        weights_dir: Path | None = None,
        offline: OfflineEpisodes | None = None,
        seed: int = 0,
        league: LeagueSampling | None = None,
        best_response: BestResponseSeat | None = None,
    ):
        self.channels = channels  # holds the canary share (changed at run time by an admin)
        if canary_share is not None:
            channels.start_share(canary_share)
        self.shadow_forward = shadow_forward
        self.offline = offline  # for `record: rules`, or None
        self._rng = np.random.default_rng(seed + 7919)
        self.league = LeaguePool(Path(weights_dir) if weights_dir else None, self._rng, league)
        # `best-response` seats (and a league's share of them): None on a server without one.
        self.best_response = best_response
        if self.league.sampling.best_response_share:
            self._best_response()  # a game without a tree is refused at start-up
        # Every ended game's players and payoffs (`GameKeeper` feeds it; `/v1/arena/live`).
        self.live = LiveArena(Path(weights_dir) if weights_dir else None)
        # `tier:N` seats: the arena's calibration in the weights dir (`policies/tiers.py`).
        self.tiers = TierTable(
            Path(weights_dir) if weights_dir else None,
            channels.versions,
            held=lambda: {v for v in (channels.production, *channels.history) if v is not None},
        )
        self.tiers.refresh()  # now: their versions held from the start, before any is pruned
        self._games: OrderedDict[str, _GameState] = OrderedDict()
        self.canary_games = {"production": 0, "rules": 0}
        self.canary_payoff = {"production": Mean(), "rules": Mean()}
        self.shadow: dict[int, ShadowStats] = {}
        self.shadow_versions_dropped = 0

    @property
    def canary_share(self) -> float:
        return self.channels.canary_share

    # --- game creation -------------------------------------------------------------------

    def parser(self, record: bool | str = True) -> Callable[..., SeatPolicy]:
        """A seat-spec parser for one new game (its canary arm is drawn once, when needed).
        `record="rules"` asks to record the rules seats' decisions as offline episodes."""
        arm: list[str] = []

        def parse(spec: str, *, latest: int, pin: str, loaded: list[int]) -> SeatPolicy:
            if record == "rules" and self.offline is None:
                raise SeatUnavailable("this server records no rules episodes: use --offline-dir")
            parsed = parse_spec(spec)
            if parsed.name == BEST_RESPONSE and not self._best_response_ready():
                raise SeatUnavailable(
                    "the best response to the newest version is being computed: "
                    "try again in a few seconds"
                )
            if parsed.search is not None and parsed.search.base.startswith("production"):
                production = self.channels.production  # a search over production's version
                if production is None:
                    raise SeatUnavailable("no production version yet: promote one first")
                base = parsed.search.base.replace("production", f"frozen@{production}", 1)
                parsed = dataclasses.replace(
                    parsed, search=dataclasses.replace(parsed.search, base=base)
                )
            if not parsed.rollout:
                return resolve_plain(parsed, latest=latest, pin=pin, loaded=loaded)
            policy = resolve_rollout(parsed, latest, loaded)
            if parsed.name == "tier" or not policy.uses_model:
                # A tier plays as it was calibrated; a seat drawn to the rules (a league's, a
                # canary's) plays them as they are.
                return policy
            # `production:greedy`, `league:greedy`: the same version, its most likely action;
            # `production:temp=T:rules=P`: tuned as a frozen version is.
            return dataclasses.replace(
                policy,
                greedy=parsed.greedy,
                temperature=parsed.temperature,
                rules_share=parsed.rules_share,
            )

        def resolve_rollout(parsed: SeatSpec, latest: int, loaded: list[int]) -> SeatPolicy:
            production = self.channels.production
            if parsed.name == "production":
                if production is None:
                    raise SeatUnavailable("no production version yet: promote one first")
                return SeatPolicy("frozen", production, channel="production")
            if parsed.name == "canary":
                if not arm:
                    draw = production is not None and self._rng.random() < self.canary_share
                    arm.append("production" if draw else "rules")
                if arm[0] == "production" and production is not None:
                    return SeatPolicy("frozen", production, channel="canary:production")
                return SeatPolicy("rules", channel="canary:rules")
            if parsed.name == "shadow":
                version = self._shadow_version(parsed, latest, loaded)
                return SeatPolicy("rules", version, channel="shadow")
            if parsed.name == "tier":
                assert parsed.tier is not None
                return self.tiers.policy(parsed.tier)
            ready = bool(self.league.sampling.best_response_share) and self._best_response_ready()
            drawn = self.league.draw(loaded, best_response=ready)  # league
            if drawn == BEST_RESPONSE:
                return SeatPolicy(BEST_RESPONSE)
            return SeatPolicy("rules") if drawn is None else SeatPolicy("frozen", int(drawn))

        return parse

    def _best_response(self) -> BestResponseSeat:
        """The server's best-response seat; SeatUnavailable (409, as for `record: rules`
        without an offline writer: the spec is right, this server cannot seat it) on a game
        without a tree."""
        seat = self.best_response
        problem = "this server has no best-response seat" if seat is None else seat.problem()
        if problem is not None:
            raise SeatUnavailable(problem)
        assert seat is not None
        return seat

    def _best_response_ready(self) -> bool:
        """Whether the best-response seat has a table to play (asking for one to the newest
        version, computed off the event loop, when it has none yet)."""
        seat = self._best_response()
        seat.refresh()
        return seat.ready

    def begin_game(
        self, game_id: str, plan: dict[str, SeatPolicy], record: bool | str = True
    ) -> None:
        """Remember what this game's rollout seats need later (nothing, for most games)."""
        state = _GameState()
        for seat, policy in plan.items():
            if policy.channel == "shadow":
                state.shadow[seat] = [policy.version, False]
            elif policy.channel in CANARY_ARMS:
                state.canary[seat] = CANARY_ARMS[policy.channel]
        for arm in set(state.canary.values()):
            self.canary_games[arm] += 1
        if record == "rules":
            state.recorded = {s: [] for s, p in plan.items() if p.kind == "rules"}
        if state.shadow or state.canary or state.recorded is not None:
            self._games[game_id] = state
            while len(self._games) > GAMES_TRACKED:
                self._games.popitem(last=False)

    # --- decisions -----------------------------------------------------------------------

    def observes(self, game_id: str, seat: str) -> bool:
        """Whether this seat's rules decisions need their observation here: a `record:
        rules` game's recorded seat, or a shadow seat (its model runs beside the rules)."""
        state = self._games.get(game_id)
        if state is None:
            return False
        return seat in state.shadow or (state.recorded is not None and seat in state.recorded)

    def on_rules_decision(
        self,
        game_id: str,
        seat: str,
        policy: SeatPolicy,
        obs: np.ndarray,
        mask: np.ndarray,
        rules_index: int,
    ) -> None:
        state = self._games.get(game_id)
        if state is None:
            return
        if state.recorded is not None and seat in state.recorded:
            state.recorded[seat].append((obs, mask, rules_index))
        if policy.channel != "shadow" or seat not in state.shadow:
            return
        future = self.shadow_forward.submit(obs, mask, policy.version)
        state.pending += 1

        def compare(done: asyncio.Future[ModelDecision | None]) -> None:
            state.pending -= 1
            # Cancelled, failed, or late (None: past the decide deadline).
            if done.cancelled() or done.exception() is not None or done.result() is None:
                version = policy.version if policy.version is not None else -1
                self._shadow_stats(version).failed += 1
            else:
                result: ModelDecision = done.result()  # type: ignore[assignment]
                stats = self._shadow_stats(result.version)
                stats.decisions += 1
                sampled = result.action != rules_index
                stats.disagree_sampled += sampled
                stats.disagree_greedy += int(np.argmax(result.logits)) != rules_index
                state.shadow[seat][0] = result.version
                state.shadow[seat][1] = state.shadow[seat][1] or sampled
            if state.payoffs is not None and state.pending == 0:
                self._settle(state)

        future.add_done_callback(compare)

    # --- game end ------------------------------------------------------------------------

    def on_end(self, game_id: str, payoffs: dict[str, float]) -> None:
        state = self._games.pop(game_id, None)
        if state is None:
            return
        state.payoffs = payoffs
        if state.recorded is not None and self.offline is not None:
            for seat, steps in state.recorded.items():
                if steps:
                    self.offline.add_episode(game_id, seat, steps, float(payoffs[seat]))
        for seat, arm in state.canary.items():
            self.canary_payoff[arm].add(float(payoffs[seat]))
        if state.pending == 0:
            self._settle(state)

    def on_abort(self, game_id: str) -> None:
        self._games.pop(game_id, None)

    def tracks(self, game_id: str) -> bool:
        """Whether this game's rollout seats are remembered (until it ends or is aborted)."""
        return game_id in self._games

    def _settle(self, state: _GameState) -> None:
        assert state.payoffs is not None
        for seat, (version, disagreed) in state.shadow.items():
            if version is None:
                continue  # no shadow decision came back for this seat
            stats = self._shadow_stats(version)
            stats.payoff.add(float(state.payoffs[seat]))
            if disagreed:
                stats.payoff_when_disagreed.add(float(state.payoffs[seat]))

    # --- views ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "production": self.channels.production,
            "canary": {
                "share": self.canary_share,
                "games": dict(self.canary_games),
                "payoff": {arm: m.to_dict() for arm, m in self.canary_payoff.items()},
            },
            "shadow": {str(v): s.to_dict() for v, s in sorted(self.shadow.items())},
            "shadow_versions_dropped": self.shadow_versions_dropped,
            "offline": self.offline.stats() if self.offline is not None else None,
        }

    # --- internals -----------------------------------------------------------------------

    def _shadow_stats(self, version: int) -> ShadowStats:
        """`version`'s shadow outcomes, made on first use; past `SHADOW_VERSIONS` versions the
        oldest version's are dropped (counted)."""
        stats = self.shadow.get(version)
        if stats is None:
            stats = self.shadow[version] = ShadowStats()
            versions = sorted(v for v in self.shadow if v >= 0)
            for old in versions[: max(0, len(versions) - SHADOW_VERSIONS)]:
                del self.shadow[old]
                self.shadow_versions_dropped += 1  # `version` itself, if it was the oldest
        return stats

    def _shadow_version(self, spec: SeatSpec, latest: int, loaded: list[int]) -> int | None:
        if spec.latest:
            return None
        if spec.version is not None:
            if spec.version not in loaded:
                raise SeatUnavailable(f"version {spec.version} is not loaded; loaded: {loaded}")
            return spec.version
        production = self.channels.production
        return production if production is not None else latest
