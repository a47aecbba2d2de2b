"""Request and response bodies of HTTP API v1 (they are also the OpenAPI docs at /docs)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import from_json

GameId = str
# Numbers must be JSON numbers: no "0.5" strings or booleans silently turned into floats.
Number = Annotated[float, Field(strict=True)]


def _integral(value: Any) -> Any:
    # JSON Schema's "integer" is any number with no fractional part (`3.0` included): take
    # those as ints; everything else (booleans, strings, 2.5) is refused strictly.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def integer(**constraints: Any) -> Any:
    """An integer as JSON Schema means it: strict (no booleans or "3"), but 3.0 is 3; with its
    constraints (ge, le) on the integer itself, so the schema shows them as such."""
    return Annotated[int, Field(strict=True, **constraints), BeforeValidator(_integral)]


Integer = integer()
# A strict boolean: `0` and `"true"` are not booleans.
StrictBool = Annotated[bool, Field(strict=True)]
# Safe in a URL path without escaping, and in a log line or a tab-separated file: no control
# characters, spaces or separators. Every game id (created, decided, ended) must match it. Not
# `.` or `..` (one character other than a dot, or three dots and more): every HTTP client
# normalises those path segments away (`/v1/games/../decide` is sent as `/v1/decide`), so such
# a game could be created but never reached.
GAME_ID_PATTERN = r"^(?:[A-Za-z0-9._~:-]*[A-Za-z0-9_~:-][A-Za-z0-9._~:-]*|\.{3,})$"
GAME_ID_MAX = 128
GAME_ID_RULE = "game_id must be letters, digits and . _ ~ : - only, and not '.' or '..'"
# For Python's `re`, `$` also matches before a final newline: fullmatch, no anchors.
SAFE_GAME_ID = re.compile(GAME_ID_PATTERN.removeprefix("^").removesuffix("$"))
# The engine's own value for an action: a name (most adapters) or an integer id.
Action = str | int


def _safe_game_id(value: str) -> str:
    if not SAFE_GAME_ID.fullmatch(value):
        raise ValueError(GAME_ID_RULE)  # a clear message, not the pattern's text
    return value


# A game id in a body: the pattern documented, checked with the rule's own message.
SafeGameId = Annotated[
    str,
    Field(min_length=1, max_length=GAME_ID_MAX, json_schema_extra={"pattern": GAME_ID_PATTERN}),
    AfterValidator(_safe_game_id),
]
SEAT_MAX = 64
TURN_MAX = 2**53  # exact in a double: any JSON client can count this far
BATCH_MAX = 4096


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateGame(_Body):
    game: str = Field(
        min_length=1, max_length=64, description="The game this server plays, e.g. 'leduc-holdem'."
    )
    game_id: SafeGameId | None = Field(
        None,
        description="Your id for the game (letters, digits, . _ ~ : -; not '.' or '..', which "
        "no URL can carry); generated if absent.",
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
    record: StrictBool | Literal["rules"] = Field(
        True,
        description="Record the learned seats' episodes for training; 'rules': also write "
        "the rules seats' decisions as offline episodes (servers with --offline-dir).",
    )


class SeatInfo(BaseModel):
    policy: str
    version: Integer | None


class GameCreated(BaseModel):
    game_id: GameId
    seats: dict[str, SeatInfo]


class DecideRequest(_Body):
    seat: str = Field(max_length=SEAT_MAX, description="The seat to act, e.g. '0'.")
    state: dict[str, Any] = Field(description="The game state as the engine sees it for the seat.")
    reward: Number | None = Field(
        None, description="What this seat received since its last decision."
    )
    turn: integer(ge=0, le=TURN_MAX) | None = Field(  # type: ignore[valid-type]
        None,
        description="Optional: the game's turn number, increasing through the game. A retry "
        "of the game's last turn (same seat, same state and reward) returns the same decision "
        "and records nothing more; an older turn, the same turn for another seat, or the same "
        "turn with another state or reward, is a 409.",
    )


class BatchItem(DecideRequest):
    game_id: SafeGameId


class DecideBatchRequest(_Body):
    items: list[BatchItem] = Field(
        max_length=BATCH_MAX,
        description="Decisions for many games, each a `decide` body with its `game_id` (and "
        "`turn`, `reward` as in `decide`); answered in order. An item the schema refuses "
        "fails the whole request (422, located under `body.items.<i>`); an item the game "
        "refuses (unknown, ended or expired game, a bad state, a turn out of order, "
        "overload) gets its own error and does not fail the others.",
    )


# --- errors: one shape for every error answer and every failed batch item -------------------


class FieldError(BaseModel):
    loc: list[str] = Field(description="Where: e.g. ['body', 'state'] or ['body', 'items', '3'].")
    msg: str
    type: str = Field(description="The validation error's kind, e.g. 'missing', 'string_type'.")


PROBLEM_URN = "urn:croupier:problem:"
# Every problem a server names (`Problem.type`), and what each means (docs/adapter.md).
PROBLEM_KINDS: dict[str, str] = {
    "invalid-request": "the body does not fit the schema (422)",
    "invalid-game-id": "a game id outside the allowed characters (422)",
    "unprocessable": "a state, seat, reward or payoff this game refuses (422)",
    "unknown-game": "no game has this id (404)",
    "game-ended": "the game has already ended (409)",
    "game-exists": "a duplicate game id (409)",
    "not-your-game": "the game was created with another API key (403)",
    "turn-conflict": "a turn out of order (409)",
    "seat-unavailable": "a well-formed seat this server cannot fill now (409)",
    "game-expired": "the server aborted the game for being idle (410)",
    "quota-exceeded": "this key's games in flight are at its limit (429)",
    "overloaded": "the server is at its games or queued-decisions limit (503)",
    "starting": "the server is starting: not ready yet (503)",
}
ProblemType = Literal[  # type: ignore[valid-type]
    tuple(["about:blank", *(PROBLEM_URN + kind for kind in PROBLEM_KINDS)])
]


class Problem(BaseModel):
    """Every error answer (RFC 9457 fields, as `application/json`), and every failed batch
    item's `error`."""

    type: ProblemType = Field(
        description="What went wrong, as a stable URI: `urn:croupier:problem:<name>` ("
        + "; ".join(f"`{kind}`: {text}" for kind, text in PROBLEM_KINDS.items())
        + "), or `about:blank` when the status says it all (401, 403, 405, 413, 415...)."
    )
    title: str = Field(description="The status's short phrase, e.g. 'Not Found'.")
    status: int = Field(description="The HTTP status (for a batch item: its own).")
    detail: str | list[FieldError] = Field(
        description="What to fix: a sentence, or for a request the schema refuses "
        "(`invalid-request`, 422) one entry per field."
    )
    retry_after: int | None = Field(
        None,
        description="Overloaded or starting (503) or a key's quota full (429): seconds to wait "
        "before retrying (also the `Retry-After` header of a whole-request answer).",
    )
    errors: list[FieldError] | None = Field(
        None,
        description="A 422: the fields at fault, each `{loc, msg, type}` (`loc` from `body`, "
        "or `path` for the game id; a batch item's from `body`, `items`, its index). Null "
        "when no one field is at fault.",
    )


ItemError = Problem  # a failed batch item's `error`


class DecideAnswer(BaseModel):
    action: Action = Field(
        description="The engine's own action value to apply: an action name (a string) for "
        "adapters with named actions, an integer id for vector adapters."
    )
    action_index: int = Field(description="The action's index in the adapter's action space.")
    policy: str
    version: int | None
    fallback: bool = Field(
        False,
        description="The learned policy missed its deadline, failed, or gave an answer unfit "
        "to serve (non-finite values, an illegal action); the fallback policy (named in "
        "`policy`) answered, and the step is not recorded for training.",
    )


class ItemFailed(BaseModel):
    """A batch item that failed; the others are answered as usual."""

    outcome: Literal["error"]
    error: Problem


class Decided(DecideAnswer):
    """A batch item answered: the same fields as `decide`'s answer."""

    outcome: Literal["ok"]
    error: None = None


BatchResult = Annotated[Decided | ItemFailed, Field(discriminator="outcome")]


class DecideBatchAnswer(BaseModel):
    results: list[BatchResult] = Field(description="One per item, in order.")


class EndRequest(_Body):
    payoffs: dict[str, Number] = Field(
        description="Every seat's final reward (in games that also report rewards through "
        "`decide`, what they have not yet received)."
    )


class GameEndedResponse(BaseModel):
    game_id: GameId
    episodes: int = Field(description="Episodes recorded for training from this game.")


# --- batch forms of create and end (an engine running many tables amortises HTTP) ----------


class CreateGamesRequest(_Body):
    games: list[CreateGame] = Field(
        max_length=BATCH_MAX,
        description="Games to start, each as the body of `POST /v1/games`; answered in order. "
        "An item the schema refuses fails the whole request (422); an item the server "
        "refuses (another game, a duplicate id, a seat it cannot fill, the games limit: 503 "
        "with `retry_after`) gets its own error and does not fail the others.",
    )


class Created(GameCreated):
    """A batch item answered: the same fields as `POST /v1/games`'s answer."""

    outcome: Literal["ok"]
    error: None = None


CreateResult = Annotated[Created | ItemFailed, Field(discriminator="outcome")]


class CreateGamesAnswer(BaseModel):
    results: list[CreateResult] = Field(description="One per game, in order.")


class EndBatchItem(EndRequest):
    game_id: SafeGameId


class EndBatchRequest(_Body):
    items: list[EndBatchItem] = Field(
        max_length=BATCH_MAX,
        description="Games to close, each {game_id, payoffs}; answered in order. Their "
        "episodes are written to the spool together, in one transaction, before the answer. "
        "An item the schema refuses fails the whole request (422); an item the server "
        "refuses (unknown, ended or expired game, payoffs not naming every seat) gets its own "
        "error and does not fail the others.",
    )


class Ended(GameEndedResponse):
    """A batch item answered: the same fields as `end`'s answer."""

    outcome: Literal["ok"]
    error: None = None


EndResult = Annotated[Ended | ItemFailed, Field(discriminator="outcome")]


class EndBatchAnswer(BaseModel):
    results: list[EndResult] = Field(description="One per item, in order.")


# --- failover: a game taken over from a dead server (docs/scale-out.md) ----------------------


class ResumeGame(_Body):
    game: str = Field(
        min_length=1, max_length=64, description="The game this server plays, e.g. 'leduc-holdem'."
    )
    seats: dict[str, SeatInfo] = Field(
        description="Every seat, exactly as the game's create (or last resume) answered it: "
        "{seat: {policy, version}}."
    )
    record: StrictBool | Literal["rules"] = Field(
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
# SAFE_GAME_ID's characters, and "/" to join ids with: an id of three or more of its
# characters matches SAFE_GAME_ID (the pattern refuses only "", "." and ".." beyond them).
_GAME_ID_CHARS = re.compile(r"[A-Za-z0-9._~:/-]*")


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
        # "", "." and "..": the pattern's refusals beyond its characters (checked after the loop)
        if len(game_id) < 3 and not SAFE_GAME_ID.fullmatch(game_id):
            return None
        reward, turn = item.get("reward"), item.get("turn")
        if type(reward) is int:  # a strict float field takes JSON integers (never booleans)
            reward = float(reward)
        elif reward is not None and type(reward) is not float:
            return None
        if type(turn) is float and turn.is_integer():  # JSON Schema's integer: 3.0 is 3
            turn = int(turn)
        if turn is not None and (type(turn) is not int or not 0 <= turn <= TURN_MAX):
            return None
        out.append((game_id, seat, state, reward, turn))
    # Every id's characters at once: one regex call for the batch, not one an item (~0.5 us
    # of a ~32 us item on a slow core). A "/" inside an id would read as a separator: counted.
    ids = "/".join([args[0] for args in out])
    if out and (not _GAME_ID_CHARS.fullmatch(ids) or ids.count("/") != len(out) - 1):
        return None
    return out
