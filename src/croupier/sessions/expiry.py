"""Idle games are aborted: an engine that crashed mid-game must not hold memory forever."""

from __future__ import annotations

import asyncio
import logging

from croupier.sessions.service import DecisionService

log = logging.getLogger(__name__)


async def expire_idle_games(service: DecisionService, idle_s: float) -> None:
    """Every few seconds (a tenth of `idle_s`, 0.05..10 s), abort games idle past `idle_s`."""
    interval = min(max(idle_s / 10.0, 0.05), 10.0)
    while True:
        await asyncio.sleep(interval)
        expired = service.expire_idle_games(idle_s)
        if expired:
            log.info("aborted %d games idle for more than %.0f s", expired, idle_s)
