"""Deciding: one seat's action for one state, by the rules, at random or by the learned policy.

A decision takes one of five explicit paths (`StepPath`), chosen when it is prepared:
- ANSWERED: rules or random acted at once;
- QUEUED: a lone decide for the learned policy waits on the batcher's queue (`pending`);
- FORWARDED: a batch request's learned items are forwarded together, unqueued (`model`);
- SEARCHED: a search seat's decision runs in the search pool (`search`), off the event loop,
  within the seat's deadline; past it the base policy's move answers (`"fallback": true`);
- REPLAY: a retried turn, answered by the first request's decision (`turns.TurnLedger`).
A learned step whose model was late or failed is answered by the fallback policy and not
recorded: it ends the seat's episode fragment there (`_end_fragment`), and the seat's next
learned decision begins a new one; so does a step past the recording budget (`_record`).

A forced move (one legal action) of a model's seat is ANSWERED at once, with no forward, and
not recorded: there is nothing to choose, so nothing to learn (its log-probability is 0 and
its gradient none), and RLCard's UNO offers one legal action in ~61% of decisions. The reward
that arrives with it is added to the seat's last recorded step, as any reward between two of
its decisions is. An engine may equally apply forced moves itself (docs/adapter.md).

Why ~790 lines in one module: the five paths share one step record and end in one `_finish`,
which counts, records and answers; split, a path's recording would be read apart from the
answer it belongs to.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from croupier import stages
from croupier.config import ServerConfig
from croupier.games.base import GameAdapter, InvalidState
from croupier.policies.rollout import Rollout
from croupier.policies.search import SearchResult
from croupier.policies.search_pool import SearchSeats
from croupier.policies.seats import (
    BEST_RESPONSE,
    SEARCH,
    SEARCH_BASES,
    SeatPolicy,
    SeatUnavailable,
    search_label_spec,
)
from croupier.sessions.batcher import InferenceBatcher, ModelDecision
from croupier.sessions.errors import CLIENT_ERRORS, Unprocessable
from croupier.sessions.games import GameSession, GameStore
from croupier.sessions.guards import Overloaded
from croupier.sessions.labels import DecisionCounts
from croupier.sessions.turns import TurnLedger
from croupier.trajectories.recorder import (
    MAX_EPISODE_STEPS,
    RecordingBudget,
    SeatRecorder,
    step_nbytes,
)
from croupier.trajectories.spool import EpisodeSpool

Rules = Any  # the game's rules policy: state -> the engine's action value


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

    def to_batch_item(self) -> dict[str, Any]:
        """`to_dict()` as a `decide:batch` answer's item (`outcome` tells it from an error).
        Spelt out, not `to_dict()` extended (~0.14 us more of a ~35 us item, in-process);
        `tests/test_fast_lane.py` holds both answers to their documented models."""
        return {
            "action": self.action,
            "action_index": self.action_index,
            "policy": self.policy,
            "version": self.version,
            "fallback": self.fallback,
            "outcome": "ok",
            "error": None,
        }


class StepPath(enum.Enum):
    ANSWERED = "answered"
    QUEUED = "queued"
    FORWARDED = "forwarded"
    SEARCHED = "searched"
    REPLAY = "replay"


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
    path: StepPath
    index: int = -1  # ANSWERED: the action; the learned paths set it in `_finish`
    forced_version: int | None = None  # ANSWERED forced move of a model's seat: its version
    pending: asyncio.Future[ModelDecision | None] | None = None  # QUEUED
    model: ModelDecision | None = None  # FORWARDED (None: the model failed)
    untrained: bool = False  # no trained version yet: the fallback answers (`_untrained`)
    search: asyncio.Future[SearchResult | None] | None = None  # SEARCHED
    # A recorded learned step a search labels (expert iteration): its search, run beside the
    # model's forward; its choice is recorded with the step (`SeatRecorder.label`).
    teacher: asyncio.Future[SearchResult | None] | None = None
    started: float = 0.0  # SEARCHED: when the decision was received (`time.monotonic()`)
    # With a turn: this turn's answer (REPLAY: the first request's, awaited, never set).
    turn_result: asyncio.Future[Decision] | None = None


_NO_OBS = np.zeros(0, np.float32)
# A `decide:batch`'s candidate features (`encode_many`) are built on the event loop while they
# are at most this much work, and on the forward thread beyond, in candidates, a state counted
# as `ENCODE_STATE_CANDIDATES` (measured on this 2-core box, doudizhu: ~100 us a state plus
# 2-6 us a candidate, so at most ~20-40 ms of the loop). The review's batch of 572 380-move
# states held the loop 0.3-1.9 s building them; `bench serve`'s 64 real doudizhu states
# (~20-50 moves each, ~5,000) stay inline, without the thread's round trip.
ENCODE_INLINE_MAX = 8192
ENCODE_STATE_CANDIDATES = 32
# Seat kinds that need no model (a search seat's workers play the rules, not a model).
_ANSWERED_HERE = ("rules", "random", BEST_RESPONSE, SEARCH)
_ANSWERED, _QUEUED, _FORWARDED, _SEARCHED, _REPLAY = StepPath


def _encode_work(states: list[Any]) -> int:
    """A batch's features' cost in candidates (`ENCODE_INLINE_MAX`): each state's listed moves,
    plus `ENCODE_STATE_CANDIDATES` a state. A state without a list counts as none: the
    adapter refuses it."""
    work = ENCODE_STATE_CANDIDATES * len(states)
    for state in states:
        legal = state.get("legal_actions", state.get("actions")) if type(state) is dict else None
        if type(legal) is list:
            work += len(legal)
    return work


def _own(rows: np.ndarray) -> np.ndarray:
    """`rows` itself, or a copy when it is a view into a bigger array (a batch's). A base
    that is not an array (ONNX Runtime's output of a lone decision) holds just these rows."""
    base = rows.base
    return rows.copy() if isinstance(base, np.ndarray) and base.nbytes > rows.nbytes else rows


def _model_result(future: asyncio.Future[ModelDecision | None]) -> ModelDecision | None:
    """The model's answer, or None when it was late or failed (the fallback answers then)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()


class Decider:
    def __init__(
        self,
        config: ServerConfig,
        adapter: GameAdapter,
        games: GameStore,
        batcher: InferenceBatcher,
        rollout: Rollout,
        outbox: EpisodeSpool,
        rules: Rules | None,
        budget: RecordingBudget | None = None,
        search: SearchSeats | None = None,
    ):
        self.config = config
        self.adapter = adapter
        self.games = games
        self.batcher = batcher
        self.rollout = rollout
        self.outbox = outbox  # for episodes cut at the trainer's length limit
        self.rules = rules
        self.turns: TurnLedger[Decision] = TurnLedger()
        self._rng = np.random.default_rng(config.seed)
        # By seat label, a bounded set of labels (`labels.py`: engines choose the tunings).
        self.labels = DecisionCounts()
        self.decisions_by_policy = self.labels.counts
        self.fallbacks = 0
        self.refused_overload = 0  # decisions refused: too many wait for the model
        self.refused_rewards = 0  # decisions refused: a reward beyond the game's payoffs
        # Learned seats' episodes cut at the trainer's length limit (shipped truncated).
        self.max_episode_steps = MAX_EPISODE_STEPS
        self.episodes_cut = 0
        # Learned seats' episodes ended (truncated) by a fallback decision.
        self.episodes_ended_by_fallback = 0
        self.forced_moves = 0  # a model's seat with one legal action: answered, not recorded
        # A model's seat answered by the fallback before the trainer's first version arrived.
        self.before_first_version = 0
        # Bytes recorders may hold (None: unbounded); steps past it answered, not recorded.
        self.budget = budget
        # Search seats (`policies/search_pool.py`), counted by base policy (a bounded label:
        # a seat's full spec is the engine's to choose).
        self.search = search
        # Every base's series from the start (at 0): an alert's rate() sees the first one.
        self.search_decisions: dict[str, int] = dict.fromkeys((*SEARCH_BASES, "version"), 0)
        self.search_fallbacks: dict[str, int] = dict.fromkeys((*SEARCH_BASES, "version"), 0)
        # Expert iteration: the search that labels a share of the learned seats' recorded
        # decisions (`--search-labels`), and its count of labels given and missed (late, or
        # the workers not warm yet).
        self.label_spec = (
            None if config.search_labels is None else search_label_spec(config.search_labels)
        )
        self.labels_given = 0
        self.labels_missed = 0
        # Searches that kept their base's move, not labelled under --search-label-departures.
        self.labels_kept_base = 0
        self.search_late = 0  # answered past the seat's deadline (the tests hold it at 0)
        self.search_seconds = 0.0  # received to answered, summed over search decisions
        self.search_max_ms = 0.0

    async def decide(
        self,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        reward: float | None = None,
        turn: int | None = None,
    ) -> Decision:
        step = self._prepare(game_id, seat, state, reward, turn)
        if step.path is _REPLAY:
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
            if step.search is not None:
                await step.search  # answers by the seat's deadline, never raises
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
        encoded = await self._encode_for_model(requests)
        # `each`'s loop written out: its lambda cost ~0.4 us of a ~35 us batch item.
        steps: list[_Step | Exception] = []
        for i, request in enumerate(requests):
            if isinstance(request, Exception):
                steps.append(request)
                continue
            try:
                steps.append(self._prepare(*request, queued=queued, encoded=encoded.get(i)))
            except CLIENT_ERRORS as e:
                steps.append(e)
        forwarded = [s for s in steps if isinstance(s, _Step) and s.path is _FORWARDED]
        replays = [s.turn_result for s in steps if isinstance(s, _Step) and s.path is _REPLAY]
        try:
            if forwarded:
                await self._forward_now(forwarded)
            searching = [
                f
                for s in steps
                if type(s) is _Step
                if s.search is not None
                for f in (s.search, s.pending)
                if f is not None
            ]
            if searching:  # each answers by its own seat's deadline
                await asyncio.wait(searching)
            # New turns first: a retry in this same batch waits on one of them.
            out = [
                self._finish(s) if type(s) is _Step and s.path is not _REPLAY else s for s in steps
            ]
            waiting = [r for r in replays if r is not None and not r.done()]
            if waiting:
                await asyncio.wait(waiting)
            return [self._replayed(o) if type(o) is _Step else o for o in out]
        finally:
            for s in steps:  # most items carry no turn: no call for them (~0.2 us an item)
                if type(s) is _Step and s.turn_result is not None:
                    self._forget_unfinished_turn(s)

    async def _encode_for_model(
        self, requests: list[Any]
    ) -> dict[int, tuple[np.ndarray, np.ndarray] | InvalidState]:
        """The encodes of a batch request's items a model will score, built together where the
        game can (`encode_many`: doudizhu's features as array operations over all the items),
        by item index, on the forward thread past `ENCODE_INLINE_MAX`; the rest are prepared
        one by one (`_prepare`)."""
        encode_many = getattr(self.adapter, "encode_many", None)
        if encode_many is None:
            return {}
        at, states = [], []
        for i, request in enumerate(requests):
            if isinstance(request, Exception):
                continue
            game_id, seat, state = request[0], request[1], request[2]
            try:
                policy = self.games.get(game_id).seats.get(seat)
            except CLIENT_ERRORS:
                continue  # `_prepare` says what is wrong with it
            if policy is not None and (
                policy.kind not in _ANSWERED_HERE or self.rollout.observes(game_id, seat)
            ):
                at.append(i)
                states.append(state)
        if len(states) < 2:
            return {}
        t0 = stages.clock() if stages.ON else 0
        if _encode_work(states) <= ENCODE_INLINE_MAX:
            built = encode_many(states)
        else:
            built = await self.batcher.off_loop(lambda: encode_many(states))
        encoded = dict(zip(at, built, strict=True))
        if stages.ON:
            stages.add(stages.ENCODE, t0)
        return encoded

    async def _forward_now(self, steps: list[_Step]) -> None:
        """The items' forward: on the event loop, or on the forward thread when it is big (a
        batch of many-move candidate states: `InferenceBatcher.forward_batch`)."""
        try:
            rows = [(s.obs, s.mask, s.policy.version) for s in steps]
            greedy = [s.policy.greedy for s in steps]
            models = await self.batcher.forward_batch(rows, greedy if any(greedy) else None)
        except Exception:  # a broken model: the fallback answers (`_finish`), as for a decide
            return
        for step, model in zip(steps, models, strict=True):
            step.model = model

    def _replayed(self, step: _Step) -> Decision | Exception:
        assert step.path is _REPLAY and step.turn_result is not None
        return self.turns.replayed(step.turn_result)

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
        encoded: tuple[np.ndarray, np.ndarray] | InvalidState | None = None,
    ) -> _Step:
        """Validate and act where no model is needed; queue the model's work otherwise.
        A batch request's items pass `queued` (the queue's length: they are forwarded
        together, unqueued); a lone decide does not (it is queued). `encoded`: the state's
        encode, already built with the batch's others (`_encode_for_model`)."""
        received = time.monotonic()
        session = self.games.get(game_id)
        policy = session.seats.get(seat)
        if policy is None:
            raise Unprocessable(f"seat {seat!r} is not in game {game_id!r}", ("seat",))
        if turn is not None:
            earlier = self.turns.earlier_answer(session, seat, turn, state, reward)
            if earlier is not None:
                return _Step(session, seat, policy, state, reward, _NO_OBS, _NO_OBS, _REPLAY,
                             turn_result=earlier)  # fmt: skip
        if reward is not None and (problem := self.adapter.reward_problem(reward)) is not None:
            self.refused_rewards += 1
            raise Unprocessable(problem, ("reward",))
        t0 = stages.clock() if stages.ON else 0
        try:
            if encoded is not None:
                if isinstance(encoded, InvalidState):
                    raise encoded
                obs, mask = encoded
            elif (
                policy.kind in _ANSWERED_HERE
                and not self.rollout.observes(game_id, seat)
                and (policy.search is None or policy.version is None)  # a version's: encoded
            ):
                # Rules and random act on the state and its legal moves; the observation is
                # for a model or a recording (doudizhu: the features are ~60% of an encode).
                obs, mask = _NO_OBS, self.adapter.check(state)
            else:
                obs, mask = self.adapter.encode(state)
        except InvalidState as e:
            raise Unprocessable(f"bad state: {e}", ("state",)) from None
        if stages.ON:
            stages.add(stages.ENCODE, t0)
        if session.teams is None:
            self._note_teams(session, state)
        if policy.kind == "rules":
            step = _Step(session, seat, policy, state, reward, obs, mask, _ANSWERED)
            step.index = self.rules_index(state, mask)
            self.rollout.on_rules_decision(game_id, seat, policy, obs, mask, step.index)
        elif policy.kind == "random":
            step = _Step(session, seat, policy, state, reward, obs, mask, _ANSWERED)
            step.index = self._random_index(mask)
        elif policy.kind == BEST_RESPONSE:
            step = _Step(session, seat, policy, state, reward, obs, mask, _ANSWERED)
            step.index = self.best_response_index(state, mask)
        elif policy.kind == SEARCH:
            step = self._searched(session, seat, policy, state, reward, obs, mask, received)
        elif self._untrained(policy):
            # No model answers: `_finish` gives the fallback's move (the rules), unrecorded.
            step = _Step(session, seat, policy, state, reward, obs, mask, _QUEUED)
            step.untrained = True
        elif policy.rules_share and self._rng.random() < policy.rules_share:
            # A tier's (or a `:rules=P` seat's) share of the rules: they act, no forward.
            step = _Step(session, seat, policy, state, reward, obs, mask, _ANSWERED)
            step.index = self.rules_index(state, mask)
        elif self.adapter.legal_count(mask) == 1:
            step = _Step(session, seat, policy, state, reward, obs, mask, _ANSWERED)
            step.index = int(self.adapter.legal_indices(mask)[0])
            step.forced_version = (
                policy.version if policy.version is not None else self.batcher.versions.latest
            )
        else:
            waiting = self.batcher.queued if queued is None else queued
            if waiting >= self.config.max_queued_decisions:
                self.refused_overload += 1
                raise Overloaded(f"{waiting} decisions wait for the model")
            if queued is None:
                step = _Step(session, seat, policy, state, reward, obs, mask, _QUEUED)
                step.pending = self.batcher.submit(obs, mask, policy.version, policy.greedy)
            else:
                step = _Step(session, seat, policy, state, reward, obs, mask, _FORWARDED)
            if policy.record and self.label_spec is not None:
                step.teacher = self._label_search(state, received)
        if turn is not None:
            step.turn_result = self.turns.open(session, seat, turn, state, reward)
        return step

    def _label_search(
        self, state: dict[str, Any], received: float
    ) -> asyncio.Future[SearchResult | None] | None:
        """Expert iteration: for a share of the recorded learned decisions, the search's
        choice of the same state, searched while the game goes on: the seat answers the
        model's move at once and the label joins the recorded step when it comes (`_label`).
        Waiting for it instead cut a Hearts training server's throughput ~6x (46 against 300
        trained steps/s beside each other, one worker at ms=100, a quarter labelled). None:
        not this decision, or the search workers are not warm yet (started now)."""
        spec = self.label_spec
        if spec is None or self.search is None:
            return None
        if self._rng.random() >= self.config.search_label_share:
            return None
        try:
            self.search.admit(spec)
        except SeatUnavailable:  # starting (checked searchable when the server started)
            self.labels_missed += 1
            return None
        budget_s = spec.ms / 1000.0 - (time.monotonic() - received)
        return asyncio.ensure_future(self.search.search(state, spec, budget_s))

    def _label(self, step: _Step, recorder: SeatRecorder) -> None:
        """The search's choice joins the step just recorded: now if it came, else when it
        comes (the game's `end` waits for it: `GameSession.pending_labels`)."""
        teacher = step.teacher
        if teacher is None:
            return
        at = len(recorder) - 1
        if teacher.done():
            self._labelled(teacher, step, recorder, at)
            return
        pending = step.session.pending_labels
        pending.add(teacher)

        def labelled(future: asyncio.Future[SearchResult | None]) -> None:
            pending.discard(future)
            self._labelled(future, step, recorder, at)

        teacher.add_done_callback(labelled)

    def _labelled(
        self,
        teacher: asyncio.Future[SearchResult | None],
        step: _Step,
        recorder: SeatRecorder,
        at: int,
    ) -> None:
        result = None if teacher.cancelled() or teacher.exception() else teacher.result()
        if result is None or result.move is None:
            self.labels_missed += 1
            return
        if self.config.search_label_departures and result.move == result.base:
            self.labels_kept_base += 1
            return
        value = step.state["legal_actions"][result.move]
        recorder.label(at, self.adapter.action_index(value, step.state))
        self.labels_given += 1

    def _searched(
        self,
        session: GameSession,
        seat: str,
        policy: SeatPolicy,
        state: dict[str, Any],
        reward: float | None,
        obs: np.ndarray,
        mask: np.ndarray,
        received: float,
    ) -> _Step:
        """A search seat's step: its search started in the pool, to answer by the seat's
        deadline (counted from `received`); a forced move answered at once. Over a version,
        the version's own move is asked of the batcher beside it: the fallback's, ready
        long before the deadline."""
        step = _Step(session, seat, policy, state, reward, obs, mask, _SEARCHED)
        step.started = received
        spec = policy.search
        assert spec is not None and self.search is not None  # admitted at the game's create
        if self.adapter.legal_count(mask) == 1:
            step.index = int(self.adapter.legal_indices(mask)[0])
        else:
            budget_s = spec.ms / 1000.0 - (time.monotonic() - received)
            step.search = asyncio.ensure_future(self.search.search(state, spec, budget_s))
            if policy.version is not None:
                step.pending = self.batcher.submit(obs, mask, policy.version, spec.base_greedy)
        return step

    def _search_answer(self, step: _Step) -> tuple[str, bool]:
        """A search step's move into `step.index`: the search's, or the base policy's when it
        was late or failed (then fallback). Counted by base; returns (label, fallback)."""
        spec = step.policy.search
        assert spec is not None
        label, fallback = step.policy.label(), False
        if step.search is not None:  # not a forced move
            task = step.search
            result = task.result() if task.done() and not task.cancelled() else None
            index = -1
            if result is not None and result.move is not None:
                try:
                    index = self.adapter.action_index(step.state["legal_actions"][result.move],
                                                      step.state)  # fmt: skip
                except (InvalidState, KeyError, TypeError, ValueError, IndexError):
                    index = -1
            if index >= 0 and self.adapter.is_legal(step.mask, index):
                step.index = index
            else:
                fallback = True
                step.index, label = self._base_index(step)
                self.search_fallbacks[spec.counted_base] += 1
        self.search_decisions[spec.counted_base] += 1
        ms = 1000.0 * (time.monotonic() - step.started)
        self.search_seconds += ms / 1000.0
        self.search_max_ms = max(self.search_max_ms, ms)
        self.search_late += ms > spec.ms
        return label, fallback

    def _base_index(self, step: _Step) -> tuple[int, str]:
        """The search's base policy's own move (its fallback): a version's from the batcher,
        else as `_fallback_index` answers (the rules, or random play)."""
        spec, state, mask = step.policy.search, step.state, step.mask
        assert spec is not None
        if step.pending is not None:
            model = _model_result(step.pending)
            if model is not None and self.adapter.is_legal(mask, model.action):
                return model.action, spec.base
        if spec.base != "random" and self.rules is not None:
            try:
                return self.rules_index(state, mask), "rules"
            except Unprocessable:
                pass  # the rules cannot act here: random still can
        return self._random_index(mask), "random"

    def _untrained(self, policy: SeatPolicy) -> bool:
        """Whether `policy` would play this server's own untrained version 0 although the
        server trains (`--trainer`) and its game has rules: until the trainer's first version
        arrives (the rules' clone, distilled in its first minute) the rules answer such a
        seat as a fallback (and go on answering the games pinned to version 0 until they
        end), so players never meet an untrained policy."""
        versions = self.batcher.versions
        zero = policy.version == 0 or (policy.version is None and versions.latest == 0)
        return (zero and versions.placeholder_zero and policy.uses_model
                and self.config.trainer is not None and self.rules is not None
                and self.config.rules_before_first_version)  # fmt: skip

    def _note_teams(self, session: GameSession, state: dict[str, Any]) -> None:
        """Read the game's partners once, from its first valid state (`team_payoffs`)."""
        try:
            session.teams = self.adapter.teams(state) or []
        except InvalidState:
            session.teams = []

    def _forget_unfinished_turn(self, step: _Step) -> None:
        if step.turn_result is not None and step.path is not _REPLAY:
            self.turns.forget_unfinished(step.session, step.turn_result)

    def _finish(self, step: _Step) -> Decision:
        version: int | None = None
        fallback = False
        label = step.policy.label()
        if step.forced_version is not None:
            version = step.forced_version
            self.forced_moves += 1
            self._carry_reward(step)
        elif step.path is _SEARCHED:
            label, fallback = self._search_answer(step)
            version = step.policy.version  # a version base's (None: the rules, random play)
        elif step.path is not _ANSWERED:
            model = step.model if step.pending is None else _model_result(step.pending)
            if model is None:
                fallback = True
                if step.untrained:  # not a failure: counted apart (no page for it)
                    self.before_first_version += 1
                else:
                    self.fallbacks += 1
                step.index, label = self._fallback_index(step.state, step.mask)
                self._end_fragment(step)
            else:
                step.index, version = model.action, model.version
                if step.policy.temperature != 1.0:  # never a recorded seat (`seats.py`)
                    step.index = self._tempered_index(model.logits, step)
                self._record(step, model)
        elif step.policy.uses_model:  # a model's seat the rules answered (its rules share)
            version = step.policy.version
        # A search seat's decisions are counted as `search` (its full spec is the engine's).
        counted = SEARCH if label.startswith(SEARCH) else label
        try:  # the label seen before: one dict update, as before the cap
            self.decisions_by_policy[counted] += 1
        except KeyError:
            self.labels.count_new(counted)
        decision = Decision(
            self.adapter.action_value(step.index, step.state), step.index, label, version, fallback
        )
        if step.turn_result is not None and not step.turn_result.done():
            step.turn_result.set_result(decision)
        return decision

    def _record(self, step: _Step, model: ModelDecision) -> None:
        t0 = stages.clock() if stages.ON else 0
        self._record_step(step, model)
        if stages.ON:
            stages.add(stages.RECORD, t0)

    def _record_step(self, step: _Step, model: ModelDecision) -> None:
        recorder = step.session.recorders.get(step.seat)
        # An abort or end may have landed while this waited on the batcher: record nothing.
        # A fallback step is not the learned policy's: never recorded (not called for it).
        if recorder is None or not self.games.is_live(step.session.game_id):
            return
        recorder.add_reward(step.reward or 0.0)
        if len(recorder) >= self.max_episode_steps:
            recorder = self._cut_episode(step, recorder)
        # A row of the batch's logits (or of a batch request's features, `encode_many`): kept,
        # it would keep the whole batch's (up to 256 x 512 floats for a candidate game) while
        # the budget counts its own bytes only. So the record copies what was built, once.
        logits, obs, mask = _own(model.logits), _own(step.obs), _own(step.mask)
        nbytes = step_nbytes(obs, mask, logits)
        if self.budget is not None and self.budget.refuses(recorder, nbytes):
            # Answered, not recorded: the episode so far ends here, truncated, as where a
            # fallback answered (`_end_fragment`); the next learned decision starts anew.
            if len(recorder):
                self._truncate(step, recorder)
            return
        recorder.add_decision(obs, mask, step.index, model.logp, logits, model.version, nbytes)
        self._label(step, recorder)

    def _carry_reward(self, step: _Step) -> None:
        """A forced move's reward: onto the seat's last recorded step (not a step itself)."""
        recorder = step.session.recorders.get(step.seat)
        if recorder is not None and step.reward and self.games.is_live(step.session.game_id):
            recorder.add_reward(step.reward)

    def _cut_episode(self, step: _Step, recorder: SeatRecorder) -> SeatRecorder:
        """The seat's episode reached the trainer's limit: spool it truncated, begin anew."""
        self.episodes_cut += 1
        return self._truncate(step, recorder)

    def _end_fragment(self, step: _Step) -> None:
        """A fallback answered a learned seat: its episode so far ends here, truncated, with
        the reward received up to this state; the seat's next learned decision starts a new
        fragment (rewards before that decision follow the fallback's action: not the learned
        policy's, so not recorded).

        Why truncate rather than record the fallback as an off-policy step: the learner's
        targets stay right. A truncated fragment bootstraps from V(this state) (RLlib's GAE
        and V-trace both do for a truncated episode), which is what the learned policy's
        return from here is worth; the reward that followed its last action is all on its
        last step. An off-policy step would need a behaviour probability for the rules policy
        (deterministic: log 1, so PPO's ratio pi/1 is far outside its clip range and its
        gradient is cut) and logits it does not have (RLlib's KL term reads them), and GAE
        would sum advantages through an action the learned policy did not choose. Before,
        the step was just skipped: the next reward landed on the previous learned step, and
        its next observation was a state two actions later."""
        recorder = step.session.recorders.get(step.seat)
        if recorder is None or not len(recorder) or not self.games.is_live(step.session.game_id):
            return
        recorder.add_reward(step.reward or 0.0)
        self._truncate(step, recorder)
        self.episodes_ended_by_fallback += 1

    def _truncate(self, step: _Step, recorder: SeatRecorder) -> SeatRecorder:
        """Close the recorder's steps (one at least) as a truncated episode ending at this
        step's state, queue it for the spool, and put a fresh recorder in its place."""
        fresh = recorder.cut(step.obs, step.mask)
        step.session.recorders[step.seat] = fresh
        if recorder.truncated is not None:
            recorder.truncated["hands"] = 0  # a piece of a hand: the hand counts at its end
            recorder.truncated["table"] = step.session.table(step.seat)
            # Off the event loop, unawaited: no answer depends on this fragment's commit.
            self.outbox.write_later([recorder.truncated])
        return fresh

    def _fallback_index(self, state: dict[str, Any], mask: np.ndarray) -> tuple[int, str]:
        if self.config.fallback == "rules" and self.rules is not None:
            try:
                return self.rules_index(state, mask), "rules"
            except Unprocessable:
                pass  # the rules cannot act here: random still can
        return self._random_index(mask), "random"

    def _tempered_index(self, logits: np.ndarray, step: _Step) -> int:
        """An action drawn from softmax(logits / T) over the legal actions (a tier's or a
        `:temp=T` seat's temperature T)."""
        legal = self.adapter.legal_indices(step.mask)
        row = np.asarray(logits, np.float64)[legal] / step.policy.temperature
        probs = np.exp(row - row.max())
        drawn = np.searchsorted(np.cumsum(probs), self._rng.random() * probs.sum(), side="right")
        return int(legal[min(int(drawn), len(legal) - 1)])

    def _random_index(self, mask: np.ndarray) -> int:
        legal = self.adapter.legal_indices(mask)  # a candidate game: 0..K-1
        return int(legal[self._rng.integers(len(legal))])

    def best_response_index(self, state: dict[str, Any], mask: np.ndarray) -> int:
        """The best response's action (`policies/best_response.py`); the rules answer a state
        its table lacks, or where it would pick a move the adapter masks (a costless fold
        where checking is free, under `LeducNoFreeFoldAdapter`: a tie it breaks by order)."""
        seat = self.rollout.best_response
        value = None if seat is None else seat.act(state)
        if value is not None:
            try:
                index = self.adapter.action_index(value, state)
                if self.adapter.is_legal(mask, index):
                    return index
            except (InvalidState, KeyError, TypeError, ValueError, IndexError):
                pass
            if seat is not None:
                seat.missed += 1
        return self.rules_index(state, mask)

    def rules_index(self, state: dict[str, Any], mask: np.ndarray) -> int:
        assert self.rules is not None
        t0 = stages.clock() if stages.ON else 0
        try:
            value = self.rules(state)
            index = self.adapter.action_index(value, state)
        except (InvalidState, KeyError, TypeError, ValueError, IndexError) as e:
            raise Unprocessable(
                f"the rules policy could not act on this state: {e}", ("state",)
            ) from None
        finally:
            if stages.ON:
                stages.add(stages.RULES, t0)
        if not self.adapter.is_legal(mask, index):
            raise Unprocessable(f"the rules policy chose an illegal action {value!r}", ("state",))
        return index
