"""The zones a card game's state holds: each one field's checks, features and JSON Schema
side by side (`croupier.games.cards`).

Why ~430 lines in one module: every zone's checks, features and schema side by side, each
zone a few dozen lines; split by zone, a reader would lose the one place that lists them all."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple, Protocol

import numpy as np

from croupier.games.base import InvalidState
from croupier.games.cards.deck import Kind, Move
from croupier.games.cards.state import CardSet

_PAIRS = {list, tuple}  # a [seat, move] entry: JSON gives lists, an in-process caller tuples


class GameView(Protocol):
    """What a zone reads of the game it belongs to (`CardGame` is one): its sizes, its
    readers of JSON (a number, a seat's list, a set of cards, a move), a set's features, the
    schema's parts. Named here, not imported from `game.py`, which imports the zones."""

    players: int
    kinds: tuple[Kind, ...]
    choices: tuple[str, ...]

    @property
    def card_width(self) -> int: ...
    @property
    def set_size(self) -> int: ...
    @property
    def move_size(self) -> int: ...
    @property
    def known_moves(self) -> dict[str, Move]: ...
    def seats_from(self, seat: int) -> tuple[int, ...]: ...
    def int_in(self, x: Any, lo: int, hi: int, what: str) -> int: ...
    def number(self, x: Any, lo: float, hi: float, integer: bool, what: str) -> float: ...
    def seat_list(self, x: Any, what: str) -> list[Any]: ...
    def read_cards(
        self, x: Any, max_cards: int, what: str, joined: bool = False, keep: bool = True
    ) -> CardSet: ...
    def set_row(self, cards: CardSet, max_cards: int) -> np.ndarray: ...
    def move(self, x: Any, what: str) -> Move: ...
    def card_schema(self) -> dict[str, Any]: ...
    def cards_schema(self, max_cards: int, joined: bool = False) -> dict[str, Any]: ...
    def number_schema(self, low: float, high: float, integer: bool) -> dict[str, Any]: ...
    def per_seat(self, one: dict[str, Any]) -> dict[str, Any]: ...
    def move_schema(self) -> dict[str, Any]: ...


class Trace(NamedTuple):
    """A `History`'s moves, oldest first: who played each, and the move (and with
    `History.then`, what was in force, each an index into it)."""

    seats: list[int]
    moves: list[Move]
    then: list[int] | None = None


# --- zones ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Zone:
    """One field of the state. `required`: the state must have it (else its default: empty,
    0, the first choice)."""

    field: str
    required: bool = True

    def size(self, g: GameView) -> int:
        return 0

    def schema(self, g: GameView) -> dict[str, Any]:
        return {}

    def read(self, x: Any, g: GameView) -> Any:
        return x

    def default(self, g: GameView) -> Any:
        raise InvalidState(f"the state has no {self.field!r}")

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        pass


@dataclass(frozen=True)
class Seat(Zone):
    """The acting seat (0-based): per-seat zones and the history are read from it round the
    table, so one layout serves every seat."""

    def schema(self, g: GameView) -> dict[str, Any]:
        return {"type": "integer", "minimum": 0, "maximum": g.players - 1}

    def read(self, x: Any, g: GameView) -> int:
        return g.int_in(x, 0, g.players - 1, self.field)

    def default(self, g: GameView) -> int:
        return 0


@dataclass(frozen=True)
class RoleSeat(Zone):
    """A seat the state names for a role (the landlord, the dealer, the declarer), one-hot
    round the table from the acting seat. `alone`: that seat plays alone against the others
    together (doudizhu's landlord): the game's teams (`CardGame.teams`)."""

    alone: bool = False

    def __post_init__(self) -> None:
        if not self.required:  # no seat can stand for "no one holds the role"
            raise ValueError(f"RoleSeat {self.field!r} names a seat: it has no default")

    def size(self, g: GameView) -> int:
        return g.players

    def schema(self, g: GameView) -> dict[str, Any]:
        return {"type": "integer", "minimum": 0, "maximum": g.players - 1}

    def read(self, x: Any, g: GameView) -> int:
        return g.int_in(x, 0, g.players - 1, self.field)

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        out[(value - seat) % g.players] = 1.0


@dataclass(frozen=True)
class Pile(Zone):
    """A list of cards (the discard pile, the public cards, the current trick, melds).
    `counted`: the deck's copies bound it together with the other counted zones (False for a
    pile that may repeat cards, e.g. a discard pile reshuffled into the stock). `joined`: the
    cards written as one string, a character each ("33345": RLCard's doudizhu)."""

    max_cards: int = 52
    counted: bool = True
    joined: bool = False

    def size(self, g: GameView) -> int:
        return g.set_size

    def schema(self, g: GameView) -> dict[str, Any]:
        return g.cards_schema(self.max_cards, self.joined)

    def read(self, x: Any, g: GameView) -> CardSet:
        return g.read_cards(x, self.max_cards, self.field, self.joined)

    def default(self, g: GameView) -> CardSet:
        return g.read_cards([], self.max_cards, self.field)

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        out[:] = g.set_row(value, self.max_cards)  # kept with the set: sets repeat


@dataclass(frozen=True)
class Hand(Pile):
    """The acting seat's own cards: `from_hand` moves are made of them. `size_in`: a
    `SeatNumbers` field that counts each seat's cards ("num_cards_left"): the hand must
    hold as many as its entry for the seat to act (checked: a 422 otherwise)."""

    size_in: str | None = None


@dataclass(frozen=True)
class TopCard(Pile):
    """One card or null (the top of the discard pile), read as a pile of at most one."""

    max_cards: int = 1

    def schema(self, g: GameView) -> dict[str, Any]:
        return {"anyOf": [{"type": "null"}, g.card_schema()]}

    def read(self, x: Any, g: GameView) -> CardSet:
        if x is not None and not isinstance(x, str):
            raise InvalidState(f"{self.field!r} must be a card or null, got {x!r}")
        return g.read_cards([] if x is None else [x], 1, self.field)


@dataclass(frozen=True)
class SeatPiles(Zone):
    """A list of cards per seat (what each seat played), in seat order (`joined`: a string
    per seat, as `Pile`)."""

    max_cards: int = 52
    counted: bool = True
    joined: bool = False

    def size(self, g: GameView) -> int:
        return g.players * g.card_width

    def schema(self, g: GameView) -> dict[str, Any]:
        return g.per_seat(g.cards_schema(self.max_cards, self.joined))

    def read(self, x: Any, g: GameView) -> list[CardSet]:
        piles = g.seat_list(x, self.field)
        return [g.read_cards(p, self.max_cards, self.field, self.joined) for p in piles]

    def default(self, g: GameView) -> list[CardSet]:
        return [g.read_cards([], self.max_cards, self.field)] * g.players

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        # A set's card columns (per card / its copies, or per copy): its features begin so
        # (kept with the set; each seat's played cards repeat until it plays again), round
        # the table from `seat`.
        d = g.card_width
        rows = [g.set_row(value[s], self.max_cards)[:d] for s in g.seats_from(seat)]
        np.concatenate(rows, out=out)


@dataclass(frozen=True)
class SeatNumbers(Zone):
    """A number per seat (cards held, chips in), in seat order, in [low, high]."""

    low: float = 0
    high: float = 52
    integer: bool = True

    def size(self, g: GameView) -> int:
        return g.players

    def schema(self, g: GameView) -> dict[str, Any]:
        return g.per_seat(g.number_schema(self.low, self.high, self.integer))

    def read(self, x: Any, g: GameView) -> list[float]:
        values = g.seat_list(x, self.field)
        return [g.number(v, self.low, self.high, self.integer, self.field) for v in values]

    def default(self, g: GameView) -> list[float]:
        return [float(self.low)] * g.players

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        # (Python floats: the same float64 arithmetic as numpy's, no array per state)
        span = max(self.high - self.low, 1e-9)
        out[:] = [(value[s] - self.low) / span for s in g.seats_from(seat)]


@dataclass(frozen=True)
class Number(Zone):
    """One number in [low, high] (the pot, the round), scaled to 0..1."""

    low: float = 0
    high: float = 1
    integer: bool = False

    def size(self, g: GameView) -> int:
        return 1

    def schema(self, g: GameView) -> dict[str, Any]:
        return g.number_schema(self.low, self.high, self.integer)

    def read(self, x: Any, g: GameView) -> float:
        return g.number(x, self.low, self.high, self.integer, self.field)

    def default(self, g: GameView) -> float:
        return float(self.low)

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        out[0] = (value - self.low) / max(self.high - self.low, 1e-9)


@dataclass(frozen=True)
class Numbers(Number):
    """A fixed-length list of numbers in [low, high] (raises per betting round)."""

    length: int = 1

    def size(self, g: GameView) -> int:
        return self.length

    def schema(self, g: GameView) -> dict[str, Any]:
        one = g.number_schema(self.low, self.high, self.integer)
        return {
            "type": "array",
            "prefixItems": [one] * self.length,
            "minItems": self.length,
            "maxItems": self.length,
        }

    def read(self, x: Any, g: GameView) -> np.ndarray:
        if type(x) is not list or len(x) != self.length:
            raise InvalidState(f"{self.field!r} must be a list of {self.length} numbers")
        return np.array([g.number(v, self.low, self.high, self.integer, self.field) for v in x])

    def default(self, g: GameView) -> np.ndarray:
        return np.full(self.length, self.low, np.float64)

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        out[:] = (value - self.low) / max(self.high - self.low, 1e-9)


@dataclass(frozen=True)
class Choice(Zone):
    """One of a few names (the phase, the suit called), one-hot."""

    options: tuple[str, ...] = ()

    def size(self, g: GameView) -> int:
        return len(self.options)

    def schema(self, g: GameView) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.options)}

    def read(self, x: Any, g: GameView) -> int:
        if not isinstance(x, str) or x not in self.options:
            raise InvalidState(f"{self.field!r} must be one of {list(self.options)}, got {x!r}")
        return self.options.index(x)

    def default(self, g: GameView) -> int:
        return 0

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        out[value] = 1.0


@dataclass(frozen=True)
class History(Zone):
    """The moves so far, oldest first, each `[seat, move]` (at most `max_moves`); the last
    `last` are features, newest first: the seat round the table, the kind, the cards.
    `then`: each entry is `[seat, move, one of then]`, what was in force when the move was
    made (RLCard's UNO engine: the colour the seat faced; a draw facing red says it had no
    red), one-hot after the move.
    `recency`: after those, over every move the state lists, how lately each seat (round the
    table from yours) made each kind of move (facing each of `then`): 1 / (1 + that seat's
    moves since), 0 if it did not. What a seat did facing what stays in view past the last
    `last` (UNO: the opponent drew facing red two of its moves ago: 1/3)."""

    last: int = 8
    max_moves: int = 400
    then: tuple[str, ...] = ()
    recency: bool = False

    def size(self, g: GameView) -> int:
        return self._moves_size(g) + self._recency_size(g)

    def _moves_size(self, g: GameView) -> int:
        return self.last * (g.move_size + len(self.then))

    def _recency_size(self, g: GameView) -> int:
        return g.players * len(g.kinds) * max(1, len(self.then)) if self.recency else 0

    def schema(self, g: GameView) -> dict[str, Any]:
        pair = [Seat("").schema(g), g.move_schema()]
        if self.then:
            pair.append({"type": "string", "enum": list(self.then)})
        n = len(pair)
        return {
            "type": "array",
            "maxItems": self.max_moves,
            "items": {"type": "array", "prefixItems": pair, "minItems": n, "maxItems": n},
        }

    def read(self, x: Any, g: GameView) -> Trace:
        if type(x) is not list or len(x) > self.max_moves:
            raise InvalidState(f"{self.field!r} must be a list of at most {self.max_moves} moves")
        width = 3 if self.then else 2
        # The common case in C loops (`map`, `set`, `chain`): [seat, move(, in force)] entries,
        # int seats in range, moves seen before (`CardGame.move`'s cache); ~4x cheaper than an
        # entry at a time for doudizhu's traces of up to ~50 moves (~3x for UNO's 16), and no
        # tuple an entry.
        try:
            if set(map(type, x)) <= _PAIRS and set(map(len, x)) <= {width}:
                flat = list(chain.from_iterable(x))
                seats, moves = flat[0::width], list(map(g.known_moves.get, flat[1::width]))
                then = flat[2::width] if self.then else []
                ok = set(map(type, seats)) <= {int} and set(seats) <= set(range(g.players))
                if ok and set(then) <= set(self.then) and all(moves):  # (a Move is true)
                    index = list(map(self.then.index, then)) if self.then else None
                    return Trace(seats, moves, index)
        except TypeError:  # an unhashable entry: read entry by entry, which says why
            pass
        out = Trace([], [], [] if self.then else None)
        shape = "[seat, move, in force]" if self.then else "[seat, move]"
        for entry in x:
            if type(entry) not in _PAIRS or len(entry) != width:
                raise InvalidState(f"each of {self.field!r} must be {shape}, got {entry!r}")
            if self.then and (not isinstance(entry[2], str) or entry[2] not in self.then):
                raise InvalidState(f"{self.field!r}: in force is one of {list(self.then)}")
            out.seats.append(g.int_in(entry[0], 0, g.players - 1, self.field))
            out.moves.append(g.move(entry[1], self.field))
            if self.then:
                out.then.append(self.then.index(entry[2]))  # type: ignore[union-attr]
        return out

    def default(self, g: GameView) -> Trace:
        return Trace([], [], [] if self.then else None)

    def encode(self, value: Any, g: GameView, seat: int, out: np.ndarray) -> None:
        if self.recency:
            self._encode_recency(value, g, seat, out[self._moves_size(g) :])
        k = min(self.last, len(value.moves))
        if not k:
            return
        # Each move's kind and cards are the first columns of its row (`CardGame.move_row`):
        # one gather for the moves, one write of every 1.0 (the seats, the choices, what was
        # in force), not writes a move.
        n, size = g.players, g.move_size + len(self.then)
        base = n + len(g.kinds) + g.card_width  # then the choice, then what was in force
        moves = value.moves[: -k - 1 : -1]
        rows = np.concatenate([m.row for m in moves]).reshape(k, -1)
        view = out[: self.last * size].reshape(self.last, size)
        view[:k, n:base] = rows[:, : base - n]
        ones = [i * size + (who - seat) % n for i, who in enumerate(value.seats[: -k - 1 : -1])]
        if g.choices:
            ones += [i * size + base + m.choice for i, m in enumerate(moves) if m.choice >= 0]
        if self.then:
            at = g.move_size
            ones += [i * size + at + t for i, t in enumerate(value.then[: -k - 1 : -1])]
        out[ones] = 1.0

    def _encode_recency(self, value: Trace, g: GameView, seat: int, out: np.ndarray) -> None:
        # A loop over the listed moves, newest first (UNO's engine lists 16; a doudizhu trace
        # is ~50): the first of each (seat, kind, in force) met is its latest.
        n, kinds, faced = g.players, len(g.kinds), max(1, len(self.then))
        since = [0] * n  # each seat's own moves newer than the one looked at
        latest: dict[int, float] = {}  # (in Python: a numpy item read or write is ~0.1 us)
        seats, moves, then = value.seats, value.moves, value.then
        for i in range(len(moves) - 1, -1, -1):
            who = seats[i]
            j = (((who - seat) % n) * kinds + moves[i].kind) * faced
            j += then[i] if then is not None else 0
            if j not in latest:
                latest[j] = 1.0 / (1 + since[who])
            since[who] += 1
        if latest:
            out[list(latest)] = list(latest.values())
