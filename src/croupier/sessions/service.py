"""The decision service: what the HTTP routes call. Knows nothing of HTTP.

A facade over its three jobs, each in its own module: a game's life (`lifecycle.GameKeeper`:
create, end, end early), deciding (`deciding.Decider`, with the turn ledger of idempotent
decides in `turns.TurnLedger`), and the views (`policies()`, `health()`). Every collaborator
is injected by the composition root (`croupier.api.components`).

Errors are raised as the exceptions of `errors.py` (and `games.py`, `guards.py`); the API layer
maps each to its status code, so every client mistake has a clear 4xx and none reaches a 500.
"""

from __future__ import annotations

from typing import Any

from croupier.config import ServerConfig
from croupier.games.base import GameAdapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.rollout import Rollout
from croupier.policies.search_pool import SearchSeats
from croupier.sessions.batcher import InferenceBatcher
from croupier.sessions.deciding import Decider, Decision, Rules
from croupier.sessions.errors import CLIENT_ERRORS, Unprocessable
from croupier.sessions.games import GameStore
from croupier.sessions.lifecycle import GameKeeper
from croupier.trajectories.recorder import RecordingBudget
from croupier.trajectories.spool import EpisodeSpool

__all__ = ["CLIENT_ERRORS", "Decision", "DecisionService", "Unprocessable"]


class DecisionService:
    def __init__(
        self,
        config: ServerConfig,
        adapter: GameAdapter,
        versions: PolicyVersions,
        batcher: InferenceBatcher,
        outbox: EpisodeSpool,
        rollout: Rollout,
        rules: Rules | None,
        search: SearchSeats | None = None,
    ):
        self.config = config
        self.adapter = adapter
        self.versions = versions
        self.batcher = batcher
        self.outbox = outbox
        self.rollout = rollout  # production channel, canary, shadow, league, rules recording
        self.games = GameStore(config.ended_games_remembered)
        self.recording = RecordingBudget(
            config.record_max_episode_bytes, config.record_max_total_bytes
        )
        self.search = search  # search seats' workers (`policies/search_pool.py`)
        self.keeper = GameKeeper(
            config, adapter, versions, self.games, rollout, outbox, rules is not None,
            self.recording, search,
        )  # fmt: skip
        self.decider = Decider(
            config, adapter, self.games, batcher, rollout, outbox, rules, self.recording, search
        )
        self.refused_too_large = 0
        # The jobs' methods, bound once: a route calls the job directly, no facade frame per call.
        self.create_game = self.keeper.create_game
        self.create_games = self.keeper.create_games
        self.resume_game = self.keeper.resume_game
        self.end_game = self.keeper.end_game
        self.end_games = self.keeper.end_games
        self.abort_game = self.keeper.abort_game
        self.expire_idle_games = self.keeper.expire_idle_games
        self.decide = self.decider.decide
        self.decide_many = self.decider.decide_many

    @property
    def decisions_by_policy(self) -> dict[str, int]:
        return self.decider.decisions_by_policy

    def count_too_large(self) -> None:
        self.refused_too_large += 1

    def warm_up(self) -> None:
        """One forward before serving: the first call into torch is slow (lazy init), and
        it must not eat the first real decisions' deadline. The rules policy likewise."""
        obs, mask = self.adapter.terminal_observation()  # one row of the served shapes
        self.batcher.warm_up(obs, mask)
        if self.decider.rules is not None and not self.config.rules:
            self.adapter.warm_up()

    # --- views ---------------------------------------------------------------------------

    def policies(self) -> dict[str, Any]:
        return {
            "game": self.adapter.describe(),
            "seat_mix": self.config.seat_mix,
            "pin": self.config.pin,
            "policies": {
                "rules": {"available": self.decider.rules is not None},
                "random": {"available": True},
                "learned": {
                    "available": True,
                    "latest": self.versions.latest,
                    "versions": self.versions.versions(),
                    "production": self.rollout.channels.production,
                    "model": self._model(),
                },
            },
        }

    def _model(self) -> dict[str, Any]:
        """The learned policy's model; `algo` is null until a trainer (or the weights on
        disk) said which algorithm trains it: the placeholder a server builds alone is not
        any trainer's."""
        model = self.versions.spec.to_dict()
        if not self.versions.spec_known:
            model["algo"] = None
        return model

    def _search_stats(self) -> dict[str, Any]:
        """Search seats' decisions and fallbacks by base policy, their time (received to
        answered), those past their deadline, and the workers."""
        decider = self.decider
        return {
            "decisions": dict(decider.search_decisions),
            "fallbacks": dict(decider.search_fallbacks),
            "late": decider.search_late,
            # Expert iteration's labels (`--search-labels`): given, and missed (late, or the
            # workers were starting).
            "labels": decider.labels_given,
            "labels_missed": decider.labels_missed,
            "labels_kept_base": decider.labels_kept_base,  # --search-label-departures
            "answered": sum(decider.search_decisions.values()),
            "seconds": decider.search_seconds,
            "max_ms": decider.search_max_ms,
            **(self.search.stats() if self.search is not None else {}),
        }

    def health(self) -> dict[str, Any]:
        keeper, decider = self.keeper, self.decider
        pinned = len(self.games.versions_in_use())
        return {
            "status": "ok",
            "game": self.adapter.name,
            "version": self.versions.latest,
            "games_in_flight": len(self.games),
            "games_created": self.games.created_total,
            "decisions": dict(decider.decisions_by_policy),
            "batcher": self.batcher.stats(),
            "episodes": self.outbox.stats(),
            # Learned seats' recorders: bytes held, bounds, steps past them (not recorded).
            "recording": self.recording.stats(),
            "fallbacks": decider.fallbacks,
            "turn_replays": decider.turns.replays,
            "refused_overload": keeper.refused_overload + decider.refused_overload,  # 503s
            "refused_quota": keeper.refused_quota,  # 429s: a key's games-in-flight cap
            "refused_too_large": self.refused_too_large,  # 413s
            "expired_games": keeper.expired_games,
            # 422s: payoffs or a reward outside the game's declared payoff range
            "refused_payoffs": keeper.refused_payoffs + decider.refused_rewards,
            "games_resumed": keeper.games_resumed,  # taken over from a dead server
            "resumed_fragments_dropped": keeper.fragments_dropped,  # left behind with it
            "episodes_cut": decider.episodes_cut,  # truncated at the trainer's length limit
            # truncated where a fallback answered a learned seat (docs/operations.md)
            "episodes_ended_by_fallback": decider.episodes_ended_by_fallback,
            # a model's seat with one legal action: answered without a forward, not recorded
            "forced_moves": decider.forced_moves,
            "before_first_version": decider.before_first_version,
            "search": self._search_stats(),
            "weights_refused": self.versions.refused_nonfinite,  # NaN/inf versions not installed
            # Versions live games pin, and how many of them are not held for them (past
            # --max-pinned-versions: served by the nearest newer version kept).
            "versions_pinned": pinned,
            "versions_pinned_not_held": pinned - min(pinned, self.versions.max_pinned),
        }
