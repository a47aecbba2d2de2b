"""Safe rollout around the seats: production, canary, shadow, league and rules recording.

The decision service asks this module three things, each one call:
- `parser()`: one per new game, turns seat specs into `SeatPolicy`s, resolving the rollout
  specs (`production`, `canary`, `shadow[@latest|@N]`, `league`) besides the plain ones;
- `on_rules_decision(...)`: after the rules answered a seat: a shadow seat's learned version is
  computed beside them (off the answer's path) and compared; a recorded game keeps the step;
- `on_end(...)` / `on_abort(...)`: outcomes per canary arm and per shadowed version, and the
  recorded rules episodes go to the offline writer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from croupier.policies.channels import Channels
from croupier.policies.learned import PolicyVersions
from croupier.policies.seats import BadPolicySpec, SeatPolicy, parse_seat_policy

log = logging.getLogger(__name__)

RATINGS_FILE = "ratings.json"
GAMES_TRACKED = 100_000  # games with rollout state; older ones (never ended) are forgotten
LEAGUE_RECENT = 4
LEAGUE_STRONGEST = 2
CANARY_ARMS = {"canary:production": "production", "canary:rules": "rules"}


class Mean:
    """Count, mean and 95% CI half-width of a stream of numbers."""

    __slots__ = ("n", "total", "squares")

    def __init__(self) -> None:
        self.n, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x

    def to_dict(self) -> dict[str, Any]:
        if not self.n:
            return {"n": 0, "mean": None, "ci95": None}
        mean = self.total / self.n
        var = max(0.0, (self.squares - self.n * mean * mean) / (self.n - 1)) if self.n > 1 else 0
        return {"n": self.n, "mean": mean, "ci95": 1.96 * math.sqrt(var / self.n)}


@dataclass
class ShadowStats:
    """One learned version shadowing the rules."""

    decisions: int = 0
    disagree_sampled: int = 0  # the action it would have played differs from the rules'
    disagree_greedy: int = 0  # its most likely action differs
    failed: int = 0
    payoff: Mean = field(default_factory=Mean)  # the shadowed seat's payoff (rules acted)
    payoff_when_disagreed: Mean = field(default_factory=Mean)

    def to_dict(self) -> dict[str, Any]:
        n = max(self.decisions, 1)
        return {
            "decisions": self.decisions,
            "disagreement_rate": self.disagree_sampled / n if self.decisions else None,
            "greedy_disagreement_rate": self.disagree_greedy / n if self.decisions else None,
            "failed": self.failed,
            "games": self.payoff.to_dict(),
            "games_with_disagreement": self.payoff_when_disagreed.to_dict(),
        }


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
        versions: PolicyVersions,
        channels: Channels,
        canary_share: float | None = None,
        weights_dir: Path | None = None,
        offline: Any = None,
        seed: int = 0,
    ):
        self.versions = versions
        self.channels = channels  # holds the canary share (changed at run time by an admin)
        if canary_share is not None:
            channels.start_share(canary_share)
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.offline = offline  # an OfflineWriter for `record: rules`, or None
        self._rng = np.random.default_rng(seed + 7919)
        self._games: OrderedDict[str, _GameState] = OrderedDict()
        self.canary_games = {"production": 0, "rules": 0}
        self.canary_payoff = {"production": Mean(), "rules": Mean()}
        self.shadow: dict[int, ShadowStats] = {}
        self._ratings: dict[str, float] = {}
        self._ratings_mtime = 0.0

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
                raise BadPolicySpec("this server records no rules episodes: use --offline-dir")
            name, _, arg = spec.strip().partition("@")
            production = self.channels.production
            if name == "production" and not arg:
                if production is None:
                    raise BadPolicySpec("no production version yet: promote one first")
                return SeatPolicy("frozen", production, channel="production")
            if name == "canary" and not arg:
                if not arm:
                    draw = production is not None and self._rng.random() < self.canary_share
                    arm.append("production" if draw else "rules")
                if arm[0] == "production" and production is not None:
                    return SeatPolicy("frozen", production, channel="canary:production")
                return SeatPolicy("rules", channel="canary:rules")
            if name == "shadow":
                version = self._shadow_version(arg, latest, loaded)
                return SeatPolicy("rules", version, channel="shadow")
            if name == "league" and not arg:
                return SeatPolicy("frozen", self._league_version(loaded))
            return parse_seat_policy(spec, latest=latest, pin=pin, loaded=loaded)

        return parse

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

    def on_rules_decision(
        self,
        game_id: str,
        seat: str,
        policy: SeatPolicy,
        obs: np.ndarray,
        mask: np.ndarray,
        rules_index: int,
        batcher: Any,
    ) -> None:
        state = self._games.get(game_id)
        if state is None:
            return
        if state.recorded is not None and seat in state.recorded:
            state.recorded[seat].append((obs, mask, rules_index))
        if policy.channel != "shadow" or seat not in state.shadow:
            return
        future: asyncio.Future = batcher.submit(obs, mask, policy.version)
        state.pending += 1

        def compare(done: asyncio.Future) -> None:
            state.pending -= 1
            # Cancelled, failed, or late (None: past the decide deadline).
            if done.cancelled() or done.exception() is not None or done.result() is None:
                version = policy.version if policy.version is not None else -1
                self.shadow.setdefault(version, ShadowStats()).failed += 1
            else:
                result = done.result()
                stats = self.shadow.setdefault(result.version, ShadowStats())
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

    def _settle(self, state: _GameState) -> None:
        assert state.payoffs is not None
        for seat, (version, disagreed) in state.shadow.items():
            if version is None:
                continue  # no shadow decision came back for this seat
            stats = self.shadow.setdefault(version, ShadowStats())
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
            "offline": self.offline.stats() if self.offline is not None else None,
        }

    # --- internals -----------------------------------------------------------------------

    def _shadow_version(self, arg: str, latest: int, loaded: list[int]) -> int | None:
        if arg == "latest":
            return None
        if arg:
            try:
                version = int(arg)
            except ValueError:
                raise BadPolicySpec(f"shadow@ needs latest or a version, got {arg!r}") from None
            if version not in loaded:
                raise BadPolicySpec(f"version {version} is not loaded; loaded: {loaded}")
            return version
        production = self.channels.production
        return production if production is not None else latest

    def _league_version(self, loaded: list[int]) -> int:
        """A frozen opponent: half the time one of the most recent versions, half the time one
        of the strongest by the last league's ratings (`croupier eval --league`)."""
        recent = loaded[-LEAGUE_RECENT:]
        ratings = self._read_ratings()
        rated = sorted(
            (v for v in loaded if f"learned@{v}" in ratings),
            key=lambda v: ratings[f"learned@{v}"],
            reverse=True,
        )[:LEAGUE_STRONGEST]
        pool = rated if rated and self._rng.random() < 0.5 else recent
        return int(pool[int(self._rng.integers(len(pool)))])

    def _read_ratings(self) -> dict[str, float]:
        """{player: ordinal} from `<weights-dir>/ratings.json`, re-read when it changes."""
        if self.weights_dir is None:
            return {}
        path = self.weights_dir / RATINGS_FILE
        try:
            mtime = path.stat().st_mtime
            if mtime != self._ratings_mtime:
                table = json.loads(path.read_text())["ratings"]
                self._ratings = {str(k): float(v["ordinal"]) for k, v in table.items()}
                self._ratings_mtime = mtime
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable %s: %s", path, e)
            self._ratings_mtime = time.time()
        return self._ratings
