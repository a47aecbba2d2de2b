"""The live arena over HTTP and Prometheus: `GET /v1/arena/live` (typed), and its rows in
`/metrics` with bounded label values."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from prometheus_client.core import SummaryMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel, Field

from croupier.api.auth import require_read_key
from croupier.api.metrics import PREFIX, ServerMetrics
from croupier.policies.rollout.live import LiveArena

# /metrics carries the rows of the newest few fixed versions and the policies without a
# version, at most METRIC_ROWS of them (most games first): label values stay bounded however
# many versions a long run trains. The whole table is at /v1/arena/live.
METRIC_VERSIONS = 4
METRIC_ROWS = 64


class LiveRow(BaseModel):
    player: str = Field(description="The seat's policy: `frozen@N` for any fixed version N.")
    opponents: list[str] = Field(description="The other seats' policies, sorted.")
    games: int = Field(ge=0)
    mean: float = Field(description="Mean payoff per game of the player's seat.")
    std: float = Field(ge=0, description="Sample standard deviation of that payoff.")
    ci95: float = Field(ge=0, description="Half-width of the mean's 95% confidence interval.")


class LiveArenaTable(BaseModel):
    games: int = Field(ge=0, description="Games ended on this server since the table began.")
    persisted: bool = Field(description="Saved in the weights dir (kept across restarts).")
    rows: list[LiveRow] = Field(description="One per (player, opponents), most games first.")


live_router = APIRouter()


@live_router.get(
    "/v1/arena/live", dependencies=[Depends(require_read_key)], response_model=LiveArenaTable
)
async def live_arena(request: Request) -> dict[str, Any]:
    """The match table of the games this server's engines played: per policy and version,
    against the other seats' policies, games, mean payoff and its 95% CI."""
    return request.app.state.components.rollout.live.table()


def _version(player: str) -> int | None:
    """N of `frozen@N` or `frozen@N:greedy`; None for a player without a fixed version."""
    if not player.startswith("frozen@"):
        return None
    return int(player.removeprefix("frozen@").partition(":")[0])


def metric_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows exported to Prometheus: see METRIC_VERSIONS."""
    versions = sorted({v for r in rows if (v := _version(r["player"])) is not None})
    recent = set(versions[-METRIC_VERSIONS:])

    def shown(player: str) -> bool:
        version = _version(player)
        return version is None or version in recent

    chosen = [r for r in rows if shown(r["player"]) and all(map(shown, r["opponents"]))]
    return chosen[:METRIC_ROWS]


class LiveArenaCollector(Collector):
    def __init__(self, live: LiveArena):
        self.live = live

    def collect(self) -> Iterable[Any]:
        family = SummaryMetricFamily(
            f"{PREFIX}_live_arena_payoff",
            "Payoff per game of a policy against the other seats' policies (live games; the "
            "newest versions only, see /v1/arena/live for all)",
            labels=["player", "opponents"],
        )
        for row in metric_rows(self.live.rows()):
            sum_value = row["mean"] * row["games"]
            family.add_metric([row["player"], ",".join(row["opponents"])], row["games"], sum_value)
        yield family


def install_live_arena(app: FastAPI, live: LiveArena, metrics: ServerMetrics) -> None:
    app.include_router(live_router)
    metrics.register("live_arena", LiveArenaCollector(live))
