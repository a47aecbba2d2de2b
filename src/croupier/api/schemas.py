"""Request and response bodies of HTTP API v1 (they are also the OpenAPI docs at /docs)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import from_json

GameId = str
# Numbers must be JSON numbers: no "0.5" strings or booleans silently turned into floats.
Number = Annotated[float, Field(strict=True)]
# Safe in a URL path without escaping, and in a log line or a tab-separated file: no control
# characters, spaces or separators. Every game id (created, decided, ended) must match it.
GAME_ID_PATTERN = r"^[A-Za-z0-9._~:-]+$"
GAME_ID_MAX = 128
# For Python's `re`, `$` also matches before a final newline: fullmatch, no anchors.
SAFE_GAME_ID = re.compile(GAME_ID_PATTERN.strip("^$"))
SEAT_MAX = 64
TURN_MAX = 2**53  # exact in a double: any JSON client can count this far
BATCH_MAX = 4096


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateGame(_Body):
    game: str = Field(description="The game this server plays, e.g. 'leduc-holdem'.")
    game_id: GameId | None = Field(
        None,
        min_length=1,
        max_length=GAME_ID_MAX,
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
    seat: str = Field(max_length=SEAT_MAX, description="The seat to act, e.g. '0'.")
    state: dict[str, Any] = Field(description="The game state as the engine sees it for the seat.")
    reward: Number | None = Field(
        None, description="What this seat received since its last decision."
    )
    turn: Annotated[int, Field(strict=True, ge=0, le=TURN_MAX)] | None = Field(
        None,
        description="Optional: the game's turn number, increasing through the game. A retry "
        "of the game's last turn (same seat, same state and reward) returns the same decision "
        "and records nothing more; an older turn, the same turn for another seat, or the same "
        "turn with another state or reward, is a 409.",
    )


class BatchItem(DecideRequest):
    game_id: GameId = Field(max_length=GAME_ID_MAX, pattern=GAME_ID_PATTERN)


class DecideBatchRequest(_Body):
    items: list[Any] = Field(
        max_length=BATCH_MAX,
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
        description="The learned policy missed its deadline, failed, or gave an answer unfit "
        "to serve (non-finite values, an illegal action); the fallback policy (named in "
        "`policy`) answered, and the step is not recorded for training.",
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
        max_length=BATCH_MAX,
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
    game_id: GameId = Field(max_length=GAME_ID_MAX, pattern=GAME_ID_PATTERN)


class EndBatchRequest(_Body):
    items: list[Any] = Field(
        max_length=BATCH_MAX,
        description="Games to close, each {game_id, payoffs}; answered in order. Their "
        "episodes are written to the spool together, in one transaction, before the answer.",
    )


class EndResult(BaseModel):
    game_id: GameId | None = None
    episodes: int | None = None
    error: ItemError | None = None


class EndBatchResponse(BaseModel):
    results: list[EndResult]


# --- failover: a game taken over from a dead server (docs/scale-out.md) ----------------------


class ResumeGame(_Body):
    game: str = Field(description="The game this server plays, e.g. 'leduc-holdem'.")
    seats: dict[str, SeatInfo] = Field(
        description="Every seat, exactly as the game's create (or last resume) answered it: "
        "{seat: {policy, version}}."
    )
    record: bool | Literal["rules"] = Field(
        True, description="As the game's create said: record its learned seats from here on."
    )


class VersionSubstituted(BaseModel):
    asked: int
    served: int


class GameResumed(GameCreated):
    resumed: bool = Field(
        description="true: the game was re-created here, its learned seats recording afresh "
        "(what the dead server recorded of it is lost, and counted); false: it was already "
        "live here (a retried resume), unchanged."
    )
    substituted: dict[str, VersionSubstituted] = Field(
        description="Seats whose version is not loaded here: the version asked and the one "
        "served instead (the oldest loaded at or after it; the newest if it is newer)."
    )


# --- decide:batch items without building models ---------------------------------------------

# A decide's arguments: game_id, seat, state, reward, turn.
DecideArgs = tuple[str, str, dict[str, Any], float | None, int | None]
_BATCH_ITEM_FIELDS = frozenset(BatchItem.model_fields)


def well_formed_batch(raw: bytes) -> list[DecideArgs] | None:
    """A `decide:batch` body whose every item is well-formed, as decide arguments; None when
    anything in it is not (`DecideBatchRequest` and `BatchItem` then say what, item by item).

    The models' constraints checked by hand on the models' own JSON parser (so the values,
    big integers and NaN included, are theirs): validating into a model per item cost ~4.4 us
    of a batch item's ~25, parsing alone ~2.3 (orjson ~1.5, but it reads integers past 64 bits
    as floats). `tests/test_batch_and_options.py` holds the two readings to the same verdicts
    and values on generated items."""
    try:
        body = from_json(raw)
    except ValueError:
        return None
    if type(body) is not dict or body.keys() != {"items"}:
        return None
    items = body["items"]
    if type(items) is not list or len(items) > BATCH_MAX:
        return None
    out: list[DecideArgs] = []
    for item in items:
        if type(item) is not dict or not _BATCH_ITEM_FIELDS.issuperset(item):
            return None
        game_id, seat, state = item.get("game_id"), item.get("seat"), item.get("state")
        if type(game_id) is not str or type(seat) is not str or type(state) is not dict:
            return None
        if len(game_id) > GAME_ID_MAX or len(seat) > SEAT_MAX:
            return None
        if not SAFE_GAME_ID.fullmatch(game_id):
            return None
        reward, turn = item.get("reward"), item.get("turn")
        if type(reward) is int:  # a strict float field takes JSON integers (never booleans)
            reward = float(reward)
        elif reward is not None and type(reward) is not float:
            return None
        if turn is not None and (type(turn) is not int or not 0 <= turn <= TURN_MAX):
            return None
        out.append((game_id, seat, state, reward, turn))
    return out
