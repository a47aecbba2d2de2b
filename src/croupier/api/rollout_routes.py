"""Rollout routes: the production channel (promote/rollback/canary share: admin) and counters."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from croupier.api.auth import require_admin_key, require_engine_key, require_read_key
from croupier.api.fast_lane import json_body, read_json
from croupier.api.schemas import Problem, integer
from croupier.policies.rollout import ChannelError, Rollout

rollout_router = APIRouter()

MAX_EVIDENCE_BYTES = 64_000


def rollout(request: Request) -> Rollout:
    return request.app.state.components.rollout


class _Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")
    evidence: dict[str, Any] | None = Field(
        None, description="Why (e.g. the arena result); logged with the change."
    )

    @field_validator("evidence")
    @classmethod
    def _small(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value)) > MAX_EVIDENCE_BYTES:
            raise ValueError(f"evidence must be under {MAX_EVIDENCE_BYTES} bytes of JSON")
        return value


class PromoteRequest(_Evidence):
    version: integer(ge=0) = Field(description="A loaded learned version.")  # type: ignore[valid-type]


class RollbackRequest(_Evidence):
    pass


class CanaryRequest(_Evidence):
    # allow_inf_nan=False: NaN would pass neither bound check yet make every draw fail;
    # strict: "0.5" (a string) is a client mistake, not a share.
    share: float = Field(
        ge=0.0, le=1.0, allow_inf_nan=False, strict=True,
        description="Share of new games whose `canary` seats get production (0 to 1).",
    )  # fmt: skip


# A read key's route: `croupier status` and a fleet check read it without the power to play
# games (an engine key feeds the learner).
@rollout_router.get("/v1/policies/channels", dependencies=[Depends(require_read_key)])
async def channels(request: Request) -> dict[str, Any]:
    """`latest`, `production`, the rollback history and the last promotions/rollbacks."""
    return rollout(request).channels.state()


CHANNEL_CONFLICT = {
    409: {"model": Problem, "description": "The channel cannot move so (e.g. not loaded)"}
}


@rollout_router.post(
    "/v1/policies/promote",
    dependencies=[Depends(require_admin_key)],
    responses=CHANNEL_CONFLICT,
    openapi_extra=json_body(PromoteRequest),
)
async def promote(request: Request) -> dict[str, Any]:
    """Point `production` at `version` (loaded); the previous one can be rolled back to."""
    body: PromoteRequest = await read_json(request, PromoteRequest)
    try:
        return rollout(request).channels.promote(body.version, body.evidence)
    except ChannelError as e:
        raise HTTPException(409, str(e)) from None


@rollout_router.post(
    "/v1/policies/rollback",
    dependencies=[Depends(require_admin_key)],
    responses=CHANNEL_CONFLICT,
    openapi_extra=json_body(RollbackRequest),
)
async def rollback(request: Request) -> dict[str, Any]:
    """Point `production` back at the version it had before the last promotion. The body is
    JSON, `{}` at the least: a bodyless POST is what a cross-origin page may send without a
    CORS preflight, so on a keyless server any page its browser opened could roll back."""
    body: RollbackRequest = await read_json(request, RollbackRequest)
    try:
        return rollout(request).channels.rollback(body.evidence)
    except ChannelError as e:
        raise HTTPException(409, str(e)) from None


@rollout_router.post(
    "/v1/policies/canary",
    dependencies=[Depends(require_admin_key)],
    openapi_extra=json_body(CanaryRequest),
)
async def canary(request: Request) -> dict[str, Any]:
    """Set the canary share at run time (new games from now on; persisted with a weights dir,
    where it outlives `--canary-share`)."""
    body: CanaryRequest = await read_json(request, CanaryRequest)
    return rollout(request).channels.set_canary_share(body.share, body.evidence)


@rollout_router.get("/v1/rollout", dependencies=[Depends(require_engine_key)])
async def rollout_stats(request: Request) -> dict[str, Any]:
    """Canary arms' games and payoffs, shadowed versions' disagreement and outcomes."""
    return rollout(request).stats()


@rollout_router.get("/v1/tiers", dependencies=[Depends(require_read_key)])
async def tiers(request: Request) -> dict[str, Any]:
    """The difficulty tiers `tier:1`..`tier:5` serve (`croupier tiers calibrate`): each one's
    version, temperature, rules share and strength against the rules with its 95% CI; the
    production version they were calibrated for, and `stale` once production moved on."""
    table = rollout(request)
    return table.tiers.state(table.channels.production)
