"""`croupier bench outage --server-freeze`: one of two policy servers frozen (SIGSTOP) under a
routed engine, and what the fleet's hands/s do meanwhile.

Two `croupier serve` processes on loopback; `games` tables play leduc hands through one
`RoutedClient` (every third table through the batch routes, per server: engine/batching.py),
each hand create, decide…, end. `freeze_at_s` in, the server that owns the most games in
flight is SIGSTOPped (the kernel still accepts its connections: nothing answers) and
SIGCONTed `freeze_s` later. Reported: hands/s per second, before / during / after; every
error that reached a table (a failed decision the other server could have answered); the
longest any call waited once the freeze began (a frozen server's game moves after the first-
byte deadline, `client.Deadlines`); the routed client's failover counters. Each run is
either the default deadlines or the single 30 s bound the client had before (`--deadlines
before`), so the figure shows what the deadlines buy.

Also `tests/test_server_freeze.py` (`make test-long`), with a shorter freeze.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from croupier.bench.plotting import pyplot, save, save_report
from croupier.client import CroupierError, Deadlines
from croupier.engine.batching import BatchingClient
from croupier.engine.runner import play_decisions
from croupier.games.registry import load_simulator
from croupier.local_server import free_port, start_serve, stop, wait_until_up
from croupier.routing import RoutedClient

GAME = "leduc-holdem"
SERVE_ARGS = ("--game", GAME, "--seats", "learned,rules", "--data-dir", "none",
              "--log-level", "warning")  # fmt: skip
# The bounds the client had before deadlines: one 30 s total, a 5 s connect.
BEFORE = Deadlines(connect_s=5.0, first_byte_s=30.0, total_s=30.0)
DEADLINES = {"default": Deadlines(), "before": BEFORE}


@dataclass
class FreezeReport:
    deadlines: str  # "default" or "before"
    bounds: dict[str, float]
    games: int
    freeze_at_s: float
    freeze_s: float
    seconds: float
    hands_per_s: list[float]  # one per second of the run
    hands_before_per_s: float  # the freeze_at_s before the freeze (its first 5 s left out)
    hands_during_per_s: float  # while frozen
    hands_after_per_s: float  # after SIGCONT
    during_over_before: float
    errors: int  # failures that reached a table
    error_samples: list[str]
    longest_wait_s: float  # the longest call of any table once the freeze began
    frozen_games_at_freeze: int  # games in flight on the frozen server when it stopped
    failover: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def two_servers() -> Iterator[list[tuple[str, subprocess.Popen]]]:
    """Two `croupier serve` processes started together; each (url, process). Stopped after,
    SIGCONT first (a stopped process cannot act on SIGTERM)."""
    servers: list[tuple[str, subprocess.Popen]] = []
    try:
        for _ in range(2):
            port = free_port()
            servers.append((f"http://127.0.0.1:{port}", start_serve(SERVE_ARGS, port)))
        for url, proc in servers:
            wait_until_up(url, proc, poll_s=0.1)
        yield servers
    finally:
        for _, proc in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            stop(proc, 10)


class _Tables:
    """`games` tables over one routed client; what each saw."""

    def __init__(self, client: RoutedClient, batching: BatchingClient, games: int):
        self.client, self.batching, self.games = client, batching, games
        self.hands = 0
        self.errors: list[str] = []
        self.stop = asyncio.Event()
        self.mid_hand: set[str] = set()
        self.watch_from: float | None = None  # when the freeze began
        self.longest_wait_s = 0.0

    def timed(self, call: Any) -> Any:
        """`call`, its wait kept when it ends after the freeze began (the longest)."""

        async def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            try:
                return await call(*args, **kwargs)
            finally:
                end = time.monotonic()
                if self.watch_from is not None and end >= self.watch_from:
                    self.longest_wait_s = max(self.longest_wait_s, end - t0)

        return run

    async def table(self, index: int) -> None:
        table = load_simulator(GAME)
        table.reset(index)
        client: Any = self.batching if index % 3 == 0 else self.client
        decide = self.timed(client.decide)
        seats = {"0": "learned", "1": "rules"} if index % 2 else {"0": "rules", "1": "learned"}
        for _ in range(10**9):  # bounded: the run's stop event ends it long before
            if self.stop.is_set():
                return
            try:
                created = await self.timed(client.create_game)(GAME, seats=seats)
                game_id = created["game_id"]
                self.mid_hand.add(game_id)
                table.reset()
                await play_decisions(decide, game_id, table)
                payoffs = dict(zip(table.seats, table.payoffs(), strict=True))
                await self.timed(client.end)(game_id, payoffs)
                self.mid_hand.discard(game_id)
                self.hands += 1
            except (CroupierError, OSError, TimeoutError, KeyError, ValueError) as e:
                if len(self.errors) < 1000:
                    self.errors.append(f"{type(e).__name__}: {e}")
                await asyncio.sleep(0.05)


async def _play(
    urls: list[str],
    procs: list[subprocess.Popen],
    games: int,
    freeze_at_s: float,
    freeze_s: float,
    seconds: float,
    deadlines: Deadlines,
) -> dict[str, Any]:
    async with (
        RoutedClient(urls, max_connections=games, deadlines=deadlines) as client,
        BatchingClient(client) as batching,
    ):
        tables = _Tables(client, batching, games)
        tasks = [asyncio.create_task(tables.table(i)) for i in range(games)]
        per_second: list[float] = []
        frozen_games = 0
        frozen: subprocess.Popen | None = None
        t0 = time.monotonic()
        try:
            for second in range(int(seconds)):
                at = tables.hands
                if second == int(freeze_at_s):
                    # The server holding the most games in flight, frozen mid-hand.
                    holding = [sum(client.url_for(g) == u for g in tables.mid_hand) for u in urls]
                    victim = holding.index(max(holding))
                    frozen_games, frozen = holding[victim], procs[victim]
                    tables.watch_from = time.monotonic()
                    os.kill(frozen.pid, signal.SIGSTOP)
                if frozen is not None and second == int(freeze_at_s + freeze_s):
                    os.kill(frozen.pid, signal.SIGCONT)
                await asyncio.sleep(max(0.0, t0 + second + 1 - time.monotonic()))
                per_second.append(float(tables.hands - at))
        finally:
            if frozen is not None:
                os.kill(frozen.pid, signal.SIGCONT)
            tables.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), deadlines.total_s * 3 + 30)
        return {
            "per_second": per_second,
            "errors": tables.errors,
            "longest_wait_s": tables.longest_wait_s,
            "frozen_games": frozen_games,
            "failover": client.failover.to_dict(),
        }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def run_server_freeze(
    games: int = 64,
    freeze_at_s: float = 20.0,
    freeze_s: float = 80.0,
    seconds: float = 120.0,
    deadlines: str = "default",
) -> FreezeReport:
    """One run (see the module): two servers, `games` tables, one server frozen from
    `freeze_at_s` for `freeze_s` of `seconds`."""
    if not 5 < freeze_at_s < freeze_at_s + freeze_s < seconds:
        raise ValueError("need 5 < freeze_at_s < freeze_at_s + freeze_s < seconds")
    bounds = DEADLINES[deadlines]
    with two_servers() as servers:
        urls = [url for url, _ in servers]
        out = asyncio.run(
            _play(urls, [p for _, p in servers], games, freeze_at_s, freeze_s, seconds, bounds)
        )
    rates = out["per_second"]
    at, until = int(freeze_at_s), int(freeze_at_s + freeze_s)
    before = _mean(rates[5:at])  # the first seconds: the tables' first games, warming up
    during = _mean(rates[at:until])
    return FreezeReport(
        deadlines=deadlines,
        bounds=asdict(bounds),
        games=games,
        freeze_at_s=freeze_at_s,
        freeze_s=freeze_s,
        seconds=seconds,
        hands_per_s=rates,
        hands_before_per_s=before,
        hands_during_per_s=during,
        hands_after_per_s=_mean(rates[until:]),
        during_over_before=during / before if before else 0.0,
        errors=len(out["errors"]),
        error_samples=sorted(set(out["errors"]))[:5],
        longest_wait_s=out["longest_wait_s"],
        frozen_games_at_freeze=out["frozen_games"],
        failover=out["failover"],
    )


def bench_server_freeze(
    games: int, freeze_at_s: float, freeze_s: float, seconds: float, out_dir: Path
) -> dict[str, Any]:
    """Both deadlines, one run each: `server-freeze.json` and `.png` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for name in ("default", "before"):
        print(f"{name} deadlines: {games} games, server frozen {freeze_s:g} s from "
              f"{freeze_at_s:g} s of {seconds:g}...", flush=True)  # fmt: skip
        run = run_server_freeze(games, freeze_at_s, freeze_s, seconds, name)
        runs.append(run.to_dict())
        print(f"  hands/s before {run.hands_before_per_s:.0f}, during {run.hands_during_per_s:.0f}"
              f" ({run.during_over_before:.2f}), after {run.hands_after_per_s:.0f}; "
              f"{run.errors} errors; longest wait {run.longest_wait_s:.1f} s; "
              f"{run.failover}", flush=True)  # fmt: skip
    report = {"game": GAME, "games": games, "freeze_at_s": freeze_at_s, "freeze_s": freeze_s,
              "seconds": seconds, "runs": runs}  # fmt: skip
    return save_report(report, out_dir / "server-freeze.json", plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in report["runs"]:
        b = run["bounds"]
        label = (f"{run['deadlines']} deadlines (first byte {b['first_byte_s']:g} s, total "
                 f"{b['total_s']:g} s): during/before {run['during_over_before']:.2f}, "
                 f"{run['errors']} errors, longest wait {run['longest_wait_s']:.1f} s")  # fmt: skip
        rates = run["hands_per_s"]
        # A 5 s mean: a second's count at 64 tables on a loaded box swings 0-200.
        smooth = [sum(rates[max(0, i - 4) : i + 1]) / len(rates[max(0, i - 4) : i + 1])
                  for i in range(len(rates))]  # fmt: skip
        ax.plot(range(len(rates)), smooth, lw=1.2, label=label)
    at = report["freeze_at_s"]
    ax.axvspan(at, at + report["freeze_s"], color="gray", alpha=0.2, label="one server SIGSTOPped")
    ax.set_xlabel("seconds")
    ax.set_ylabel("fleet hands/s (both servers), 5 s mean")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{report['games']} routed games over two servers, one frozen "
                 f"{report['freeze_s']:g} s")  # fmt: skip
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7)
    save(fig, path)
