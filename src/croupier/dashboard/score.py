"""`croupier score`: the learning curve's producer. Plays the server's newest version against a
yardstick policy in the arena (`croupier.arena`: duplicate deals over the public API, games not
recorded) and posts the payoff to the server's arena results; with `--every`, again whenever a
new version is in."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

from croupier.arena.arena import play_arena
from croupier.client import CroupierClient
from croupier.dashboard.arena import ArenaResult


async def score_version(
    url: str,
    game: str,
    version: int,
    hands: int,
    opponent: str = "rules",
    tables: int = 16,
    api_key: str | None = None,
) -> ArenaResult:
    """Payoff per hand of `version` against `opponent` over `hands` hands (duplicate pairs)."""
    match = await play_arena(
        url, game, f"frozen@{version}", opponent, hands, tables=tables, api_key=api_key
    )
    if match.pairs == 0 or not math.isfinite(match.mean):
        raise RuntimeError(f"no hand of version {version} finished: {match.error_samples}")
    return ArenaResult(
        version=version,
        payoff=match.mean,
        ci95=match.ci95 if math.isfinite(match.ci95) else 0.0,
        hands=match.hands,
        opponent=opponent,
        time=time.time(),
    )


async def score_loop(
    url: str,
    game: str,
    hands: int,
    every_s: float | None,
    rounds: int | None = None,
    opponent: str = "rules",
    api_key: str | None = None,
    admin_key: str | None = None,
    report: Callable[[ArenaResult], Any] = print,
) -> list[ArenaResult]:
    """Score the newest version, post it; repeat every `every_s` for a version not yet scored
    (once when `every_s` is None; at most `rounds` results)."""
    scored: list[ArenaResult] = []
    api_key = api_key or admin_key  # an admin key opens every engine route too (README, Keys)
    async with (
        CroupierClient(url, api_key=api_key) as engine_client,
        CroupierClient(url, api_key=admin_key or api_key) as admin_client,
    ):
        while rounds is None or len(scored) < rounds:
            latest = int((await engine_client.policies())["policies"]["learned"]["latest"])
            if not scored or latest != scored[-1].version:
                result = await score_version(url, game, latest, hands, opponent, api_key=api_key)
                await admin_client.post_arena_results([result.model_dump()])
                scored.append(result)
                report(result)
            if every_s is None:
                break
            await asyncio.sleep(every_s)
    return scored
