"""The turn ledger: idempotent decides. A decide that names its `turn` is answered once; a
retry of the game's last turn (same seat, state and reward) gets the first answer, waiting for
it if it is still being decided; anything else at or before the last turn is a 409."""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from croupier.sessions.games import GameSession
from croupier.sessions.guards import TurnConflict

D = TypeVar("D")  # the decision a turn's future carries


class TurnLedger(Generic[D]):
    def __init__(self) -> None:
        self.replays = 0

    def earlier_answer(
        self,
        session: GameSession,
        seat: str,
        turn: int,
        state: dict[str, Any],
        reward: float | None,
    ) -> asyncio.Future[D] | None:
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
            self.replays += 1
            return result
        if turn <= last_turn:
            raise TurnConflict(
                f"turn {turn} for seat {seat!r} is out of order: the game's last turn is "
                f"{last_turn} (seat {last_seat!r})"
            )
        return None

    @staticmethod
    def open(
        session: GameSession, seat: str, turn: int, state: dict[str, Any], reward: float | None
    ) -> asyncio.Future[D]:
        """A new turn: its answer, once decided, answers its retries."""
        result: asyncio.Future[D] = asyncio.get_running_loop().create_future()
        session.last_turn = (turn, seat, result, state, reward)
        return result

    @staticmethod
    def forget_unfinished(session: GameSession, result: asyncio.Future[D]) -> None:
        """A request that ends without an answer (cancelled, failed) must not leave its turn
        waiting forever: a retry decides afresh."""
        if result.done():
            return
        result.cancel()
        last = session.last_turn
        if last is not None and last[2] is result:
            session.last_turn = None

    @staticmethod
    def replayed(result: asyncio.Future[D]) -> D | Exception:
        """A retried turn's answer in a batch: the first request's decision."""
        if result.cancelled():
            return TurnConflict("the first request for this turn was abandoned; retry")
        return result.result()
