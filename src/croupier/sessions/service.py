"""The decision service: what the HTTP routes call. Knows nothing of HTTP.

Errors are raised as the exceptions below (and those of `games.py`); the API layer maps each to
its status code, so every client mistake has a clear 4xx and none reaches a 500.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from croupier.config import ServerConfig
from croupier.games.base import GameAdapter, InvalidState
from croupier.games.registry import load_rules
from croupier.policies.channels import Channels
from croupier.policies.learned import PolicyVersions
from croupier.policies.rollout import Rollout
from croupier.policies.seats import BadPolicySpec, SeatPolicy
from croupier.sessions.batcher import InferenceBatcher, ModelDecision
from croupier.sessions.games import GameEnded, GameExists, GameNotFound, GameSession, GameStore
from croupier.trajectories.offline import OfflineWriter
from croupier.trajectories.outbox import EpisodeOutbox
from croupier.trajectories.recorder import SeatRecorder


class Unprocessable(ValueError):
    """The request is well-formed JSON but makes no sense for this game (422)."""


CLIENT_ERRORS = (GameNotFound, GameEnded, GameExists, Unprocessable)


@dataclass(frozen=True)
class Decision:
    action: Any
    action_index: int
    policy: str
    version: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "action_index": self.action_index,
            "policy": self.policy,
            "version": self.version,
        }


@dataclass
class _Step:
    """One decision between validation and answer."""

    session: GameSession
    seat: str
    policy: SeatPolicy
    state: dict[str, Any]
    reward: float | None
    obs: np.ndarray
    mask: np.ndarray
    index: int = -1
    pending: asyncio.Future[ModelDecision] | None = None


class DecisionService:
    def __init__(
        self,
        config: ServerConfig,
        adapter: GameAdapter,
        versions: PolicyVersions,
        batcher: InferenceBatcher,
        outbox: EpisodeOutbox,
    ):
        self.config = config
        self.adapter = adapter
        self.versions = versions
        self.batcher = batcher
        self.outbox = outbox
        self.games = GameStore(config.ended_games_remembered)
        self._rules = load_rules(config.rules) if config.rules else adapter.rules()
        self._rng = np.random.default_rng(config.seed)
        self.decisions_by_policy: dict[str, int] = {}
        # Production channel, canary, shadow, league seats and rules recording.
        self.rollout = Rollout(
            versions,
            Channels(versions, config.weights_dir),
            config.canary_share,
            config.weights_dir,
            OfflineWriter(config.offline_dir, adapter.terminal_observation())
            if config.offline_dir
            else None,
            config.seed,
        )

    # --- games ---------------------------------------------------------------------------

    def create_game(
        self,
        game: str,
        game_id: str | None = None,
        seats: dict[str, str] | None = None,
        pin: str | None = None,
        record: bool | str = True,
    ) -> dict[str, Any]:
        if game != self.adapter.name:
            raise Unprocessable(f"this server plays {self.adapter.name!r}, not {game!r}")
        seats = seats or {}
        unknown = set(seats) - set(self.adapter.seats)
        if unknown:
            raise Unprocessable(f"unknown seats {sorted(unknown)}; seats are {self.adapter.seats}")
        mix = self.config.seat_mix
        shift = self.games.created_total % len(mix)
        latest, loaded = self.versions.current, self.versions.versions()
        plan: dict[str, SeatPolicy] = {}
        parse_seat_policy = self.rollout.parser(record)
        for i, seat in enumerate(self.adapter.seats):
            spec = seats.get(seat) or mix[(i + shift) % len(mix)]
            try:
                policy = parse_seat_policy(
                    spec, latest=latest, pin=pin or self.config.pin, loaded=loaded
                )
            except BadPolicySpec as e:
                raise Unprocessable(str(e)) from None
            if policy.kind == "rules" and self._rules is None:
                raise Unprocessable(f"{self.adapter.name!r} has no rules policy")
            if policy.kind == "frozen" and policy.version not in loaded:
                raise Unprocessable(f"version {policy.version} is not loaded; loaded: {loaded}")
            if not record and policy.record:
                policy = SeatPolicy(policy.kind, policy.version, record=False)
            plan[seat] = policy
        game_id = game_id or uuid.uuid4().hex
        recorders = {
            seat: SeatRecorder(game_id, seat, p.label()) for seat, p in plan.items() if p.record
        }
        self.games.add(GameSession(game_id, plan, recorders))
        self.rollout.begin_game(game_id, plan, record)
        return {
            "game_id": game_id,
            "seats": {
                seat: {
                    "policy": p.label(),
                    "version": latest if p.version is None and p.uses_model else p.version,
                }
                for seat, p in plan.items()
            },
        }

    async def decide(
        self, game_id: str, seat: str, state: dict[str, Any], reward: float | None = None
    ) -> Decision:
        step = self._prepare(game_id, seat, state, reward)
        if step.pending is not None:
            await step.pending
        return self._finish(step)

    async def decide_many(
        self, requests: list[tuple[str, str, dict[str, Any], float | None] | Exception]
    ) -> list[Decision | Exception]:
        """Many decisions at once: the learned ones go to the batcher together (one forward
        where versions agree) without a task per item; a failing item fails alone."""
        steps: list[_Step | Exception] = []
        for request in requests:
            if isinstance(request, Exception):
                steps.append(request)
                continue
            try:
                steps.append(self._prepare(*request))
            except CLIENT_ERRORS as e:
                steps.append(e)
        pending = [s.pending for s in steps if isinstance(s, _Step) and s.pending is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return [s if isinstance(s, Exception) else self._finish(s) for s in steps]

    def _prepare(
        self, game_id: str, seat: str, state: dict[str, Any], reward: float | None
    ) -> _Step:
        """Validate and act where no model is needed; queue the model's work otherwise."""
        session = self.games.get(game_id)
        policy = session.seats.get(seat)
        if policy is None:
            raise Unprocessable(f"seat {seat!r} is not in game {game_id!r}")
        if reward is not None and not math.isfinite(reward):
            raise Unprocessable("reward must be a finite number")
        try:
            obs, mask = self.adapter.encode(state)
        except InvalidState as e:
            raise Unprocessable(f"bad state: {e}") from None
        step = _Step(session, seat, policy, state, reward, obs, mask)
        if policy.kind == "rules":
            step.index = self._rules_index(state, mask)
            self.rollout.on_rules_decision(
                game_id, seat, policy, obs, mask, step.index, self.batcher
            )
        elif policy.kind == "random":
            legal = np.flatnonzero(mask)
            step.index = int(legal[self._rng.integers(len(legal))])
        else:
            step.pending = self.batcher.submit(obs, mask, policy.version)
        return step

    def _finish(self, step: _Step) -> Decision:
        version: int | None = None
        if step.pending is not None:
            result = step.pending.result()  # raises what the forward raised
            step.index, version = result.action, result.version
            recorder = step.session.recorders.get(step.seat)
            # An abort or end may have landed while this waited on the batcher: record nothing.
            if recorder is not None and self.games.is_live(step.session.game_id):
                recorder.add_reward(step.reward or 0.0)
                recorder.add_decision(
                    step.obs, step.mask, step.index, result.logp, result.logits, version
                )
        label = step.policy.label()
        self.decisions_by_policy[label] = self.decisions_by_policy.get(label, 0) + 1
        return Decision(
            self.adapter.action_value(step.index, step.state), step.index, label, version
        )

    def end_game(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        session = self.games.get(game_id)
        missing = set(session.seats) - set(payoffs)
        extra = set(payoffs) - set(session.seats)
        if missing or extra:
            raise Unprocessable(
                f"payoffs must name every seat exactly: missing {sorted(missing)}, "
                f"unknown {sorted(extra)}"
            )
        if not all(math.isfinite(v) for v in payoffs.values()):
            raise Unprocessable("payoffs must be finite numbers")
        self.games.finish(game_id)
        self.rollout.on_end(game_id, payoffs)
        recorded = 0
        terminal = self.adapter.terminal_observation()
        for seat, recorder in session.recorders.items():
            episode = recorder.close(float(payoffs[seat]), terminal)
            if episode is not None:
                self.outbox.put(episode)
                recorded += 1
        return {"game_id": game_id, "episodes": recorded}

    def abort_game(self, game_id: str) -> None:
        self.games.discard(game_id)
        self.rollout.on_abort(game_id)

    # --- views ---------------------------------------------------------------------------

    def policies(self) -> dict[str, Any]:
        return {
            "game": self.adapter.describe(),
            "seat_mix": self.config.seat_mix,
            "pin": self.config.pin,
            "policies": {
                "rules": {"available": self._rules is not None},
                "random": {"available": True},
                "learned": {
                    "available": True,
                    "latest": self.versions.latest,
                    "versions": self.versions.versions(),
                    "production": self.rollout.channels.production,
                    "model": self.versions.spec.to_dict(),
                },
            },
        }

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "game": self.adapter.name,
            "version": self.versions.latest,
            "games_in_flight": len(self.games),
            "games_created": self.games.created_total,
            "decisions": dict(self.decisions_by_policy),
            "batcher": self.batcher.stats(),
            "episodes": self.outbox.stats(),
        }

    # --- internals -----------------------------------------------------------------------

    def _rules_index(self, state: dict[str, Any], mask: np.ndarray) -> int:
        assert self._rules is not None
        try:
            value = self._rules(state)
            index = self.adapter.action_index(value, state)
        except (InvalidState, KeyError, TypeError, ValueError, IndexError) as e:
            raise Unprocessable(f"the rules policy could not act on this state: {e}") from None
        if not mask[index]:
            raise Unprocessable(f"the rules policy chose an illegal action {value!r}")
        return index
