"""Request and response bodies of HTTP API v1 (they are also the OpenAPI docs at /docs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GameId = str
# Numbers must be JSON numbers: no "0.5" strings or booleans silently turned into floats.
Number = Annotated[float, Field(strict=True)]
GAME_ID_PATTERN = r"^[A-Za-z0-9._~:-]+$"  # safe in a URL path without escaping


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateGame(_Body):
    game: str = Field(description="The game this server plays, e.g. 'leduc-holdem'.")
    game_id: GameId | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=GAME_ID_PATTERN,
        description="Your id for the game (letters, digits, . _ ~ : -); generated if absent.",
    )
    seats: dict[str, str] | None = Field(
        None,
        description="Policy per seat ('rules', 'random', 'learned', 'learned@latest', "
        "'frozen@N', 'frozen@-K', 'production', 'canary', 'shadow', 'shadow@latest', "
        "'shadow@N', 'league'); seats not given are filled from the server's seat mix.",
    )
    pin: Literal["created", "latest"] | None = Field(
        None,
        description="'created': learned seats keep the version current now; 'latest': they "
        "follow each new version. Default: the server's setting.",
    )
    record: bool | Literal["rules"] = Field(
        True,
        description="Record the learned seats' episodes for training; 'rules': also write "
        "the rules seats' decisions as offline episodes (servers with --offline-dir).",
    )


class SeatInfo(BaseModel):
    policy: str
    version: int | None


class GameCreated(BaseModel):
    game_id: GameId
    seats: dict[str, SeatInfo]


class DecideRequest(_Body):
    seat: str = Field(max_length=64, description="The seat to act, e.g. '0'.")
    state: dict[str, Any] = Field(description="The game state as the engine sees it for the seat.")
    reward: Number | None = Field(
        None, description="What this seat received since its last decision."
    )
    turn: Annotated[int, Field(strict=True, ge=0, le=2**53)] | None = Field(
        None,
        description="Optional: the game's turn number, increasing through the game. A retry "
        "of the game's last turn (same seat) returns the same decision and records nothing "
        "more; an older turn, or the same turn for another seat, is a 409.",
    )


class BatchItem(DecideRequest):
    game_id: GameId = Field(max_length=128)


class DecideBatchRequest(_Body):
    items: list[Any] = Field(
        max_length=4096,
        description="Decisions for many games, each {game_id, seat, state, reward?}; answered "
        "in order. A bad item gets its own error and does not fail the others.",
    )


class ItemError(BaseModel):
    status: int
    detail: Any


class DecideResponse(BaseModel):
    action: Any = Field(description="The engine's own action value to apply.")
    action_index: int
    policy: str
    version: int | None
    fallback: bool = Field(
        False,
        description="The learned policy missed its deadline or failed; the fallback policy "
        "(named in `policy`) answered, and the step is not recorded for training.",
    )


class BatchResult(BaseModel):
    action: Any = None
    action_index: int | None = None
    policy: str | None = None
    version: int | None = None
    fallback: bool | None = None
    error: ItemError | None = None


class DecideBatchResponse(BaseModel):
    results: list[BatchResult]


class EndRequest(_Body):
    payoffs: dict[str, Number] = Field(
        description="Every seat's final reward (in games that also report rewards through "
        "`decide`, what they have not yet received)."
    )


class GameEndedResponse(BaseModel):
    game_id: GameId
    episodes: int = Field(description="Episodes recorded for training from this game.")


class Problem(BaseModel):
    detail: Any


# --- batch forms of create and end (an engine running many tables amortises HTTP) ----------


class CreateGamesRequest(_Body):
    games: list[Any] = Field(
        max_length=4096,
        description="Games to start, each as the body of `POST /v1/games`; answered in order. "
        "A bad item gets its own error and does not fail the others.",
    )


class CreateResult(BaseModel):
    game_id: GameId | None = None
    seats: dict[str, SeatInfo] | None = None
    error: ItemError | None = None


class CreateGamesResponse(BaseModel):
    results: list[CreateResult]


class EndBatchItem(EndRequest):
    game_id: GameId = Field(max_length=128)


class EndBatchRequest(_Body):
    items: list[Any] = Field(
        max_length=4096,
        description="Games to close, each {game_id, payoffs}; answered in order. Their "
        "episodes are written to the spool together, in one transaction, before the answer.",
    )


class EndResult(BaseModel):
    game_id: GameId | None = None
    episodes: int | None = None
    error: ItemError | None = None


class EndBatchResponse(BaseModel):
    results: list[EndResult]
