"""The card-game toolkit: declare a card game, get its adapter.

A studio describes its game as data (`CardGame`): the deck (`Deck`: ranks, suits, jokers,
copies), the zones a state holds (`Hand`, `Pile`, `TopCard`, `SeatPiles`, `SeatNumbers`,
`Number`, `Choice`, `Seat`, `History`: the own hand, the discard top or pile, melds, the cards
each seat played, counts per seat, the recent moves) and its moves, each a set of cards with a
kind (`Kind`: "play 7H", "pair 7H 7S", "fold"). From that croupier builds, with nothing
engineered by hand:

- the state features: each zone in declaration order (`CardGame.obs_size`); a set of cards as
  counts per card, per rank and per suit, and its size; per-seat zones read from the acting
  seat round the table; the last `History.last` moves newest first (seat, kind, cards);
- two action heads from the one declaration: a fixed head (`CardGameAdapter`: one slot per
  cardless kind, per card or per main rank of a card kind, `Kind.head`; a slot stands for the
  first legal move listed in it) and scored candidates (`CardCandidatesAdapter`: what
  doudizhu's move context does, in general form: each legal move's kind, its cards, what it
  leaves in the hand, and how it answers the zone named `answers`: the trick, the move to
  beat, the top of the discard);
- the legal-move checks: every legal move is spelled `"<kind>[ <card>...]"` with a known kind
  and as many cards as the kind takes, listed once, made of cards in the hand (a `from_hand`
  kind); the zones together hold no more of a card than the deck (`counted` zones);
- the JSON Schema of the state (`state_schema`), of an action and of a payoff (from
  `payoff_range`): what the server's OpenAPI document publishes, as strict as JSON Schema can
  say, never stricter than the checks (`tests/test_cards.py` holds both ways).

What JSON Schema cannot say stays a 422: a legal move's cards in the hand, the deck's copies
across the counted zones and within one move.

A game through the toolkit is `examples/limit_holdem/`, `examples/crazy_eights/`,
`examples/president/` (docs/your-game.md leads with it).

Why ~560 lines in one module: the zones' features, checks and schema are one definition of a
game's wire format per zone, side by side; split, a field would be read in one file and typed
in another (the rule `games/base.py` follows too).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from croupier.games.base import CandidateAdapter, GameAdapter, InvalidState, json_int

# --- the deck ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deck:
    """Cards named rank+suit ("7H"; `suit_first`: "H7", as RLCard and OpenSpiel spell them),
    ranks from low to high, then the jokers (named as given, ranked above every rank), each
    card `copies` times in the deck."""

    ranks: str | tuple[str, ...]
    suits: str | tuple[str, ...] = ()
    jokers: tuple[str, ...] = ()
    copies: int = 1
    suit_first: bool = False
    cards: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        ranks, suits = tuple(self.ranks), tuple(self.suits)
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "suits", suits)
        names = [s + r if self.suit_first else r + s for r in ranks for s in suits or ("",)]
        object.__setattr__(self, "cards", (*names, *self.jokers))
        if len(set(self.cards)) != len(self.cards) or not all(self.cards):
            raise ValueError("every card of a deck needs a name of its own")
        if any(" " in c for c in self.cards) or self.copies < 1:
            raise ValueError("card names have no spaces; a deck holds each card at least once")

    @property
    def size(self) -> int:
        return len(self.cards)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks) + len(self.jokers)

    def tables(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        """(index by name, rank of each card, one-hot rank matrix, one-hot suit matrix)."""
        index = {c: i for i, c in enumerate(self.cards)}
        per_rank = max(len(self.suits), 1)
        rank = np.array([i // per_rank for i in range(len(self.cards) - len(self.jokers))]
                        + [len(self.ranks) + j for j in range(len(self.jokers))], np.int64)  # fmt: skip
        by_rank = np.eye(self.num_ranks, dtype=np.float32)[rank]
        by_suit = np.zeros((self.size, len(self.suits)), np.float32)
        for i in range(self.size - len(self.jokers)):
            by_suit[i, i % per_rank] = 1.0
        return index, rank, by_rank, by_suit

    def pattern(self) -> str:
        """One card, as a regular expression (no anchors)."""
        simple = all(len(x) == 1 for x in (*self.ranks, *self.suits))
        if simple and self.suits:
            r, s = (f"[{re.escape(''.join(x))}]" for x in (self.ranks, self.suits))
            plain = s + r if self.suit_first else r + s
        else:
            plain = "|".join(map(re.escape, self.cards[: self.size - len(self.jokers)]))
        return "(?:" + "|".join([plain, *map(re.escape, self.jokers)]) + ")"


# --- moves --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A kind of move: `cards` (fewest, most) it takes; `from_hand`: its cards must be in the
    hand; `head`: how the fixed head tells its moves apart, "card" (one slot per card: a kind
    of one card), "rank" (per main rank: the rank it holds most of) or "none" (one slot).
    Default: none for a cardless kind, card for a one-card kind, rank otherwise."""

    name: str
    cards: tuple[int, int] = (0, 0)
    from_hand: bool = True
    head: str = ""

    def slots(self, deck: Deck) -> int:
        return {"none": 1, "card": deck.size, "rank": deck.num_ranks}[self.head_kind]

    @property
    def head_kind(self) -> str:
        if self.head:
            return self.head
        return "none" if self.cards[1] == 0 else "card" if self.cards[1] == 1 else "rank"


@dataclass(frozen=True)
class Move:
    kind: int  # index into the game's kinds
    counts: np.ndarray  # int64[deck size]
    first: int  # the first card's index (-1: no card)


# --- zones ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Zone:
    """One field of the state. `required`: the state must have it (else its default: empty,
    0, the first choice)."""

    field: str
    required: bool = True

    def size(self, g: CardGame) -> int:
        return 0

    def schema(self, g: CardGame) -> dict[str, Any]:
        return {}

    def read(self, x: Any, g: CardGame) -> Any:
        return x

    def default(self, g: CardGame) -> Any:
        raise InvalidState(f"the state has no {self.field!r}")

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        pass


@dataclass(frozen=True)
class Seat(Zone):
    """The acting seat (0-based): per-seat zones and the history are read from it round the
    table, so one layout serves every seat."""

    def schema(self, g: CardGame) -> dict[str, Any]:
        return {"type": "integer", "minimum": 0, "maximum": g.players - 1}

    def read(self, x: Any, g: CardGame) -> int:
        return g.int_in(x, 0, g.players - 1, self.field)

    def default(self, g: CardGame) -> int:
        return 0


@dataclass(frozen=True)
class Pile(Zone):
    """A list of cards (the discard pile, the public cards, the current trick, melds).
    `counted`: the deck's copies bound it together with the other counted zones (False for a
    pile that may repeat cards, e.g. a discard pile reshuffled into the stock)."""

    max_cards: int = 52
    counted: bool = True

    def size(self, g: CardGame) -> int:
        return g.set_size

    def schema(self, g: CardGame) -> dict[str, Any]:
        return g.cards_schema(self.max_cards)

    def read(self, x: Any, g: CardGame) -> tuple[np.ndarray, list[int]]:
        return g.read_cards(x, self.max_cards, self.field)

    def default(self, g: CardGame) -> tuple[np.ndarray, list[int]]:
        return g.read_cards([], self.max_cards, self.field)

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[:] = g.set_features(value[0][None], self.max_cards)[0]


@dataclass(frozen=True)
class Hand(Pile):
    """The acting seat's own cards: `from_hand` moves are made of them."""


@dataclass(frozen=True)
class TopCard(Pile):
    """One card or null (the top of the discard pile), read as a pile of at most one."""

    max_cards: int = 1

    def schema(self, g: CardGame) -> dict[str, Any]:
        return {"anyOf": [{"type": "null"}, g.card_schema()]}

    def read(self, x: Any, g: CardGame) -> tuple[np.ndarray, list[int]]:
        if x is not None and not isinstance(x, str):
            raise InvalidState(f"{self.field!r} must be a card or null, got {x!r}")
        return g.read_cards([] if x is None else [x], 1, self.field)


@dataclass(frozen=True)
class SeatPiles(Zone):
    """A list of cards per seat (what each seat played), in seat order."""

    max_cards: int = 52
    counted: bool = True

    def size(self, g: CardGame) -> int:
        return g.players * g.deck.size

    def schema(self, g: CardGame) -> dict[str, Any]:
        return g.per_seat(g.cards_schema(self.max_cards))

    def read(self, x: Any, g: CardGame) -> tuple[np.ndarray, list[int]]:
        piles = g.seat_list(x, self.field)
        counts = [g.read_cards(p, self.max_cards, self.field)[0] for p in piles]
        return np.stack(counts), []

    def default(self, g: CardGame) -> tuple[np.ndarray, list[int]]:
        return np.zeros((g.players, g.deck.size), np.int64), []

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[:] = (np.roll(value[0], -seat, axis=0) / g.deck.copies).reshape(-1)


@dataclass(frozen=True)
class SeatNumbers(Zone):
    """A number per seat (cards held, chips in), in seat order, in [low, high]."""

    low: float = 0
    high: float = 52
    integer: bool = True

    def size(self, g: CardGame) -> int:
        return g.players

    def schema(self, g: CardGame) -> dict[str, Any]:
        return g.per_seat(g.number_schema(self.low, self.high, self.integer))

    def read(self, x: Any, g: CardGame) -> np.ndarray:
        values = g.seat_list(x, self.field)
        return np.array([g.number(v, self.low, self.high, self.integer, self.field)
                         for v in values], np.float64)  # fmt: skip

    def default(self, g: CardGame) -> np.ndarray:
        return np.full(g.players, self.low, np.float64)

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[:] = (np.roll(value, -seat) - self.low) / max(self.high - self.low, 1e-9)


@dataclass(frozen=True)
class Number(Zone):
    """One number in [low, high] (the pot, the round), scaled to 0..1."""

    low: float = 0
    high: float = 1
    integer: bool = False

    def size(self, g: CardGame) -> int:
        return 1

    def schema(self, g: CardGame) -> dict[str, Any]:
        return g.number_schema(self.low, self.high, self.integer)

    def read(self, x: Any, g: CardGame) -> float:
        return g.number(x, self.low, self.high, self.integer, self.field)

    def default(self, g: CardGame) -> float:
        return float(self.low)

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[0] = (value - self.low) / max(self.high - self.low, 1e-9)


@dataclass(frozen=True)
class Numbers(Number):
    """A fixed-length list of numbers in [low, high] (raises per betting round)."""

    length: int = 1

    def size(self, g: CardGame) -> int:
        return self.length

    def schema(self, g: CardGame) -> dict[str, Any]:
        one = g.number_schema(self.low, self.high, self.integer)
        return {"type": "array", "prefixItems": [one] * self.length,
                "minItems": self.length, "maxItems": self.length}  # fmt: skip

    def read(self, x: Any, g: CardGame) -> np.ndarray:
        if type(x) is not list or len(x) != self.length:
            raise InvalidState(f"{self.field!r} must be a list of {self.length} numbers")
        return np.array([g.number(v, self.low, self.high, self.integer, self.field) for v in x])

    def default(self, g: CardGame) -> np.ndarray:
        return np.full(self.length, self.low, np.float64)

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[:] = (value - self.low) / max(self.high - self.low, 1e-9)


@dataclass(frozen=True)
class Choice(Zone):
    """One of a few names (the phase, the suit called), one-hot."""

    options: tuple[str, ...] = ()

    def size(self, g: CardGame) -> int:
        return len(self.options)

    def schema(self, g: CardGame) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.options)}

    def read(self, x: Any, g: CardGame) -> int:
        if not isinstance(x, str) or x not in self.options:
            raise InvalidState(f"{self.field!r} must be one of {list(self.options)}, got {x!r}")
        return self.options.index(x)

    def default(self, g: CardGame) -> int:
        return 0

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        out[value] = 1.0


@dataclass(frozen=True)
class History(Zone):
    """The moves so far, oldest first, each `[seat, move]` (at most `max_moves`); the last
    `last` are features, newest first: the seat round the table, the kind, the cards."""

    last: int = 8
    max_moves: int = 400

    def size(self, g: CardGame) -> int:
        return self.last * g.move_size

    def schema(self, g: CardGame) -> dict[str, Any]:
        pair = [Seat("").schema(g), g.move_schema()]
        return {"type": "array", "maxItems": self.max_moves,
                "items": {"type": "array", "prefixItems": pair, "minItems": 2, "maxItems": 2}}  # fmt: skip

    def read(self, x: Any, g: CardGame) -> list[tuple[int, Move]]:
        if type(x) is not list or len(x) > self.max_moves:
            raise InvalidState(f"{self.field!r} must be a list of at most {self.max_moves} moves")
        out = []
        for entry in x:
            if type(entry) is not list or len(entry) != 2:
                raise InvalidState(f"each of {self.field!r} must be [seat, move], got {entry!r}")
            out.append((g.int_in(entry[0], 0, g.players - 1, self.field),
                        g.move(entry[1], self.field)))  # fmt: skip
        return out

    def default(self, g: CardGame) -> list[tuple[int, Move]]:
        return []

    def encode(self, value: Any, g: CardGame, seat: int, out: np.ndarray) -> None:
        n, k = g.players, len(g.kinds)
        for i, (who, move) in enumerate(reversed(value[-self.last :] if self.last else [])):
            o = i * g.move_size
            out[o + (who - seat) % n] = 1.0
            out[o + n + move.kind] = 1.0
            out[o + n + k : o + g.move_size] = move.counts / g.deck.copies


# --- the game ------------------------------------------------------------------------------------

# Per-candidate features of how a move answers the `answers` zone (see `CardGame.answer`).
ANSWER_SIZE = 8


@dataclass(frozen=True)
class Parsed:
    """A state, checked: each zone's value by field, the seat, the legal moves."""

    values: dict[str, Any]
    seat: int
    legal: list[Move]
    hand: np.ndarray


@dataclass(frozen=True)
class CardGame:
    """The declaration: a deck, zones, kinds of moves, seats, what a seat can win.
    `answers`: the field of the pile a move answers (trick, move to beat, top card), for the
    candidates' answer features; `max_legal`: the most legal moves a state may list."""

    name: str
    deck: Deck
    zones: tuple[Zone, ...]
    kinds: tuple[Kind, ...]
    players: int = 2
    payoff_range: tuple[float, float] = (-1.0, 1.0)
    answers: str | None = None
    max_legal: int = 64
    legal_field: ClassVar[str] = "legal_actions"

    def __post_init__(self) -> None:
        index, rank, by_rank, by_suit = self.deck.tables()
        object.__setattr__(self, "_tables", (index, rank, by_rank, by_suit))
        fields = [z.field for z in self.zones]
        if len(set(fields)) != len(fields) or self.legal_field in fields:
            raise ValueError(f"zone fields must be distinct and not {self.legal_field!r}")
        if len({k.name for k in self.kinds}) != len(self.kinds) or not self.kinds:
            raise ValueError("kinds need names of their own")
        for k in self.kinds:
            if not re.fullmatch(r"[A-Za-z0-9_.\-]+", k.name) or k.head_kind not in (
                "none", "card", "rank"
            ):
                raise ValueError(f"kind {k.name!r}: a name of letters, digits, _ . -; a head "
                                 "of none, card, rank")  # fmt: skip
        hands = [z for z in self.zones if type(z) is Hand]
        if len(hands) > 1 or (any(k.from_hand and k.cards[1] for k in self.kinds) and not hands):
            raise ValueError("a game whose moves come from the hand declares one Hand zone")
        if self.answers is not None and not isinstance(self._zone(self.answers), Pile):
            raise ValueError(f"answers={self.answers!r} must name a Pile, Hand or TopCard")
        offsets = np.cumsum([0] + [k.slots(self.deck) for k in self.kinds])
        object.__setattr__(self, "_offsets", offsets)
        object.__setattr__(self, "_moves", {})

    def _zone(self, name: str) -> Zone:
        zone = next((z for z in self.zones if z.field == name), None)
        if zone is None:
            raise ValueError(f"{self.name}: no zone {name!r}")
        return zone

    # --- sizes --------------------------------------------------------------------------------

    @property
    def set_size(self) -> int:
        """A set of cards' features: per card, per rank, per suit, its size."""
        return self.deck.size + self.deck.num_ranks + len(self.deck.suits) + 1

    @property
    def move_size(self) -> int:
        """One move in the history: seat round the table, kind, cards."""
        return self.players + len(self.kinds) + self.deck.size

    @property
    def obs_size(self) -> int:
        return sum(z.size(self) for z in self.zones)

    @property
    def num_actions(self) -> int:
        """The fixed head's slots."""
        return int(self._offsets[-1])

    @property
    def candidate_size(self) -> int:
        """kind | the move's cards | what it leaves in the hand, and whether it empties it |
        how it answers `answers`."""
        return len(self.kinds) + 2 * self.set_size + 1 + ANSWER_SIZE

    @property
    def hand_max(self) -> int:
        hands = [z for z in self.zones if type(z) is Hand]
        return hands[0].max_cards if hands else 1

    # --- reading JSON ---------------------------------------------------------------------------

    def int_in(self, x: Any, lo: int, hi: int, what: str) -> int:
        if not json_int(x) or not lo <= x <= hi:
            raise InvalidState(f"{what!r} must be an integer in {lo}..{hi}, got {x!r}")
        return int(x)

    def number(self, x: Any, lo: float, hi: float, integer: bool, what: str) -> float:
        ok = json_int(x) if integer else type(x) in (int, float) and math.isfinite(x)
        if not ok or not lo <= x <= hi:
            kind = "an integer" if integer else "a number"
            raise InvalidState(f"{what!r} must be {kind} in [{lo:g}, {hi:g}], got {x!r}")
        return float(x)

    def seat_list(self, x: Any, what: str) -> list[Any]:
        if type(x) is not list or len(x) != self.players:
            raise InvalidState(f"{what!r} must list one entry per seat ({self.players})")
        return x

    def read_cards(self, x: Any, max_cards: int, what: str) -> tuple[np.ndarray, list[int]]:
        """(counts per card, card indices in order) of a JSON list of cards."""
        if type(x) is not list or len(x) > max_cards:
            raise InvalidState(f"{what!r} must be a list of at most {max_cards} cards")
        index = self._tables[0]
        try:
            ids = [index[c] for c in x]
        except (KeyError, TypeError):
            bad = next(c for c in x if not isinstance(c, str) or c not in index)
            raise InvalidState(f"{what!r} holds an unknown card {bad!r}") from None
        counts = np.bincount(np.array(ids, np.int64), minlength=self.deck.size)
        if len(ids) and counts.max() > self.deck.copies:
            raise InvalidState(f"{what!r} holds more copies of a card than the deck has")
        return counts, ids

    def move(self, x: Any, what: str) -> Move:
        """A move spelled `"<kind>[ <card>...]"`, checked (cached: moves repeat)."""
        cached = self._moves.get(x) if isinstance(x, str) else None
        if cached is not None:
            return cached
        if not isinstance(x, str):
            raise InvalidState(f"{what!r}: a move is a string, got {x!r}")
        name, *cards = x.split(" ")
        kinds = [k.name for k in self.kinds]
        if name not in kinds:
            raise InvalidState(f"{what!r}: unknown kind of move in {x!r} (one of {kinds})")
        kind = self.kinds[kinds.index(name)]
        lo, hi = kind.cards
        if not lo <= len(cards) <= hi or x != " ".join([name, *cards]):
            raise InvalidState(f"{what!r}: {name!r} takes {lo}..{hi} cards, one space before "
                               f"each: got {x!r}")  # fmt: skip
        counts, ids = self.read_cards(cards, hi, what)
        move = Move(kinds.index(name), counts, ids[0] if ids else -1)
        if len(self._moves) > 100_000:  # bounded: only valid moves are kept
            self._moves.clear()
        self._moves[x] = move
        return move

    def parse(self, state: Any) -> Parsed:
        """Every zone and the legal moves of a state, checked (raises InvalidState)."""
        if not isinstance(state, dict):
            raise InvalidState("the state must be a JSON object")
        values: dict[str, Any] = {}
        for z in self.zones:
            if z.field in state:
                values[z.field] = z.read(state[z.field], self)
            elif z.required:
                raise InvalidState(f"the state has no {z.field!r}")
            else:
                values[z.field] = z.default(self)
        seat = next((values[z.field] for z in self.zones if isinstance(z, Seat)), 0)
        counted = [values[z.field][0] for z in self.zones if isinstance(z, Pile | SeatPiles)
                   and z.counted]  # fmt: skip
        if counted and (sum(c.reshape(-1, self.deck.size).sum(0) for c in counted)
                        > self.deck.copies).any():  # fmt: skip
            raise InvalidState("the state's zones hold more copies of a card than the deck has")
        hand = next((values[z.field][0] for z in self.zones if type(z) is Hand), None)
        hand = np.zeros(self.deck.size, np.int64) if hand is None else hand
        legal = state.get(self.legal_field)
        if type(legal) is not list or not 0 < len(legal) <= self.max_legal:
            raise InvalidState(f"{self.legal_field!r} must list 1..{self.max_legal} moves")
        moves = [self.move(m, self.legal_field) for m in legal]
        if len(set(legal)) != len(legal):
            raise InvalidState(f"a move is listed twice in {self.legal_field!r}")
        for m, text in zip(moves, legal, strict=True):
            if self.kinds[m.kind].from_hand and (m.counts > hand).any():
                raise InvalidState(f"legal move {text!r} holds cards that are not in the hand")
        return Parsed(values, seat, moves, hand)

    # --- features -----------------------------------------------------------------------------

    def set_features(self, counts: np.ndarray, max_cards: int) -> np.ndarray:
        """float32[n, set_size] of int[n, deck] counts: per card / copies, per rank and per
        suit / the deck's, the size / `max_cards`. Sums over the deck's rank-major layout,
        not a matrix product: a BLAS call for these tiny shapes cost ~0.3 ms a state on the
        loaded 2-core box, the sums ~10x less."""
        d = self.deck
        n, suits = len(counts), max(len(d.suits), 1)
        c = counts.astype(np.float32) / d.copies
        out = np.empty((n, self.set_size), np.float32)
        out[:, : d.size] = c
        plain = len(d.ranks) * suits
        o = d.size
        out[:, o : o + len(d.ranks)] = c[:, :plain].reshape(n, len(d.ranks), suits).sum(2) / suits
        o += len(d.ranks)
        out[:, o : o + len(d.jokers)] = c[:, plain:]
        o += len(d.jokers)
        if d.suits:
            out[:, o : o + suits] = c[:, :plain].reshape(n, len(d.ranks), suits).sum(1) / len(
                d.ranks
            )
        out[:, -1] = counts.sum(1) / max(max_cards, 1)
        return out

    def features(self, p: Parsed) -> np.ndarray:
        obs = np.zeros(self.obs_size, np.float32)
        o = 0
        for z in self.zones:
            n = z.size(self)
            z.encode(p.values[z.field], self, p.seat, obs[o : o + n])
            o += n
        return obs

    def slot(self, m: Move) -> int:
        """The fixed head's slot of a move."""
        kind = self.kinds[m.kind]
        offset = int(self._offsets[m.kind])
        head = kind.head_kind
        if head == "card":
            return offset + max(m.first, 0)
        if head == "rank" and m.first >= 0:
            per_rank = m.counts @ self._tables[2]
            return offset + int(np.argmax(per_rank))
        return offset

    def mask(self, p: Parsed) -> np.ndarray:
        mask = np.zeros(self.num_actions, np.float32)
        mask[[self.slot(m) for m in p.legal]] = 1.0
        return mask

    def candidates(self, p: Parsed) -> np.ndarray:
        """float32[K, candidate_size], one row per legal move in the state's order."""
        k = len(p.legal)
        counts = np.stack([m.counts for m in p.legal])
        kind = np.zeros((k, len(self.kinds)), np.float32)
        kind[np.arange(k), [m.kind for m in p.legal]] = 1.0
        from_hand = np.array([self.kinds[m.kind].from_hand for m in p.legal])[:, None]
        left = p.hand[None] - np.where(from_hand, counts, 0)
        hand_max = self.hand_max
        out = [kind, self.set_features(counts, hand_max), self.set_features(left, hand_max),
               ((left.sum(1) == 0) & (p.hand.sum() > 0))[:, None].astype(np.float32),
               self.answer(counts, p)]  # fmt: skip
        return np.concatenate(out, axis=1)

    def answer(self, counts: np.ndarray, p: Parsed) -> np.ndarray:
        """How each move answers the `answers` pile: it leads (the pile is empty); it has a
        card of the pile's first card's suit (follows the lead), of its last card's suit or
        rank (matches the top); its highest rank beats the pile's highest, or the highest
        of the lead suit; the rank gap / ranks; it has as many cards as the pile."""
        out = np.zeros((len(counts), ANSWER_SIZE), np.float32)
        if self.answers is None:
            return out
        pile, order = p.values[self.answers]
        _, rank, by_rank, by_suit = self._tables
        has = counts > 0
        mine_top = np.where(has, rank[None], -1).max(1)
        if not order:
            out[:, 0] = 1.0
            return out
        first, last = order[0], order[-1]
        top = int(rank[pile > 0].max())
        if by_suit.shape[1]:
            lead = by_suit[first] > 0
            if lead.any():
                out[:, 1] = (has & (by_suit[:, lead][:, 0] > 0)[None]).any(1)
                in_lead = by_suit[:, lead][:, 0] > 0
                lead_top = int(np.where((pile > 0) & in_lead, rank, -1).max())
                out[:, 5] = np.where(has & in_lead[None], rank[None], -1).max(1) > lead_top
            if (by_suit[last] > 0).any():
                out[:, 2] = (has & (by_suit[:, by_suit[last] > 0][:, 0] > 0)[None]).any(1)
        out[:, 3] = (has & (rank == rank[last])[None]).any(1)
        out[:, 4] = mine_top > top
        out[:, 6] = np.where(mine_top >= 0, (mine_top - top) / self.deck.num_ranks, 0.0)
        out[:, 7] = counts.sum(1) == pile.sum()
        return out

    # --- schema -------------------------------------------------------------------------------

    def card_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.deck.cards)}

    def cards_schema(self, max_cards: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": self.card_schema(),
                                  "maxItems": max_cards}  # fmt: skip
        if self.deck.copies == 1:
            schema["uniqueItems"] = True
        else:
            copies = self.deck.copies
            schema["allOf"] = [{"contains": {"const": c}, "minContains": 0,
                                "maxContains": copies} for c in self.deck.cards]  # fmt: skip
        return schema

    def number_schema(self, low: float, high: float, integer: bool) -> dict[str, Any]:
        return {"type": "integer" if integer else "number", "minimum": low, "maximum": high}

    def per_seat(self, one: dict[str, Any]) -> dict[str, Any]:
        return {"type": "array", "prefixItems": [one] * self.players,
                "minItems": self.players, "maxItems": self.players}  # fmt: skip

    def move_pattern(self) -> str:
        card = self.deck.pattern()
        alts = []
        for k in self.kinds:
            lo, hi = k.cards
            name = k.name.replace(".", r"\.")  # (letters, digits, _ . - only: see __post_init__)
            alts.append(name + (f"(?: {card}){{{lo},{hi}}}" if hi else ""))
        return "^(?:" + "|".join(alts) + ")$"

    def move_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": self.move_pattern(),
                "description": "A move: its kind, then its cards, space-separated "
                f"(kinds: {', '.join(k.name for k in self.kinds)})."}  # fmt: skip

    def state_schema(self) -> dict[str, Any]:
        props = {z.field: z.schema(self) for z in self.zones}
        props[self.legal_field] = {
            "type": "array", "items": self.move_schema(), "minItems": 1,
            "maxItems": self.max_legal, "uniqueItems": True,
            "description": "The moves legal now (those with cards: made of cards in the hand).",
        }  # fmt: skip
        required = [z.field for z in self.zones if z.required] + [self.legal_field]
        return {"type": "object", "required": required, "properties": props}


# --- the adapters ------------------------------------------------------------------------------


class CardGameAdapter(GameAdapter):
    """A declared card game with a fixed action head: set `game = CardGame(...)` (and, as
    any adapter, `simulator`, `rules()`, `preset`). A slot of the head stands for the first
    legal move listed in it (`Kind.head`)."""

    game: ClassVar[CardGame]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        g = getattr(cls, "game", None)
        if g is not None:
            cls.name, cls.num_players = g.name, g.players
            cls.obs_size, cls.num_actions = g.obs_size, g.num_actions
            cls.payoff_range = g.payoff_range

    def parse(self, state: dict[str, Any]) -> Parsed:
        return self.game.parse(state)

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.game.parse(state)
        return self.game.features(p), self.game.mask(p)

    def check(self, state: dict[str, Any]) -> np.ndarray:
        return self.game.mask(self.game.parse(state))

    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        p = self.game.parse(state)
        for m, text in zip(p.legal, state[self.game.legal_field], strict=True):
            if self.game.slot(m) == int(index):
                return text
        raise InvalidState(f"action {index!r} is not legal here")

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        return self.game.slot(self.game.move(value, "action"))

    def state_schema(self) -> dict[str, Any]:
        return self.game.state_schema()

    def action_schema(self) -> dict[str, Any]:
        return self.game.move_schema()


class CardCandidatesAdapter(CardGameAdapter, CandidateAdapter):
    """The same declared game with each legal move scored as a candidate (`CardGame.
    candidates`): what is learned of one move carries to moves like it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        g = getattr(cls, "game", None)
        if g is not None:
            cls.candidate_size, cls.max_candidates = g.candidate_size, g.max_legal

    def encode_candidates(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.game.parse(state)
        return self.game.features(p), self.game.candidates(p)

    def candidate_count(self, state: dict[str, Any]) -> int:
        return len(self.game.parse(state).legal)

    def candidate_value(self, k: int, state: dict[str, Any]) -> Any:
        legal = state[self.game.legal_field]
        if not 0 <= k < len(legal):
            raise InvalidState(f"candidate {k!r} out of range of the state's legal moves")
        return legal[k]
