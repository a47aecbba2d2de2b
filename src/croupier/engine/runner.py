"""The reference engine: a game's simulator tables playing hands through a croupier server.

`games` tables run concurrently, one asyncio task each. A table loops: open a game, play one
hand by asking the server for every decision, report the payoffs, repeat, until the run's
hand budget or time budget is spent. Each hand's payoff is credited to the policy that sat
in each seat, giving a mean payoff per policy with a 95% confidence interval. Any game with
a simulator plays (`games/registry.py` `load_simulator`: the built-in RLCard games, or
`package.module:Simulator`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from croupier.client import CroupierClient, CroupierError, Deadlines
from croupier.engine.batching import BatchingClient
from croupier.engine.rlcard_games import UnknownGame
from croupier.games.registry import load_simulator
from croupier.games.simulator import Simulator
from croupier.routing import RoutedClient, client_for_urls
from croupier.stats import ci95

log = logging.getLogger(__name__)

SEATS = ("0", "1")  # a two-player game's seats (a simulator's own: `Simulator.seats`)
# A guard, not a rule: far above any real hand (Leduc <= 8 decisions, UNO ~ tens to hundreds).
MAX_DECISIONS_PER_HAND = 10_000
MAX_DEALS_PER_TABLE = 2**31
PROGRESS_EVERY_S = 2.0
_MAX_ERROR_SAMPLES = 5


class HandError(Exception):
    """A hand that cannot go on (bad response, illegal action): abort it, count it."""


# What ends one hand (counted, the others play on): shared with the arena.
HAND_ERRORS = (CroupierError, HandError, aiohttp.ClientError, TimeoutError)


@dataclass
class PolicyStats:
    n: int
    mean: float
    ci95: float  # half-width: stats.ci95


@dataclass
class EngineSummary:
    game: str
    hands: int
    decisions: int
    seconds: float
    decisions_per_s: float
    hands_per_s: float
    errors: int
    policies: dict[str, PolicyStats] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    # Games with named sides (doudizhu): "policy as side" -> its mean payoff per game (doudizhu
    # pays 1 won / 0 lost: the side's win rate), each game counted once per side.
    sides: dict[str, PolicyStats] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format_table(self) -> str:
        lines = [
            f"{self.game}: {self.hands} hands, {self.decisions} decisions in "
            f"{self.seconds:.1f} s ({self.hands_per_s:.1f} hands/s, "
            f"{self.decisions_per_s:.1f} decisions/s), {self.errors} errors",
            f"{'policy':<20} {'n':>8} {'mean':>9} {'±95%':>8}",
        ]
        for name, s in sorted(self.policies.items()):
            lines.append(f"{name:<20} {s.n:>8} {s.mean:>+9.4f} {s.ci95:>8.4f}")
        if self.sides:
            lines.append(f"{'policy as side':<28} {'games':>8} {'mean':>9} {'±95%':>8}")
        for name, s in sorted(self.sides.items()):
            lines.append(f"{name:<28} {s.n:>8} {s.mean:>9.4f} {s.ci95:>8.4f}")
        lines += [f"error: {e}" for e in self.error_samples]
        return "\n".join(lines)


class _Running:
    """Welford's running mean/variance, so long runs need no per-hand list."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def stats(self) -> PolicyStats:
        std = math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0
        return PolicyStats(self.n, self.mean, ci95(std, self.n))


class _Tally:
    """Shared by all tables. asyncio runs one task at a time, so no lock."""

    def __init__(self, game: str, hands: int | None, seconds: float | None):
        self.game = game
        self.t0 = time.monotonic()
        self.deadline = None if seconds is None else self.t0 + seconds
        self.budget = hands
        self.started = 0  # hand slots handed out, failed ones included, so every loop ends
        self.hands = 0
        self.decisions = 0
        self.errors = 0
        self.error_samples: list[str] = []
        self.per_policy: dict[str, _Running] = {}
        self.per_side: dict[str, _Running] = {}

    def claim(self) -> int | None:
        """The next hand's number, or None when the run's budget is spent."""
        if self.budget is not None and self.started >= self.budget:
            return None
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return None
        self.started += 1
        return self.started - 1

    def record(
        self, policies: dict[str, str], payoffs: list[float], roles: list[str] | None = None
    ) -> None:
        self.hands += 1
        for seat, payoff in enumerate(payoffs):
            self.per_policy.setdefault(policies[str(seat)], _Running()).add(payoff)
        if roles is not None:  # one sample per (policy, side) and game: partners share it
            sides: dict[str, list[float]] = {}
            for seat, (payoff, role) in enumerate(zip(payoffs, roles, strict=True)):
                sides.setdefault(f"{policies[str(seat)]} as {role}", []).append(payoff)
            for name, values in sides.items():
                self.per_side.setdefault(name, _Running()).add(sum(values) / len(values))

    def error(self, e: BaseException) -> None:
        self.errors += 1
        sample = f"{type(e).__name__}: {e}"
        if len(self.error_samples) < _MAX_ERROR_SAMPLES and sample not in self.error_samples:
            self.error_samples.append(sample)

    def summary(self) -> EngineSummary:
        secs = max(time.monotonic() - self.t0, 1e-9)
        return EngineSummary(
            game=self.game,
            hands=self.hands,
            decisions=self.decisions,
            seconds=secs,
            decisions_per_s=self.decisions / secs,
            hands_per_s=self.hands / secs,
            errors=self.errors,
            policies={k: r.stats() for k, r in self.per_policy.items()},
            error_samples=list(self.error_samples),
            sides={k: r.stats() for k, r in self.per_side.items()},
        )


def _seat_policies(resp: Any, seats: list[str]) -> tuple[str, dict[str, str]]:
    """(game_id, {seat: policy}) from a create_game response, checked."""
    try:
        game_id = resp["game_id"]
        policies = {seat: str(resp["seats"][seat]["policy"]) for seat in seats}
    except (KeyError, TypeError) as e:
        raise HandError(f"malformed create_game response {resp!r}") from e
    return str(game_id), policies


DecideFn = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
# What plays hands: a plain client, one routing games over servers, or either batched.
HandClient = CroupierClient | RoutedClient | BatchingClient


async def play_decisions(decide: DecideFn, game_id: str, table: Simulator) -> int:
    """Ask the server for every decision of the hand on `table` until it is over; the number
    of decisions. An illegal answer or a hand that never ends is a `HandError`."""
    for decisions in range(MAX_DECISIONS_PER_HAND):
        if table.is_over():
            return decisions
        player = table.current_player()
        state = table.state(player)
        decision = await decide(game_id, str(player), state)
        action = decision.get("action") if isinstance(decision, dict) else None
        if action not in state["legal_actions"]:
            raise HandError(f"server chose {action!r}, legal: {state['legal_actions']}")
        try:
            table.step(action)
        except ValueError as e:  # legal as listed, refused by the game: its own bug
            raise HandError(f"the game refused {action!r}: {e}") from None
    raise HandError(f"hand still running after {MAX_DECISIONS_PER_HAND} decisions")


async def _play_hand(
    client: HandClient,
    decide: DecideFn,
    table: Simulator,
    tally: _Tally,
    seats: dict[str, str] | None,
    record: bool | str | None = None,
    deal: int | None = None,
    sides: dict[str, str] | None = None,
) -> None:
    """One hand; `deal`: deal this seed's cards (a replayed deal), else the table's next.
    `sides`: a policy per named side (doudizhu: landlord, peasant), seated once the deal says
    who is which (so a learner can train one side against the rules)."""
    game_id: str | None = None
    try:
        if sides is not None:
            table.reset(deal)
            roles = table.roles() or []
            seats = {s: sides[r] for s, r in zip(table.seats, roles, strict=True)}
        created = await client.create_game(table.name, seats=seats, record=record)
        game_id, policies = _seat_policies(created, table.seats)
        if sides is None:
            table.reset(deal)
        decisions = await play_decisions(decide, game_id, table)
        tally.decisions += decisions  # (not `+= await`: that reads the count before awaiting)
        payoffs = table.payoffs()
        await client.end(game_id, dict(zip(table.seats, payoffs, strict=True)))
        tally.record(policies, payoffs, table.roles())
    except HAND_ERRORS as e:
        tally.error(e)
        if game_id is not None:
            # Free the server's game; it may already be gone, which is fine.
            with contextlib.suppress(*HAND_ERRORS):
                await client.abort(game_id)


async def _table_loop(
    client: HandClient,
    decide: DecideFn,
    game: str,
    index: int,
    tally: _Tally,
    seats: list[str] | None,
    seed: int,
    record: bool | str | None = None,
    sides: dict[str, str] | None = None,
) -> None:
    table = load_simulator(game)
    table.reset(seed + index)  # seeded once: each table deals its own reproducible sequence
    if sides is not None:
        while tally.claim() is not None:
            await _play_hand(client, decide, table, tally, None, record, sides=sides)
        return
    if seats is not None and len(seats) == table.num_players and table.roles() is not None:
        await _replayed_deals(client, decide, table, index, tally, seats, seed, record)
        return
    while (hand := tally.claim()) is not None:
        seating = None
        if seats is not None:
            # Rotate who sits where (Leduc's blinds and UNO's first turn favour a seat); the
            # table offset keeps the split even across tables too.
            seating = rotate(seats, table.num_players, hand + index)
        await _play_hand(client, decide, table, tally, seating, record)


async def _replayed_deals(
    client: HandClient,
    decide: DecideFn,
    table: Simulator,
    index: int,
    tally: _Tally,
    seats: list[str],
    seed: int,
    record: bool | str | None,
) -> None:
    """A game with named sides (doudizhu: the deal decides who is landlord): each deal is
    played once per rotation of the seats' policies, so every policy plays every seat of it
    and a lucky deal favours no one. Hands count against the budget one by one."""
    n = table.num_players
    for k in range(MAX_DEALS_PER_TABLE):
        deal = (seed * 1_000_003 + index * 7_919 + k) % (2**31)
        for shift in range(n):
            if tally.claim() is None:
                return
            seating = rotate(seats, n, shift)
            await _play_hand(client, decide, table, tally, seating, record, deal)


def rotate(policies: list[str], num_players: int, turn: int) -> dict[str, str]:
    """The seating for hand `turn`: with one policy per seat, the list rotated `turn` places
    (two players: alternated); with two policies for more seats, the first moves round the
    table and the second fills the other seats."""
    n = num_players
    if len(policies) == n:
        return {str(s): policies[(s + turn) % n] for s in range(n)}
    first = turn % n
    return {str(s): policies[0] if s == first else policies[1] for s in range(n)}


async def _report(progress: Callable[[EngineSummary], Any], tally: _Tally) -> None:
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        try:
            progress(tally.summary())
        except Exception:  # a display callback must not stop the run
            log.exception("progress callback failed")


def seatings(sides: dict[str, str] | list[dict[str, str]]) -> list[dict[str, str]]:
    """`sides` as a list of maps of side to policy (one map: every table plays it);
    ValueError for none, or a map that does not name doudizhu's landlord and peasant."""
    side_maps = [sides] if isinstance(sides, dict) else sides
    if not side_maps:
        raise ValueError("sides: give at least one map of side to policy")
    for side_map in side_maps:
        if set(side_map) != {"landlord", "peasant"}:
            raise ValueError(f"sides must name landlord and peasant, got {sorted(side_map)}")
    return side_maps


async def run_engine(
    url: str,
    game: str,
    games: int,
    seats: list[str] | None,
    hands: int | None,
    seconds: float | None,
    seed: int = 0,
    progress: Callable[[EngineSummary], Any] | None = None,
    batch: bool = False,
    api_key: str | None = None,
    record: bool | str | None = None,
    sides: dict[str, str] | list[dict[str, str]] | None = None,
    deadlines: Deadlines | None = None,
) -> EngineSummary:
    """Play hands of `game` on `games` concurrent tables against the server at `url` (or
    several, comma separated: each game goes to the server its id hashes to).

    `seats`: a policy per seat, rotated round the seats every hand (or two for a game of more
    seats: the first moves round, the second fills the rest); None lets the server seat
    whoever it likes. Stops after `hands` hands (failed ones count) or `seconds`,
    whichever comes first; hands already in progress are finished. `batch`: send the tables'
    creates, decisions and ends together through the batch routes (`POST /v1/games:batch`,
    `/v1/decide:batch`, `/v1/end:batch`) instead of one request each.
    `record`: the games' `record` field (None: the server's default; "rules": also write the
    rules seats' decisions as offline episodes).
    `sides`: instead of `seats`, a policy per named side of a game that has them (doudizhu:
    {"landlord": "learned", "peasant": "rules"}), seated after each deal; several such maps:
    the tables take turns with them (table i plays map i mod n: e.g. a learned landlord
    against the rule peasants at half the tables and against learned peasants at the rest, a
    league's training mix). A game with named sides and one policy per seat replays each deal
    once per rotation of the seats.
    `deadlines`: each request's bounds (`client.Deadlines`; a server past them counts as
    gone: over several servers its games move to the next).
    """
    try:
        num_players = load_simulator(game).num_players
    except ValueError as e:  # no such game, or one without a simulator: one line at the CLI
        raise UnknownGame(str(e)) from None
    if games < 1:
        raise ValueError("games must be at least 1")
    if seats is not None and len(seats) not in (2, num_players):
        raise ValueError(f"seats must name {num_players} policies (or 2), got {seats!r}")
    if sides is not None and seats is not None:
        raise ValueError("give seats or sides, not both")
    if sides is not None and game != "doudizhu":
        raise ValueError("sides (landlord, peasant) are for doudizhu")
    side_maps = None if sides is None else seatings(sides)
    if hands is None and seconds is None:
        raise ValueError("give hands or seconds (or both): the run must be bounded")
    if (hands is not None and hands < 0) or (seconds is not None and seconds <= 0):
        raise ValueError("hands must be >= 0 and seconds > 0")

    tally = _Tally(game, hands, seconds)
    # Each table has at most one request in flight: one connection per table is enough.
    async with contextlib.AsyncExitStack() as stack:
        client: HandClient = await stack.enter_async_context(
            client_for_urls(url, api_key=api_key, max_connections=games, deadlines=deadlines)
        )
        if batch:
            client = await stack.enter_async_context(BatchingClient(client))
        decide: DecideFn = client.decide
        reporter = asyncio.create_task(_report(progress, tally)) if progress else None
        try:
            # TaskGroup: a bug in one table cancels the others instead of leaving them running.
            async with asyncio.TaskGroup() as tg:
                mixes = side_maps or [None]
                for i in range(games):
                    its_sides = mixes[i % len(mixes)]  # tables take turns with the maps
                    tg.create_task(
                        _table_loop(client, decide, game, i, tally, seats, seed, record, its_sides)
                    )
        finally:
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
    return tally.summary()
