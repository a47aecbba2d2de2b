"""What /metrics costs a request: the request-timing middleware alone, around a no-op ASGI app,
and one /metrics render.  `python -m experiments.metrics_overhead`"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from croupier.api.metrics import RequestMetrics, ServerMetrics

SCOPE = {"type": "http", "path": "/v1/games/0123456789abcdef/decide"}


async def _noop_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200})
    await send({"type": "http.response.body", "body": b"{}"})


async def _send(message: Any) -> None:
    return None


async def _receive() -> Any:
    return {}


async def _per_call(app: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await app(SCOPE, _receive, _send)
    return (time.perf_counter() - start) / n


async def measure(n: int = 200_000, rounds: int = 3) -> dict[str, float]:
    metrics = ServerMetrics(
        lambda: {"games_in_flight": 1, "decisions": {"learned": 1}}, lambda: [0]
    )
    timed = RequestMetrics(_noop_app, metrics.requests)
    bare = with_metrics = float("inf")
    for _ in range(rounds):  # best of `rounds`: the least disturbed by other processes
        bare = min(bare, await _per_call(_noop_app, n))
        with_metrics = min(with_metrics, await _per_call(timed, n))
    start = time.perf_counter()
    for _ in range(100):
        metrics.render()
    return {
        "middleware_us_per_request": (with_metrics - bare) * 1e6,
        "metrics_render_ms": (time.perf_counter() - start) / 100 * 1e3,
    }


if __name__ == "__main__":
    print(asyncio.run(measure()))
