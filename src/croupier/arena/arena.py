"""The arena: policy A against policy B through a policy server's HTTP API, for any game with
a simulator (`games/registry.py` `load_simulator`).

Hands are played in duplicate sets and scored by croupier's one strength score
(`arena/duplicate.py`: A's payoff per hand less the deal's par, half of A - B in the same seats
on the same deals; 0 for B against itself; in a two-player zero-sum game, A's payoff per hand).
The reported mean and its 95% confidence interval are over sets (independent), win/draw/loss
rates over hands (A's team against the other teams' mean). Games are created unrecorded.
`side` (a game of named sides: doudizhu's landlord) plays A on that side alone, each deal
once with A there and once with B there, B everywhere else (`arena/duplicate.py`): how a
version that learned one side is measured; its win rate is over A's hands.

Policy names: `rules`, `random`, `learned@latest` (the newest version when the run starts,
played fixed), `frozen@<version>` (as the server's seat spec names a fixed version;
`learned@<version>` is accepted as a deprecated alias), `production` and `tier:N` (a
calibrated difficulty tier). A model's name may end in `:greedy`: that seat plays the
version's most likely legal action; or in `:temp=T` and/or `:rules=P` (a tier's knobs:
`policies/seats.py`). `search[:base=B][:vs=O][:rollouts=N][:ms=D][:top=K]`: the search seat
(`policies/search.py`), seated once the server's search workers are warm (its first search
seat starts them: the match waits for them, `SEARCH_START_S` at most).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from croupier.arena.duplicate import SCORE_MEANING, Hand, score_summary, set_outcome
from croupier.client import CroupierClient, CroupierError
from croupier.engine.batching import BatchingClient
from croupier.engine.runner import HAND_ERRORS, play_decisions
from croupier.games.registry import load_simulator
from croupier.games.simulator import Simulator, side_seats
from croupier.local_server import serving
from croupier.policies.seats import SEARCH, BadPolicySpec, parse_spec

log = logging.getLogger(__name__)

_MAX_ERROR_SAMPLES = 5
TUNED_NAMES = ("learned", "frozen", "production")  # names `:temp=T` / `:rules=P` may follow
# A server's search workers start at its first search seat: spawning and warming one took
# ~3-25 s on this 2-core VM (importing croupier and the game; longer on a busy machine).
SEARCH_START_S = 180.0


class ArenaError(ValueError):
    """A policy name the arena cannot seat on this server."""


@dataclass
class MatchResult:
    """One A-vs-B match in duplicate (not the dashboard's `ArenaResult`, one point of the
    learning curve that a match can be posted as)."""

    game: str
    a: str
    b: str
    seats: dict[str, str]  # {"a": seat spec, "b": seat spec}: what the server was asked
    hands: int
    pairs: int  # duplicate sets (a pair for a two-seat game: one hand per team)
    mean: float  # the strength score (arena/duplicate.py): A's payoff less the deal's par
    ci95: float  # half-width, over duplicate sets
    win: float
    draw: float
    loss: float
    seconds: float
    hands_per_s: float
    errors: int
    error_samples: list[str] = field(default_factory=list)
    pair_values: list[float] = field(default_factory=list, repr=False)
    side: str | None = None  # A played this side alone (None: every team in turn)
    # A search seat's: the server's search decisions during the match, and those its base
    # answered (past their deadline): {"decisions": n, "fallbacks": m} (None: no search seat).
    search: dict[str, int] | None = None

    @property
    def ci_low(self) -> float:
        return self.mean - self.ci95

    @property
    def ci_high(self) -> float:
        return self.mean + self.ci95

    def to_dict(self, with_pairs: bool = False) -> dict[str, Any]:
        out = asdict(self)
        if not with_pairs:
            out.pop("pair_values")
        return out

    def named(self, side: str) -> str:
        """`learned@latest (v12)`: a name resolved at the start says which version it was."""
        name, spec = (self.a, self.b)[side == "b"], self.seats.get(side, "")
        kind, _, version = spec.partition(":")[0].partition("@")
        if kind == "frozen" and version and name.partition(":")[0] != spec.partition(":")[0]:
            return f"{name} (v{version})"
        return name

    def format(self) -> str:
        a, b = self.named("a"), self.named("b")
        per_set = self.hands // max(self.pairs, 1)  # a four-seat game deals each deal 4 times
        sets = "pairs" if per_set == 2 else f"sets of {per_set} hands"
        on = f" as {self.side} (B there on the same deals)" if self.side else ""
        lines = [
            f"{self.game}: {a} vs {b}{on}, {self.hands} hands ({self.pairs} duplicate "
            f"{sets}) in {self.seconds:.1f} s ({self.hands_per_s:.1f} hands/s), "
            f"{self.errors} errors",
            f"strength score of {a} against {b}: {self.mean:+.4f} ± {self.ci95:.4f} (95% CI "
            f"[{self.ci_low:+.4f}, {self.ci_high:+.4f}])",
            f"  ({SCORE_MEANING})",
            f"win {self.win:.1%}  draw {self.draw:.1%}  loss {self.loss:.1%}",
        ]
        if self.search is not None:
            lines.append(
                f"search seats: {self.search['decisions']} decisions on the server during the "
                f"match, {self.search['fallbacks']} of them the base's move (past the deadline)"
            )
        return "\n".join(lines + [f"error: {e}" for e in self.error_samples])


async def seat_spec(client: CroupierClient, name: str) -> str:
    """The server's seat spec for an arena policy name (checked against what it has loaded);
    `<name>:greedy` for a model's name gives its spec with `:greedy`."""
    name = name.strip()
    if name == SEARCH or name.startswith(f"{SEARCH}:"):  # spelt in full: what was played
        try:
            search = parse_spec(name).search
        except BadPolicySpec as e:
            raise ArenaError(str(e)) from None
        assert search is not None
        return search.spec()
    if name.startswith("tier:"):  # a difficulty tier, as the server calibrated it
        try:
            parse_spec(name)
        except BadPolicySpec as e:
            raise ArenaError(str(e)) from None
        if not (await client.tiers())["calibrated"]:
            raise ArenaError("the server has no tiers calibrated (croupier tiers calibrate)")
        return name
    head, colon, modes = name.partition(":")
    if colon and modes != "greedy" and head.partition("@")[0] in TUNED_NAMES:
        # `frozen@12:temp=2:rules=0.3`, `production:greedy:rules=0.5`: a tier's knobs.
        try:
            parse_spec(f"frozen@0:{modes}")
        except BadPolicySpec as e:
            raise ArenaError(str(e)) from None
        return f"{await seat_spec(client, head)}:{modes}"
    base, sep, mode = name.rpartition(":")
    if sep:
        if mode != "greedy" or base.strip() in ("rules", "random"):
            raise ArenaError(f"{name!r}: only a learned version or production can be :greedy")
        return f"{await seat_spec(client, base)}:greedy"
    if name in ("rules", "random", "production"):
        if name == "production" and (await client.channels())["production"] is None:
            raise ArenaError("the server has no production version yet (promote one)")
        return name
    kind, _, arg = name.partition("@")
    if kind in ("learned", "frozen") and arg:
        learned = (await client.policies())["policies"]["learned"]
        if arg == "latest" and kind == "learned":
            return f"frozen@{learned['latest']}"  # pinned at the start: one version throughout
        try:
            version = int(arg)
        except ValueError:
            raise ArenaError(f"{kind}@ needs a version, got {arg!r}") from None
        if kind == "learned":
            log.warning("%r is deprecated: a fixed version is frozen@%d", name, version)
        if version not in learned["versions"]:
            raise ArenaError(f"version {version} is not loaded; loaded: {learned['versions']}")
        return f"frozen@{version}"
    raise ArenaError(
        f"unknown policy {name!r}: rules, random, learned@latest, frozen@<version>, production"
    )


async def _search_counts(client: CroupierClient) -> dict[str, int]:
    """The server's search decisions and fallbacks so far (every base together)."""
    search = (await client.health()).get("search") or {}
    return {
        "decisions": int(sum((search.get("decisions") or {}).values())),
        "fallbacks": int(sum((search.get("fallbacks") or {}).values())),
    }


async def search_seated(client: CroupierClient, game: str, spec: str) -> None:
    """Wait until the server seats the search seat `spec` (its first one starts its search
    workers: 503 until they are warm); ArenaError when it cannot (409: its game's simulator
    does not set a table from a seat's view, or no workers), or not in `SEARCH_START_S`."""
    deadline = time.monotonic() + SEARCH_START_S
    while True:
        try:
            created = await client.create_game(game, seats={"0": spec}, record=False)
        except CroupierError as e:
            if e.status != 503 or time.monotonic() > deadline:
                raise ArenaError(f"the server cannot seat {spec}: {e.detail}") from None
            await asyncio.sleep(1.0)
            continue
        await client.abort(created["game_id"])
        return


class _Score:
    """Shared by the tables (one asyncio task at a time: no lock)."""

    def __init__(self, pairs: int):
        self.pairs_total = pairs
        self.next_pair = 0
        self.values: list[float] = []
        self.wins = self.draws = self.losses = 0
        self.errors = 0
        self.error_samples: list[str] = []

    def claim(self) -> int | None:
        if self.next_pair >= self.pairs_total:
            return None
        self.next_pair += 1
        return self.next_pair - 1

    def record(self, hands: list[Hand], reference: list[list[float]] | None = None) -> None:
        """One duplicate set: per hand, A's seats, the other teams' seats, every payoff (and
        the payoffs of B's hands on A's side, for a set on one side)."""
        outcome = set_outcome(hands, reference or ())
        self.wins += outcome.wins
        self.draws += outcome.draws
        self.losses += outcome.losses
        self.values.append(outcome.value)

    def error(self, e: BaseException) -> None:
        self.errors += 1
        sample = f"{type(e).__name__}: {e}"
        if len(self.error_samples) < _MAX_ERROR_SAMPLES and sample not in self.error_samples:
            self.error_samples.append(sample)


async def _hand(client, decide, table: Simulator, seats: dict[str, str]) -> list[float]:
    created = await client.create_game(table.name, seats=seats, record=False)
    game_id = created["game_id"]
    try:
        await play_decisions(decide, game_id, table)
        payoffs = table.payoffs()
        await client.end(game_id, dict(zip(table.seats, payoffs, strict=True)))
        return payoffs
    except BaseException:
        with contextlib.suppress(*HAND_ERRORS):
            await client.abort(game_id)
        raise


async def _table(
    client, decide, game: str, a: str, b: str, score: _Score, seed: int, side: str | None = None
) -> None:
    table = load_simulator(game)
    while (pair := score.claim()) is not None:
        deal = seed * 1_000_003 + pair
        try:
            table.reset(deal)
            teams = table.teams()
            hands = []
            if side is not None:  # A on the side's seats, then B there: same deal, same others
                mine = side_seats(table, side)
                others = [t for t in teams if t != mine]
                seats = {str(s): a if s in mine else b for s in range(table.num_players)}
                hands.append((mine, others, await _hand(client, decide, table, seats)))
                table.reset(deal)
                alone = {str(s): b for s in range(table.num_players)}
                score.record(hands, [await _hand(client, decide, table, alone)])
                continue
            for i, mine in enumerate(teams):
                if i:
                    table.reset(deal)  # the same cards, A on the next team's seats
                seats = {str(s): a if s in mine else b for s in range(table.num_players)}
                payoffs = await _hand(client, decide, table, seats)
                hands.append((mine, [t for t in teams if t is not mine], payoffs))
        except HAND_ERRORS as e:
            score.error(e)
            continue
        score.record(hands)


async def play_arena(
    url: str,
    game: str,
    a: str,
    b: str,
    hands: int,
    *,
    tables: int = 16,
    seed: int = 0,
    api_key: str | None = None,
    batch: bool = False,
    side: str | None = None,
) -> MatchResult:
    """Play `hands` hands (rounded up to whole duplicate sets) of A against B (A on `side`
    alone, when given). `game`: a built-in game, `package.module:Simulator`, or an adapter
    naming its simulator."""
    try:
        probe = load_simulator(game)
        probe.reset(seed * 1_000_003)
        if side is not None:
            side_seats(probe, side)
    except (ValueError, TypeError) as e:
        raise ArenaError(str(e)) from None
    # hands per duplicate set: one per team (2 for two teams); on a side, A's and B's
    per_set = 2 if side is not None else max(1, len(probe.teams()))
    if hands < 2 or tables < 1:
        raise ArenaError("play at least 2 hands on at least 1 table")
    pairs = math.ceil(hands / per_set)
    async with contextlib.AsyncExitStack() as stack:
        plain = await stack.enter_async_context(
            CroupierClient(url, api_key=api_key, max_connections=tables)
        )
        specs = {"a": await seat_spec(plain, a), "b": await seat_spec(plain, b)}
        searched = {s for s in specs.values() if s.startswith(SEARCH)}
        for spec in searched:
            await search_seated(plain, probe.name, spec)
        before = await _search_counts(plain) if searched else None
        client: CroupierClient | BatchingClient = plain
        if batch:
            client = await stack.enter_async_context(BatchingClient(plain))
        decide = client.decide
        score = _Score(pairs)
        t0 = time.monotonic()
        async with asyncio.TaskGroup() as tg:
            for _ in range(min(tables, pairs)):
                tg.create_task(
                    _table(client, decide, game, specs["a"], specs["b"], score, seed, side)
                )
        seconds = max(time.monotonic() - t0, 1e-9)
        after = await _search_counts(plain) if searched else None
    result = summarize(probe.name, a, b, specs, score, seconds, per_set)
    result.side = side
    if before is not None and after is not None:
        result.search = {k: after[k] - before[k] for k in after}
    return result


def summarize(
    game: str,
    a: str,
    b: str,
    specs: dict[str, str],
    score: _Score,
    seconds: float,
    per_set: int = 2,
) -> MatchResult:
    n = len(score.values)
    mean, half_width = score_summary(score.values)
    hands = per_set * n
    # the rates are over A's hands: every hand of a set, or one of two on a side
    mine = score.wins + score.draws + score.losses
    return MatchResult(
        game=game,
        a=a,
        b=b,
        seats=specs,
        hands=hands,
        pairs=n,
        mean=mean,
        ci95=half_width,
        win=score.wins / mine if mine else 0.0,
        draw=score.draws / mine if mine else 0.0,
        loss=score.losses / mine if mine else 0.0,
        seconds=seconds,
        hands_per_s=hands / seconds,
        errors=score.errors,
        error_samples=score.error_samples,
        pair_values=list(score.values),
    )


@contextlib.contextmanager
def local_server(
    game: str, weights_dir: Path | None, extra: list[str] | None = None, log: Path | None = None
) -> Iterator[str]:
    """`croupier serve` on a free loopback port (loading `weights_dir`'s versions); its URL."""
    args = ["--game", game, "--seats", "rules", "--keep-versions", "64", *(extra or [])]
    if weights_dir is not None:
        args += ["--weights-dir", str(weights_dir)]
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("w")) if log else subprocess.DEVNULL
        url, _ = stack.enter_context(serving(args, stdout=out, env={**os.environ}))
        yield url
