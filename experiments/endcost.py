"""What durability costs `end`, and how much of it the event loop pays.

`python -m experiments.endcost`: 600 Leduc hands, both seats learned, in-process (no HTTP),
timing `DecisionService.end_game` (which writes both seats' episodes to the spool) on three
spools: in-memory SQLite, on disk (WAL), and on disk and full (every write past the bound
deletes the oldest). For each: the latency of `end` (until it answers: its episodes are
committed) and the event loop's own CPU time per `end` (`time.thread_time()` of the loop's
thread: what no other request can use meanwhile).

The same file runs against an older croupier, whose `end_game` was synchronous (the write on
the event loop): `PYTHONPATH=<old checkout>/src python experiments/endcost.py`, for a
before/after in one window.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from croupier.api.app import build_service
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import RLCardTable
from croupier.trajectories.recorder import SeatRecorder

HANDS = 600
WARMUP = 100
# The full spool: this bound, filled before the hands (every write past it deletes).
FULL_SPOOL_EPISODES = 20_000


def _filler(n: int, obs_size: int, num_actions: int) -> list[dict]:
    """`n` 2-step episodes (as a learned Leduc seat records) to fill a spool with."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        rec = SeatRecorder(f"fill-{i}", "0", "learned")
        for _ in range(2):
            logits = rng.standard_normal(num_actions).astype(np.float32)
            obs = rng.standard_normal(obs_size).astype(np.float32)
            rec.add_decision(obs, np.ones(num_actions, np.float32), 0, -1.0, logits, 0)
        out.append(rec.close(1.0, (np.zeros(obs_size, np.float32), np.ones(num_actions))))
    return out


async def measure(
    data_dir: Path | None, max_episodes: int = 50_000, hands: int = HANDS
) -> dict[str, float]:
    service = build_service(
        ServerConfig(data_dir=data_dir, seed=0, outbox_max_episodes=max_episodes)
    )
    if max_episodes < 50_000:  # the full spool: filled first
        adapter = service.adapter
        service.outbox.put_many(_filler(max_episodes, adapter.obs_size, adapter.num_actions))
    spool = service.outbox
    put_s0, put_n0, dropped0 = spool.put_seconds, spool.put_total, spool.dropped
    await service.batcher.start()
    table = RLCardTable("leduc-holdem")
    wall, loop_cpu = [], []
    for hand in range(hands):
        seats = {"0": "learned", "1": "learned"}
        game_id = service.create_game("leduc-holdem", seats=seats)["game_id"]
        table.reset(hand)
        while not table.is_over():
            player = table.current_player()
            decision = await service.decide(game_id, str(player), table.state_json(player))
            table.step(decision.action)
        payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
        t0, c0 = time.perf_counter(), time.thread_time()
        ended = service.end_game(game_id, payoffs)
        if inspect.isawaitable(ended):  # since the spool writer thread; before, synchronous
            await ended
        loop_cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    await service.batcher.stop()
    spool.close()  # (waits for queued writes)
    episodes = spool.put_total - put_n0
    wall, loop_cpu = sorted(wall[WARMUP:]), sorted(loop_cpu[WARMUP:])
    return {
        "end_median_us": statistics.median(wall) * 1e6,
        "end_p99_us": wall[int(0.99 * (len(wall) - 1))] * 1e6,
        "loop_cpu_mean_us": statistics.fmean(loop_cpu) * 1e6,
        "put_mean_us": 1e6 * (spool.put_seconds - put_s0) / max(episodes, 1),
        "episodes": episodes,
        "dropped": spool.dropped - dropped0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=HANDS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        runs = (
            ("in-memory", None, 50_000),
            ("on disk (WAL)", Path(tmp, "disk"), 50_000),
            (f"on disk, full ({FULL_SPOOL_EPISODES:,})", Path(tmp, "full"), FULL_SPOOL_EPISODES),
        )
        for label, data_dir, max_episodes in runs:
            r = asyncio.run(measure(data_dir, max_episodes, args.hands))
            print(
                f"{label:24s} end(): median {r['end_median_us']:.0f} µs, p99 "
                f"{r['end_p99_us']:.0f} µs; event loop CPU {r['loop_cpu_mean_us']:.0f} µs per "
                f"end; spool write {r['put_mean_us']:.0f} µs per episode "
                f"({r['episodes']:.0f} episodes, {r['dropped']:.0f} dropped)"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
