"""`croupier bench soak`: many concurrent games against one server for minutes.

Each of `--games` tasks plays hands (Leduc by default; `--game`: any game with a simulator)
back to back through the HTTP API (create, decide
with a turn number, end), timing every request. Reported per minute: decisions, errors,
p50/p99 decide latency, fallbacks, and the server's RSS; at the end the totals and the
server's own counters (spool depth, drops, 503s). Errors must be 0.

The load generator runs in this process, the server in a subprocess with its own data
directory. Without a trainer the spool fills and stays bounded, which is part of what is
soaked; with `trainer=True` a `croupier train` process is connected, as in production: the
server also installs versions and sends episodes all along (its spool depth and the versions
are sampled each minute). `rss_growth_after_warmup` compares the server's RSS at the end with
its RSS once warm (minute `WARMUP_MINUTES`, or a third of a shorter run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from croupier.client import CroupierClient, CroupierError, Deadlines
from croupier.engine.runner import rotate
from croupier.games.registry import load_simulator
from croupier.local_server import free_port, start_serve, start_train, stop, wait_until_up

GAME = "leduc-holdem"
WARMUP_MINUTES = 5


@dataclass
class Minute:
    minute: int
    decisions: int = 0
    hands: int = 0
    errors: int = 0
    fallbacks: int = 0
    latencies: list[float] = field(default_factory=list)
    rss_mb: float = 0.0
    spooled: int | None = None  # the server's episodes on disk, not yet acked (last sample)
    version: int | None = None  # the newest version it holds (last sample)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def q(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else 0.0

        return {
            "minute": self.minute,
            "decisions": self.decisions,
            "decisions_per_s": self.decisions / 60.0,
            "hands": self.hands,
            "errors": self.errors,
            "fallbacks": self.fallbacks,
            "p50_ms": q(0.50),
            "p99_ms": q(0.99),
            "max_ms": lat[-1] * 1e3 if lat else 0.0,
            "server_rss_mb": self.rss_mb,
            "spooled": self.spooled,
            "version": self.version,
        }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


class Soak:
    def __init__(self, games: int, seconds: float, game: str = GAME):
        self.games = games
        self.game = game
        self.seconds = seconds
        self.t0 = 0.0
        self.minutes: list[Minute] = []
        self.error_samples: list[str] = []

    def bucket(self) -> Minute:
        index = int((time.monotonic() - self.t0) // 60)
        while len(self.minutes) <= index:
            self.minutes.append(Minute(len(self.minutes)))
        return self.minutes[index]

    def error(self, e: BaseException) -> None:
        self.bucket().errors += 1
        if len(self.error_samples) < 20:
            self.error_samples.append(f"{type(e).__name__}: {e}")

    async def table(self, client: CroupierClient, index: int, deadline: float) -> None:
        table = load_simulator(self.game)
        table.reset(index)
        hand = 0
        while time.monotonic() < deadline:
            hand += 1
            seating = rotate(["learned", "rules"], table.num_players, hand + index + 1)
            game_id = None
            try:
                game_id = (await client.create_game(table.name, seats=seating))["game_id"]
                table.reset()
                turn = 0
                while not table.is_over():
                    player = table.current_player()
                    state = table.state(player)
                    t = time.perf_counter()
                    decision = await client.decide(game_id, str(player), state, turn=turn)
                    minute = self.bucket()
                    minute.latencies.append(time.perf_counter() - t)
                    minute.decisions += 1
                    minute.fallbacks += bool(decision.get("fallback"))
                    table.step(decision["action"])
                    turn += 1
                payoffs = dict(zip(table.seats, table.payoffs(), strict=True))
                await client.end(game_id, payoffs)
                self.bucket().hands += 1
            except (TimeoutError, CroupierError, OSError, KeyError, ValueError) as e:
                self.error(e)
                if game_id is not None:
                    with contextlib.suppress(CroupierError, OSError, asyncio.TimeoutError):
                        await client.abort(game_id)

    async def run(self, url: str, server_pid: int | None) -> None:
        async with CroupierClient(
            # A saturated server answers late, not never: the soak counts slowness, not errors.
            url,
            max_connections=self.games,
            deadlines=Deadlines(first_byte_s=60, total_s=60),
        ) as client:
            self.t0 = time.monotonic()
            deadline = self.t0 + self.seconds
            sampler = asyncio.create_task(self.sample(client, server_pid))
            try:
                async with asyncio.TaskGroup() as tg:
                    for i in range(self.games):
                        tg.create_task(self.table(client, i, deadline))
            finally:
                sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler

    async def sample(self, client: CroupierClient, pid: int | None) -> None:
        """Every 5 s: the server's RSS, spool depth and version (the last of each minute stays)."""
        while True:
            minute = self.bucket()
            if pid is not None:
                minute.rss_mb = rss_mb(pid)
            with contextlib.suppress(CroupierError, OSError, asyncio.TimeoutError, KeyError):
                health = await client.health()
                minute.spooled = int(health["episodes"]["spooled"])  # on disk until acked
                minute.version = health.get("version")
            await asyncio.sleep(5)


def _start_trainer(game: str, minutes: float, data_dir: str) -> tuple[subprocess.Popen, str]:
    """`croupier train` for the soak (its log beside the server's data), and its link."""
    link = f"127.0.0.1:{free_port()}"
    log = Path(data_dir, "trainer.log").open("wb")  # noqa: SIM115 - the process holds it
    proc = start_train(
        ["--game", game, "--listen", link, "--minutes", f"{minutes + 10:g}",
         "--checkpoint-dir", str(Path(data_dir, "trainer"))],
        stdout=log,
    )  # fmt: skip
    return proc, link


def _rss_growth(per_minute: list[dict[str, Any]]) -> float | None:
    """The server's RSS at the end against its RSS once warm, as a fraction."""
    sampled = [m["server_rss_mb"] for m in per_minute if m["server_rss_mb"]]
    if not sampled:  # a server of its own only (not with --url)
        return None
    warm = sampled[min(WARMUP_MINUTES, len(sampled) // 3)]
    return (sampled[-1] - warm) / warm


def bench_soak(
    games: int,
    minutes: float,
    out_dir: Path,
    url: str | None = None,
    game: str = GAME,
    trainer: bool = False,
) -> dict[str, Any]:
    import uvloop

    proc = train = None
    with tempfile.TemporaryDirectory(prefix="croupier-soak-") as data_dir:
        if url is None:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            args = ["--game", game, "--data-dir", data_dir]
            if trainer:
                train, link = _start_trainer(game, minutes, data_dir)
                args += ["--trainer", link]
            proc = start_serve(args, port)
        try:
            if proc is not None:
                wait_until_up(url, proc, timeout=120)
            pid = proc.pid if proc is not None else None
            rss_start = rss_mb(pid) if pid else None
            cpu_start, own_cpu_start, load_start = (
                cpu_seconds(pid) if pid else 0.0,
                time.process_time(),
                os.getloadavg()[0],
            )
            soak = Soak(games, minutes * 60, game)
            wall = time.monotonic()
            uvloop.run(soak.run(url, pid))
            wall = time.monotonic() - wall
            rss_end = rss_mb(pid) if pid else None
            server_cpu = cpu_seconds(pid) - cpu_start if pid else None
            own_cpu = time.process_time() - own_cpu_start
            import httpx

            server = httpx.get(url + "/healthz", timeout=30).json()
        finally:
            for p in (proc, train):
                if p is not None:
                    stop(p)
    per_minute = [m.summary() for m in soak.minutes]
    # (the last minute is a sliver past the deadline, often without a sample)
    spooled = [m["spooled"] for m in per_minute if m["spooled"] is not None]
    versions = [m["version"] for m in per_minute if m["version"] is not None]
    all_lat = sorted(x for m in soak.minutes for x in m.latencies)
    report = {
        "command": f"croupier bench soak --game {game} --games {games} --minutes {minutes:g}"
        + (" --trainer" if trainer else ""),
        "trainer": trainer,
        "games": games,
        "minutes": minutes,
        "decisions": sum(m.decisions for m in soak.minutes),
        "hands": sum(m.hands for m in soak.minutes),
        "errors": sum(m.errors for m in soak.minutes),
        "fallbacks": sum(m.fallbacks for m in soak.minutes),
        "p99_ms": all_lat[int(0.99 * (len(all_lat) - 1))] * 1e3 if all_lat else 0.0,
        "server_rss_mb_start": rss_start,
        "server_rss_mb_end": rss_end,
        "rss_growth_after_warmup": _rss_growth(per_minute),
        "spooled_max": max(spooled, default=None),
        "versions_first_last": [versions[0], versions[-1]] if versions else None,
        # Who used the CPU: the server, this load generator, and the machine's load average
        # (a shared machine shows it here).
        "server_cpu_s": server_cpu,
        "loadgen_cpu_s": own_cpu,
        "wall_s": wall,
        "loadavg_1m_start_end": [load_start, os.getloadavg()[0]],
        "cpus": os.cpu_count(),
        "per_minute": per_minute,
        "error_samples": soak.error_samples,
        "server_health": server,
        "time": time.time(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    name = "soak-trainer.json" if trainer else "soak.json"
    (out_dir / name).write_text(json.dumps(report, indent=2, default=float))
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['command']}: {report['decisions']:,} decisions, {report['hands']:,} hands, "
        f"{report['errors']} errors, {report['fallbacks']} fallbacks, p99 "
        f"{report['p99_ms']:.1f} ms; server RSS {report['server_rss_mb_start']} -> "
        f"{report['server_rss_mb_end']} MB (after warm-up: "
        f"{_pct(report['rss_growth_after_warmup'])}); spool max {report['spooled_max']}; "
        f"versions {report['versions_first_last']}; CPU s server {report['server_cpu_s']}, load "
        f"generator {report['loadgen_cpu_s']:.0f}, wall {report['wall_s']:.0f}, load average "
        f"{report['loadavg_1m_start_end']}",
        "minute  decisions/s  p50 ms  p99 ms  errors  rss MB  spooled  version",
    ]
    for m in report["per_minute"]:
        lines.append(
            f"{m['minute']:6d}  {m['decisions_per_s']:11.0f}  {m['p50_ms']:6.1f}  "
            f"{m['p99_ms']:6.1f}  {m['errors']:6d}  {m['server_rss_mb']:6.1f}  "
            f"{m['spooled']!s:>7}  {m['version']!s:>7}"
        )
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"
