"""The decision service: what the HTTP routes call. Knows nothing of HTTP.

Errors are raised as the exceptions below (and those of `games.py`); the API layer maps each to
its status code, so every client mistake has a clear 4xx and none reaches a 500.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

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
from croupier.sessions.guards import Overloaded, QuotaExceeded, TurnConflict
from croupier.trajectories.offline import OfflineWriter
from croupier.trajectories.recorder import MAX_EPISODE_STEPS, SeatRecorder
from croupier.trajectories.spool import EpisodeSpool

T = TypeVar("T")


class Unprocessable(ValueError):
    """The request is well-formed JSON but makes no sense for this game (422)."""


CLIENT_ERRORS = (
    GameNotFound,
    GameEnded,
    GameExists,
    Unprocessable,
    TurnConflict,
    Overloaded,
    QuotaExceeded,
)


@dataclass(slots=True)
class Decision:
    action: Any
    action_index: int
    policy: str
    version: int | None
    # The learned policy missed its deadline or failed: the fallback policy answered.
    fallback: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "action_index": self.action_index,
            "policy": self.policy,
            "version": self.version,
            "fallback": self.fallback,
        }


@dataclass(slots=True)
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
    # The learned policy decides: through the batcher's queue (`pending`, a lone decide) or,
    # for a batch request's items, forwarded at once (`model`; None: the model failed).
    learned: bool = False
    pending: asyncio.Future[ModelDecision | None] | None = None
    model: ModelDecision | None = None
    # Idempotent turns: the decision of this (game, seat, turn), once known.
    turn_result: asyncio.Future[Decision] | None = None
    replay: bool = False


_NO_OBS = np.zeros(0, np.float32)


def _each(items: list[Any], act: Callable[[Any], T]) -> list[T | Exception]:
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


def _model_result(future: asyncio.Future[ModelDecision | None]) -> ModelDecision | None:
    """The model's answer, or None when it was late or failed (the fallback answers then)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()


class DecisionService:
    def __init__(
        self,
        config: ServerConfig,
        adapter: GameAdapter,
        versions: PolicyVersions,
        batcher: InferenceBatcher,
        outbox: EpisodeSpool,
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
        self.fallbacks = 0
        self.turn_replays = 0
        self.refused_overload = 0
        self.refused_quota = 0
        self.refused_too_large = 0
        self.expired_games = 0
        # Learned seats' episodes cut at the trainer's length limit (shipped truncated).
        self.max_episode_steps = MAX_EPISODE_STEPS
        self.episodes_cut = 0
        # Production channel, canary, shadow, league seats and rules recording.
        self.rollout = Rollout(
            versions,
            Channels(versions, config.resolved_weights_dir()),
            config.canary_share,
            config.resolved_weights_dir(),
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
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Start a game; `owner` (the API key's label) counts it against that key's quota."""
        if game != self.adapter.name:
            raise Unprocessable(f"this server plays {self.adapter.name!r}, not {game!r}")
        if len(self.games) >= self.config.max_games:
            self.refused_overload += 1
            raise Overloaded(f"{len(self.games)} games in flight, the server's limit")
        quota = self.config.max_games_per_key
        if quota is not None and owner is not None and self.games.owned(owner) >= quota:
            self.refused_quota += 1
            raise QuotaExceeded(f"this key has {quota} games in flight, its limit")
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
        self.games.add(GameSession(game_id, plan, recorders, owner=owner))
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
        self,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        reward: float | None = None,
        turn: int | None = None,
    ) -> Decision:
        step = self._prepare(game_id, seat, state, reward, turn)
        if step.replay:
            return await self._replay(step, game_id, seat, state, reward, turn)
        try:
            if step.pending is not None and not step.pending.done():
                # The batcher answers every request: the model's answer, None when its deadline
                # passed first, or the model's error (`_finish` sends those two to the fallback).
                # A plain await: no timer, waiter or callback here (they were ~10% of a learned
                # decide's CPU), and try/except is cheaper than contextlib.suppress.
                try:  # noqa: SIM105
                    await step.pending
                except Exception:
                    pass
            return self._finish(step)
        finally:
            self._forget_unfinished_turn(step)

    async def decide_many(
        self,
        requests: list[
            tuple[str, str, dict[str, Any], float | None]
            | tuple[str, str, dict[str, Any], float | None, int | None]
            | Exception
        ],
    ) -> list[Decision | Exception]:
        """Many decisions at once: the learned ones are forwarded together right away (one
        forward where versions agree) without a task or a future per item; a failing item
        fails alone."""
        queued = self.batcher.queued  # batch items are not queued: it stays this long
        steps = _each(requests, lambda request: self._prepare(*request, queued=queued))
        learned = [s for s in steps if isinstance(s, _Step) and s.learned]
        replays = [s.turn_result for s in steps if isinstance(s, _Step) and s.replay]
        try:
            if learned:
                self._forward_now(learned)
            # New turns first: a retry in this same batch waits on one of them.
            out = [self._finish(s) if type(s) is _Step and not s.replay else s for s in steps]
            waiting = [r for r in replays if r is not None and not r.done()]
            if waiting:
                await asyncio.wait(waiting)
            return [self._replayed(o) if type(o) is _Step else o for o in out]
        finally:
            for s in steps:
                if isinstance(s, _Step):
                    self._forget_unfinished_turn(s)

    def _forward_now(self, steps: list[_Step]) -> None:
        try:
            models = self.batcher.forward_now([(s.obs, s.mask, s.policy.version) for s in steps])
        except Exception:  # a broken model: the fallback answers (`_finish`), as for a decide
            return
        for step, model in zip(steps, models, strict=True):
            step.model = model

    @staticmethod
    def _replayed(step: _Step) -> Decision | Exception:
        """A retried turn's answer in a batch: the first request's decision."""
        assert step.replay and step.turn_result is not None
        if step.turn_result.cancelled():
            return TurnConflict("the first request for this turn was abandoned; retry")
        return step.turn_result.result()

    async def _replay(
        self,
        step: _Step,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        reward: float | None,
        turn: int | None,
    ) -> Decision:
        """A retried turn: the first request's answer (waiting for it if still running)."""
        assert step.turn_result is not None
        await asyncio.wait([step.turn_result])
        if step.turn_result.cancelled():  # the first request went away unanswered: decide now
            return await self.decide(game_id, seat, state, reward, turn)
        return step.turn_result.result()

    def _prepare(
        self,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        reward: float | None,
        turn: int | None = None,
        queued: int | None = None,
    ) -> _Step:
        """Validate and act where no model is needed; queue the model's work otherwise.
        A batch request's items pass `queued` (the queue's length: they are forwarded
        together, unqueued); a lone decide does not (it is queued)."""
        session = self.games.get(game_id)
        policy = session.seats.get(seat)
        if policy is None:
            raise Unprocessable(f"seat {seat!r} is not in game {game_id!r}")
        if turn is not None:
            replay = self._check_turn(session, seat, turn, state, reward)
            if replay is not None:
                self.turn_replays += 1
                return _Step(session, seat, policy, state, reward, _NO_OBS, _NO_OBS,
                             turn_result=replay, replay=True)  # fmt: skip
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
            step.index = self._random_index(mask)
        else:
            waiting = self.batcher.queued if queued is None else queued
            if waiting >= self.config.max_queued_decisions:
                self.refused_overload += 1
                raise Overloaded(f"{waiting} decisions wait for the model")
            step.learned = True
            if queued is None:
                step.pending = self.batcher.submit(obs, mask, policy.version)
        if turn is not None:
            step.turn_result = asyncio.get_running_loop().create_future()
            session.last_turn = (turn, seat, step.turn_result, state, reward)
        return step

    @staticmethod
    def _check_turn(
        session: GameSession, seat: str, turn: int, state: dict[str, Any], reward: float | None
    ) -> asyncio.Future[Decision] | None:
        """The earlier answer when this is a retry of the game's last turn; 409 when the turn
        is not new, or is a "retry" whose state or reward differ from the original's (its
        answer was chosen under another legal set: replaying it could be illegal now);
        None when the turn is new."""
        if session.last_turn is None:
            return None
        last_turn, last_seat, result, last_state, last_reward = session.last_turn
        if turn == last_turn and seat == last_seat:
            # A real retry resends the same body: a dict comparison, paid by retries only.
            if state != last_state or reward != last_reward:
                raise TurnConflict(
                    f"turn {turn} for seat {seat!r} was already decided for another state or "
                    "reward; a retry must resend the original request (or use a new turn)"
                )
            return result
        if turn <= last_turn:
            raise TurnConflict(
                f"turn {turn} for seat {seat!r} is out of order: the game's last turn is "
                f"{last_turn} (seat {last_seat!r})"
            )
        return None

    def _forget_unfinished_turn(self, step: _Step) -> None:
        """A request that ends without an answer (cancelled, failed) must not leave its turn
        waiting forever: a retry decides afresh."""
        result = step.turn_result
        if result is None or step.replay or result.done():
            return
        result.cancel()
        last = step.session.last_turn
        if last is not None and last[2] is result:
            step.session.last_turn = None

    def _finish(self, step: _Step) -> Decision:
        version: int | None = None
        fallback = False
        label = step.policy.label()
        if step.learned:
            model = step.model if step.pending is None else _model_result(step.pending)
            if model is None:
                fallback = True
                self.fallbacks += 1
                step.index, label = self._fallback_index(step.state, step.mask)
            else:
                step.index, version = model.action, model.version
                recorder = step.session.recorders.get(step.seat)
                # An abort or end may have landed while this waited on the batcher: record
                # nothing. A fallback step above is not the learned policy's: never recorded.
                if recorder is not None and self.games.is_live(step.session.game_id):
                    recorder.add_reward(step.reward or 0.0)
                    if len(recorder) >= self.max_episode_steps:
                        recorder = self._cut_episode(step, recorder)
                    recorder.add_decision(
                        step.obs, step.mask, step.index, model.logp, model.logits, version
                    )
        self.decisions_by_policy[label] = self.decisions_by_policy.get(label, 0) + 1
        decision = Decision(
            self.adapter.action_value(step.index, step.state), step.index, label, version, fallback
        )
        if step.turn_result is not None and not step.turn_result.done():
            step.turn_result.set_result(decision)
        return decision

    def _cut_episode(self, step: _Step, recorder: SeatRecorder) -> SeatRecorder:
        """The seat's episode reached the trainer's limit: spool it truncated, begin anew."""
        fresh = recorder.cut(step.obs, step.mask)
        step.session.recorders[step.seat] = fresh
        if recorder.truncated is not None:
            self.outbox.put_many([recorder.truncated])
            self.episodes_cut += 1
        return fresh

    def _fallback_index(self, state: dict[str, Any], mask: np.ndarray) -> tuple[int, str]:
        if self.config.fallback == "rules" and self._rules is not None:
            try:
                return self._rules_index(state, mask), "rules"
            except Unprocessable:
                pass  # the rules cannot act here: random still can
        return self._random_index(mask), "random"

    def _random_index(self, mask: np.ndarray) -> int:
        legal = np.flatnonzero(mask)
        return int(legal[self._rng.integers(len(legal))])

    def end_game(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        ended, episodes = self._close_game(game_id, payoffs)
        self.outbox.put_many(episodes)
        return ended

    def end_games(self, items: list[tuple[str, dict[str, float]] | Exception]) -> list[Any]:
        """Many games closed at once: their episodes reach the spool in one transaction
        (before the answer, as for one game); a failing item fails alone."""
        episodes: list[dict[str, Any]] = []

        def close(item: tuple[str, dict[str, float]]) -> dict[str, Any]:
            ended, recorded = self._close_game(*item)
            episodes.extend(recorded)
            return ended

        results = _each(items, close)
        self.outbox.put_many(episodes)
        return results

    def create_games(
        self, items: list[dict[str, Any] | Exception], owner: str | None = None
    ) -> list[Any]:
        """Many `create_game`s; each item's outcome (or its error) in order."""
        return _each(items, lambda item: self.create_game(**item, owner=owner))

    def _close_game(
        self, game_id: str, payoffs: dict[str, float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
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
        episodes = []
        terminal = self.adapter.terminal_observation()
        for seat, recorder in session.recorders.items():
            episode = recorder.close(float(payoffs[seat]), terminal)
            if episode is not None:
                episodes.append(episode)
        return {"game_id": game_id, "episodes": len(episodes)}, episodes

    def abort_game(self, game_id: str) -> None:
        self.games.discard(game_id)
        self.rollout.on_abort(game_id)

    def count_too_large(self) -> None:
        self.refused_too_large += 1

    def expire_idle_games(self, idle_s: float) -> int:
        """Abort games nobody has touched for `idle_s` seconds (recording nothing)."""
        expired = self.games.idle_game_ids(idle_s)
        for game_id in expired:
            self.games.discard(game_id)
        self.expired_games += len(expired)
        return len(expired)

    def warm_up(self) -> None:
        """One forward before serving: the first call into torch is slow (lazy init), and
        it must not eat the first real decisions' deadline. The rules policy likewise."""
        obs = np.zeros((1, self.adapter.obs_size), np.float32)
        mask = np.ones((1, self.adapter.num_actions), np.float32)
        self.batcher.warm_up(obs, mask)
        if self._rules is not None and not self.config.rules:
            self.adapter.warm_up()

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
            "fallbacks": self.fallbacks,
            "turn_replays": self.turn_replays,
            "refused_overload": self.refused_overload,  # 503s
            "refused_quota": self.refused_quota,  # 429s: a key's games-in-flight cap
            "refused_too_large": self.refused_too_large,  # 413s
            "expired_games": self.expired_games,
            "episodes_cut": self.episodes_cut,  # truncated at the trainer's length limit
            "weights_refused": self.versions.refused_nonfinite,  # NaN/inf versions not installed
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
