"""The arena: policy A against policy B through a policy server's HTTP API.

Hands are played in duplicate: every deal is played twice with the same cards, A in seat 0 and
then in seat 1, so seat advantage and the luck of the deal cancel out of each pair. A pair's
value is A's mean payoff over its two hands; the reported mean and its 95% confidence interval
are over pairs (independent), win/draw/loss rates over hands. Games are created unrecorded.

Policy names: `rules`, `random`, `learned@latest` (the newest version when the run starts,
played fixed), `frozen@<version>` (as the server's seat spec names a fixed version;
`learned@<version>` is accepted as a deprecated alias) and `production`.
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

from croupier.client import CroupierClient
from croupier.engine.batching import BatchingClient
from croupier.engine.rlcard_games import GAMES, RLCardTable
from croupier.engine.runner import HAND_ERRORS, SEATS, play_decisions
from croupier.local_server import serving
from croupier.stats import ci95

log = logging.getLogger(__name__)

_MAX_ERROR_SAMPLES = 5


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
    pairs: int
    mean: float  # A's mean payoff per hand
    ci95: float  # half-width, over duplicate pairs
    win: float
    draw: float
    loss: float
    seconds: float
    hands_per_s: float
    errors: int
    error_samples: list[str] = field(default_factory=list)
    pair_values: list[float] = field(default_factory=list, repr=False)

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
        kind, _, version = spec.partition("@")
        if kind == "frozen" and version and name != spec:
            return f"{name} (v{version})"
        return name

    def format(self) -> str:
        a, b = self.named("a"), self.named("b")
        lines = [
            f"{self.game}: {a} vs {b}, {self.hands} hands ({self.pairs} duplicate "
            f"pairs) in {self.seconds:.1f} s ({self.hands_per_s:.1f} hands/s), "
            f"{self.errors} errors",
            f"payoff per hand for {a}: {self.mean:+.4f} ± {self.ci95:.4f} (95% CI "
            f"[{self.ci_low:+.4f}, {self.ci_high:+.4f}])",
            f"win {self.win:.1%}  draw {self.draw:.1%}  loss {self.loss:.1%}",
        ]
        return "\n".join(lines + [f"error: {e}" for e in self.error_samples])


async def seat_spec(client: CroupierClient, name: str) -> str:
    """The server's seat spec for an arena policy name (checked against what it has loaded)."""
    name = name.strip()
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

    def record(self, a_payoffs: tuple[float, float]) -> None:
        self.values.append(sum(a_payoffs) / 2)
        for p in a_payoffs:
            self.wins += p > 0
            self.draws += p == 0
            self.losses += p < 0

    def error(self, e: BaseException) -> None:
        self.errors += 1
        sample = f"{type(e).__name__}: {e}"
        if len(self.error_samples) < _MAX_ERROR_SAMPLES and sample not in self.error_samples:
            self.error_samples.append(sample)


async def _hand(client, decide, table: RLCardTable, game: str, seats: dict[str, str]) -> list:
    created = await client.create_game(game, seats=seats, record=False)
    game_id = created["game_id"]
    try:
        await play_decisions(decide, game_id, table)
        payoffs = table.payoffs()
        await client.end(game_id, dict(zip(SEATS, payoffs, strict=True)))
        return payoffs
    except BaseException:
        with contextlib.suppress(*HAND_ERRORS):
            await client.abort(game_id)
        raise


async def _table(client, decide, game: str, a: str, b: str, score: _Score, seed: int) -> None:
    table = RLCardTable(game)
    while (pair := score.claim()) is not None:
        deal = seed * 1_000_003 + pair
        try:
            table.reset(deal)
            first = await _hand(client, decide, table, game, {"0": a, "1": b})
            table.reset(deal)  # the same cards, seats swapped
            second = await _hand(client, decide, table, game, {"0": b, "1": a})
        except HAND_ERRORS as e:
            score.error(e)
            continue
        score.record((first[0], second[1]))


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
) -> MatchResult:
    """Play `hands` hands (rounded up to whole duplicate pairs) of A against B."""
    if game not in GAMES:
        raise ArenaError(f"the arena plays {GAMES}, not {game!r}")
    if hands < 2 or tables < 1:
        raise ArenaError("play at least 2 hands on at least 1 table")
    pairs = math.ceil(hands / 2)
    async with contextlib.AsyncExitStack() as stack:
        plain = await stack.enter_async_context(
            CroupierClient(url, api_key=api_key, max_connections=tables)
        )
        specs = {"a": await seat_spec(plain, a), "b": await seat_spec(plain, b)}
        client: CroupierClient | BatchingClient = plain
        if batch:
            client = await stack.enter_async_context(BatchingClient(plain))
        decide = client.decide
        score = _Score(pairs)
        t0 = time.monotonic()
        async with asyncio.TaskGroup() as tg:
            for _ in range(min(tables, pairs)):
                tg.create_task(_table(client, decide, game, specs["a"], specs["b"], score, seed))
        seconds = max(time.monotonic() - t0, 1e-9)
    return summarize(game, a, b, specs, score, seconds)


def summarize(
    game: str, a: str, b: str, specs: dict[str, str], score: _Score, seconds: float
) -> MatchResult:
    n = len(score.values)
    mean = sum(score.values) / n if n else float("nan")
    var = sum((x - mean) ** 2 for x in score.values) / (n - 1) if n > 1 else float("nan")
    hands = 2 * n
    return MatchResult(
        game=game,
        a=a,
        b=b,
        seats=specs,
        hands=hands,
        pairs=n,
        mean=mean,
        ci95=ci95(math.sqrt(var), n) if n > 1 else float("nan"),
        win=score.wins / hands if hands else 0.0,
        draw=score.draws / hands if hands else 0.0,
        loss=score.losses / hands if hands else 0.0,
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
