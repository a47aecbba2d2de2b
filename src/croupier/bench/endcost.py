"""What durability costs `end`: the on-disk spool vs an in-memory SQLite spool (same code).

`python -m croupier.bench.endcost`: 600 Leduc hands, both seats learned, in-process (no HTTP),
timing `DecisionService.end_game` (which writes both seats' episodes to the spool).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import torch

from croupier.api.app import build_service
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import RLCardTable

HANDS = 600
WARMUP = 100


async def measure(data_dir: Path | None) -> dict[str, float]:
    service = build_service(ServerConfig(data_dir=data_dir, seed=0))
    await service.batcher.start()
    table = RLCardTable("leduc-holdem")
    times = []
    for hand in range(HANDS):
        seats = {"0": "learned", "1": "learned"}
        game_id = service.create_game("leduc-holdem", seats=seats)["game_id"]
        table.reset(hand)
        while not table.is_over():
            player = table.current_player()
            decision = await service.decide(game_id, str(player), table.state_json(player))
            table.step(decision.action)
        payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
        t0 = time.perf_counter()
        service.end_game(game_id, payoffs)
        times.append(time.perf_counter() - t0)
    await service.batcher.stop()
    stats = service.outbox.stats()
    service.outbox.close()
    times = sorted(times[WARMUP:])
    return {
        "end_median_us": statistics.median(times) * 1e6,
        "end_p99_us": times[int(0.99 * (len(times) - 1))] * 1e6,
        "put_mean_us": stats["put_us_mean"],
        "episodes": stats["recorded"],
    }


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for label, data_dir in (("in-memory", None), ("on disk (WAL)", Path(tmp))):
            r = asyncio.run(measure(data_dir))
            print(
                f"{label:14s} end(): median {r['end_median_us']:.0f} µs, p99 "
                f"{r['end_p99_us']:.0f} µs; spool write mean {r['put_mean_us']:.0f} µs "
                f"({r['episodes']:.0f} episodes)"
            )


if __name__ == "__main__":
    main()
