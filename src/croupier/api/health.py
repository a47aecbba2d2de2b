"""What `GET /healthz` and `GET /v1/policies` answer, as models for the OpenAPI document.

Documentation only: the routes answer the service's plain dicts, so a counter added to the
service reaches clients at once (a model would drop it) and these models name what is there
now; tests/test_contract.py and schemathesis's response checks hold the answers to them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class TrainerLink(BaseModel):
    connected: bool
    thread_alive: bool
    authenticated: bool
    connects: int
    versions_installed: int
    versions_refused: int
    errors: int
    trainer_acks: int
    max_message_bytes: int
    last_error_at: float | None = Field(description="Unix time of `last_error`.")
    trainer: str | None = Field(
        None, description="The trainer's address: only to a request with a key."
    )
    last_error: str | None = Field(
        None, description="Why the link last failed: only to a request with a key."
    )


class Health(BaseModel):
    """`GET /healthz`: alive and ready, with the counters an operator looks at first
    (docs/operations.md, "Counters")."""

    status: Literal["ok"]
    game: str = Field(description="The game this server plays.")
    version: int = Field(description="The newest learned version loaded.")
    games_in_flight: int
    games_created: int
    decisions: dict[str, int] = Field(description="Decisions by seat policy label.")
    batcher: dict[str, float] = Field(description="The dynamic batcher's counters.")
    episodes: dict[str, float | bool] = Field(description="The episode spool's counters.")
    fallbacks: int
    turn_replays: int
    refused_overload: int = Field(description="503s: the games or queued-decisions limit.")
    refused_quota: int = Field(description="429s: a key's games-in-flight cap.")
    refused_too_large: int = Field(description="413s.")
    expired_games: int
    refused_payoffs: int = Field(description="422s: payoffs or rewards outside the range.")
    games_resumed: int
    resumed_fragments_dropped: int
    episodes_cut: int
    episodes_ended_by_fallback: int
    weights_refused: int
    trainer_link: TrainerLink | None = Field(description="Null: no `--trainer`.")


class GameInfo(BaseModel):
    name: str
    obs_size: int
    num_actions: int
    num_players: int
    has_rules: bool
    payoff_range: list[float] = Field(min_length=2, max_length=2, description="[low, high].")
    policy: Literal["candidates"] | None = Field(
        None, description="A game of scored candidate moves (doudizhu, UNO): `candidates`."
    )
    candidate_size: int | None = None
    max_candidates: int | None = None


class Available(BaseModel):
    available: bool


class LearnedPolicy(Available):
    latest: int
    versions: list[int]
    production: int | None
    model: dict[str, Any] = Field(description="The learned policy's model (`algo` null until "
                                  "a trainer or the weights on disk said which).")  # fmt: skip


class SeatPolicies(BaseModel):
    rules: Available
    random: Available
    learned: LearnedPolicy


class Policies(BaseModel):
    """`GET /v1/policies`: the game, the seat mix, and the policies this server can seat."""

    game: GameInfo
    seat_mix: list[str]
    pin: Literal["created", "latest"]
    policies: SeatPolicies
