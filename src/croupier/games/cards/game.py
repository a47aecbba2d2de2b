"""`CardGame`: the declaration, and what croupier builds from it: the state's checks, the
features, the fixed head's slots, the candidates and the JSON Schema (`croupier.games.cards`).

Why ~950 lines in one module: the checks, the features and the schema all read the declaration's
tables (card indices and ranks, each card's copies, the moves read so far); apart, each would
reach into the others' private state, and a schema could drift from the checks it mirrors."""

from __future__ import annotations

import contextlib
import math
import random
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from croupier.games.base import InvalidState, json_int
from croupier.games.cards.deck import Deck, Kind, Move, Spelling
from croupier.games.cards.state import CardSet, Parsed
from croupier.games.cards.worlds import Unseen, World, deal_unseen, read_unseen
from croupier.games.cards.zones import (
    Hand,
    History,
    Pile,
    RoleSeat,
    Seat,
    SeatNumbers,
    SeatPiles,
    Zone,
)

# --- the game ------------------------------------------------------------------------------------

# Per-candidate features of how a move answers the `answers` zone (see `CardGame.answer`).
ANSWER_SIZE = 8
# Per-candidate features of what a move keeps of its suits and of its ranks (`CardGame.kept`).
KEPT_SIZE = 2
# The caches' bounds (a server runs for days): moves read, oldest out first. Doudizhu's
# 27,472 moves all fit (~1.2 KB each with their rows, 32 MB all); card sets: a state's hands
# and piles repeat from one state to the next (doudizhu's played cards 83% of the time, its
# hand 43%, president's hand 52%, in 3,000-5,000 states of play), so a few thousand keep the
# repeats.
MOVES_KEPT = 1 << 15
SETS_KEPT = 1 << 12
# A state's encode is ~60 numpy calls on arrays of a few dozen numbers: each call's overhead
# is the cost. The ufuncs' reductions called directly skip `ndarray.sum`/`any`'s Python
# wrappers; a list of arrays is joined by `np.array`/`np.concatenate`, not `np.stack` (3-10x
# dearer for a few rows here: its dispatch and shape checks run in Python).
_SUM, _ANY = np.add.reduce, np.logical_or.reduce


def _copy_columns(copies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One column a copy of cards (ranks) of `copies` each: each column's card (rank) and
    its level j, the column being "holds more than j of it" (`CardGame.per_copy`)."""
    levels = np.concatenate([np.arange(c) for c in copies] or [np.zeros(0, np.int64)])
    return np.repeat(np.arange(len(copies)), copies), levels


def _keep(cache: OrderedDict, key: Any, value: Any, most: int) -> None:
    """Put `value` in a bounded cache, its oldest entry out when full."""
    if len(cache) >= most:
        with contextlib.suppress(KeyError):  # (emptied by another thread meanwhile)
            cache.popitem(last=False)
    cache[key] = value


@dataclass(frozen=True)
class CardGame:
    """The declaration: a deck, zones, kinds of moves, seats, what a seat can win.
    `answers`: the field of the pile a move answers (trick, move to beat, top card), for the
    candidates' answer features, or of the `History` whose newest move with cards among the
    last `players - 1` is the move to beat (a climbing game: doudizhu, big two); `max_legal`:
    the most legal moves a state may list; `spelling`: the game's own spelling of a move,
    where the engine keeps its JSON (else `"<kind>[ <card>...]"`); `partners`: fixed teams
    of seats that share one result (bridge: `((0, 2), (1, 3))`; a side drawn per deal is a
    `RoleSeat(alone=True)`); `repeated_legal`: the engine lists a move once per way to make
    it (RLCard's UNO: a card once per copy held), each listing the same move.
    `per_copy`: a set's count of each card, and of each rank of a deck with suits, written
    one column per copy, holds >= 1, >= 2, ... (a pair, a trio, a bomb is a column, not a
    threshold the network must learn; a one-copy deck's cards are the same either way);
    else (the default) its count / its copies, one column. Doudizhu's landlord played better
    with it (0.835 against 0.805 greedy), its peasants no better (docs/strength.md,
    "Declared card games"). `unseen`: where the cards a seat cannot see lie (`Unseen`), for
    dealing worlds a search plays out (`deal_unseen`); None (the default): not said, the game
    cannot be searched. `check`: the game's own check of a state, what the zones cannot say
    (doudizhu: each legal move beats the move to beat), called with the state and its parse
    once the toolkit's checks passed; it raises InvalidState (a 422)."""

    name: str
    deck: Deck
    zones: tuple[Zone, ...]
    kinds: tuple[Kind, ...]
    players: int = 2
    payoff_range: tuple[float, float] = (-1.0, 1.0)
    answers: str | None = None
    max_legal: int = 64
    spelling: Spelling | None = None
    partners: tuple[tuple[int, ...], ...] = ()
    repeated_legal: bool = False
    per_copy: bool = False
    unseen: Unseen | None = None
    check: Callable[[dict[str, Any], Parsed], None] | None = None
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
                "none",
                "card",
                "rank",
                "rank-count",
            ):
                raise ValueError(
                    f"kind {k.name!r}: a name of letters, digits, _ . -; a head of none, card, "
                    "rank, rank-count"
                )
        hands = [z for z in self.zones if type(z) is Hand]
        sized = [h.size_in for h in hands if h.size_in is not None]
        if sized and not isinstance(self._zone(sized[0]), SeatNumbers):
            raise ValueError(f"Hand size_in={sized[0]!r} must name a SeatNumbers zone")
        if len(hands) > 1 or (any(k.from_hand and k.cards[1] for k in self.kinds) and not hands):
            raise ValueError("a game whose moves come from the hand declares one Hand zone")
        if self.answers is not None and not isinstance(self._zone(self.answers), Pile | History):
            raise ValueError(f"answers={self.answers!r} must name a Pile, Hand, TopCard or History")
        joined = [z for z in self.zones if getattr(z, "joined", False)]
        if joined and (any(len(c) != 1 for c in self.deck.cards) or self.deck.aliases):
            raise ValueError("cards written as one string (joined) need one-character names")
        alone = [z for z in self.zones if isinstance(z, RoleSeat) and z.alone]
        seats = sorted(s for team in self.partners for s in team)
        if (
            len(alone) > 1
            or (alone and self.partners)
            or (self.partners and seats != list(range(self.players)))
        ):
            raise ValueError("teams: one RoleSeat(alone=True), or partners naming every seat once")
        object.__setattr__(self, "_copies", np.array(self.deck.card_copies, np.int64))
        offsets = np.cumsum([0] + [k.slots(self.deck) for k in self.kinds])
        object.__setattr__(self, "_offsets", offsets)
        object.__setattr__(self, "_moves", OrderedDict())
        object.__setattr__(self, "_sets", OrderedDict())
        object.__setattr__(self, "_answer_plans", OrderedDict())  # by a pile's cards
        object.__setattr__(self, "_last_unseen", None)  # (state, what it leaves unseen)
        object.__setattr__(self, "_from_hand", np.array([k.from_hand for k in self.kinds]))
        # Per kind: each card's and each rank's place among the kind's own (-1: not its own).
        places = []
        for k in self.kinds:
            card_at = np.full(self.deck.size, -1, np.int64)
            card_at[k.rank_cards(self.deck)] = np.arange(len(k.rank_cards(self.deck)))
            rank_at = np.full(self.deck.num_ranks, -1, np.int64)
            rank_at[k.rank_ids(self.deck)] = np.arange(len(k.rank_ids(self.deck)))
            places.append((card_at, rank_at))
        object.__setattr__(self, "_places", places)
        choices = tuple(dict.fromkeys(c for k in self.kinds for c in k.choices))
        if any(not re.fullmatch(r"[A-Za-z0-9_.\-]+", c) for c in choices):
            raise ValueError("choices: names of letters, digits, _ . -")
        object.__setattr__(self, "choices", choices)
        self._tabulate()
        if self.unseen is not None:
            self.unseen.check(self)

    def _tabulate(self) -> None:
        """What every state's encode reads, computed once from the declaration: the sizes,
        each zone's place in the observation, each card's rank and suit as Python ints, a
        byte table reading a `joined` string in one C call, each seat's view of the table
        round from it, and the layout of a move's row (`move_row`)."""
        d, put = self.deck, object.__setattr__
        size, ranks, suits = d.size, len(d.ranks), len(d.suits)
        plain = ranks * suits  # the suited cards, rank-major ("9H", "9S", "TH", ...)
        # A set's features are sums of its counts: per card, and with suits per rank, per
        # joker and per suit; then all of them. `_groups` sums them in one product, columns
        # in the features' order; each sum is then divided by its copies in the deck (the
        # size by the zone's most cards), or with `per_copy` a card's, a rank's and a joker's
        # thresholded, a column a copy (`_set_from_groups`).
        blocks, copies = [np.eye(size, dtype=np.int64)], [self._copies]
        if suits:
            card = np.arange(plain)
            by_rank = np.zeros((size, ranks), np.int64)
            by_rank[card, card // suits] = 1
            by_suit = np.zeros((size, suits), np.int64)
            by_suit[card, card % suits] = 1
            blocks += [by_rank, np.eye(size, dtype=np.int64)[:, plain:], by_suit]
            copies += [self._copies @ by_rank, self._copies[plain:], self._copies @ by_suit]
        blocks.append(np.ones((size, 1), np.int64))
        put(self, "_groups", np.concatenate(blocks, axis=1))
        put(self, "_group_copies", np.concatenate(copies).astype(np.float64))
        put(self, "_divisors", {})
        counted = copies[:3] if suits else copies[:1]  # card, rank, joker sums
        at = sum(len(c) for c in counted)  # the first group divided with `per_copy`
        if self.per_copy:
            of, level, o = [], [], 0
            for c in counted:
                col, lev = _copy_columns(c)
                of.append(col + o)
                level.append(lev)
                o += len(c)
            put(self, "_per_copy_columns", (np.concatenate(of), np.concatenate(level)))
            card_width = int(self._copies.sum())
            set_size = sum(len(x) for x in level) + suits + 1
        else:
            card_width = size
            set_size = self._groups.shape[1]
        put(self, "_divided_from", at if self.per_copy else 0)
        put(self, "_card_width", card_width)
        put(self, "_set_size", set_size)
        put(self, "_move_size", self.players + len(self.kinds) + card_width + len(self.choices))
        layout, o = [], 0
        for z in self.zones:
            n = z.size(self)
            if n:
                layout.append((z, o, o + n))
            o += n
        put(self, "_layout", tuple(layout))
        put(self, "_obs_size", o)
        hands = [z for z in self.zones if type(z) is Hand]
        put(self, "_hand_field", hands[0].field if hands else None)
        put(self, "_hand_size_field", hands[0].size_in if hands else None)
        put(self, "_hand_max", hands[0].max_cards if hands else 1)
        put(self, "_no_hand", np.zeros(d.size, np.int64))
        put(self, "_seat_field", next((z.field for z in self.zones if isinstance(z, Seat)), None))
        put(self, "_counted", tuple(
            (z.field, isinstance(z, SeatPiles))
            for z in self.zones if isinstance(z, Pile | SeatPiles) and z.counted
        ))  # fmt: skip
        put(self, "_answers_history", self.answers is not None
            and isinstance(self._zone(self.answers), History))  # fmt: skip
        # Every kind with cards takes them from the hand (all but a bid-like kind): the
        # legal moves' hand check and what they leave need no per-kind mask.
        put(self, "_all_from_hand", all(k.from_hand or k.cards[1] == 0 for k in self.kinds))
        _, rank, _, by_suit = self._tables
        put(self, "_rank_of", rank.tolist())
        suit = [int(np.argmax(r)) if r.any() else -1 for r in by_suit]
        put(self, "_suit_of", suit)
        n = self.players
        put(self, "_rolls", tuple(tuple((s + r) % n for r in range(n)) for s in range(n)))
        table = bytearray([255]) * 256
        for i, c in enumerate(d.cards):
            if len(c) == 1 and ord(c) < 128:
                table[ord(c)] = i
        put(self, "_byte_index", bytes(table))
        # A move's row: kind one-hot | its cards' set features (the candidate's first
        # columns; the history's are the kind and the card columns of them) | its cards
        # counted, then summed as its set features sum them (`_groups`: per rank, per suit,
        # all; the first columns are its counts per card) | its highest rank (-1: none) | its
        # highest rank per suit (-1: none) | the choice it names, one-hot | its suits (a
        # card's, or the suit a choice names) | whether it holds each rank | whether it holds
        # n cards, n = 0..the most a kind takes | its rank gap to a pile whose highest rank is
        # r, r = 0..ranks - 1 | the cards of its suits and of its ranks it takes from the hand
        # | how many suits and ranks it has (at least 1). The answer features are comparisons
        # of these and one of the gaps (`answer`); the candidate's choice and suits one slice
        # (`candidates`); what a move keeps, the suits and ranks one product with the hand's
        # and the last four (`kept`).
        k, s, r = len(self.kinds), len(d.suits), d.num_ranks
        most = max(kind.cards[1] for kind in self.kinds)
        cand = k + set_size
        groups = self._groups.shape[1]
        at = cand + groups
        put(self, "_most_cards", most)
        put(self, "_row_cand", cand)
        put(self, "_row_groups", slice(cand, at))
        put(self, "_row_counts", slice(cand, cand + d.size))
        put(self, "_row_top", at)
        put(self, "_row_suit_top", at + 1)
        put(self, "_row_choice", at + 1 + s)
        put(self, "_row_suits", at + 1 + s + len(self.choices))
        put(self, "_row_rank", at + 1 + 2 * s + len(self.choices))
        put(self, "_row_sizes", self._row_rank + r)
        put(self, "_row_gap", self._row_sizes + most + 1)
        put(self, "_row_kept", self._row_gap + r)
        put(self, "_row_width", self._row_kept + 4)
        # A hand's cards per suit and per rank, in one product with its counts (`kept`).
        put(self, "_per_suit_rank", np.concatenate([by_suit, self._tables[2]], axis=1))
        # A choice named as one of the deck's suits (UNO's wild, crazy eights' suit call)
        # is that suit for what a move keeps.
        put(self, "_choice_suit", [tuple(d.suits).index(c) if c in tuple(d.suits) else -1
                                   for c in self.choices])  # fmt: skip
        put(self, "_no_hand_figures", self._figures_of(self._no_hand))
        # The candidate's columns taken from the move's row: its kind and cards, then its
        # choice and suits; the others' (what it leaves, answers, keeps) filled per state.
        columns = np.zeros(self.candidate_size, np.int64)
        columns[:cand] = np.arange(cand)
        w = self._row_rank - self._row_choice
        columns[-KEPT_SIZE - w : -KEPT_SIZE] = np.arange(self._row_choice, self._row_rank)
        put(self, "_cand_columns", columns)

    def _zone(self, name: str) -> Zone:
        zone = next((z for z in self.zones if z.field == name), None)
        if zone is None:
            raise ValueError(f"{self.name}: no zone {name!r}")
        return zone

    # --- sizes --------------------------------------------------------------------------------

    @property
    def copies(self) -> np.ndarray:
        """int64[deck size]: each card's copies in the deck."""
        return self._copies

    @property
    def set_size(self) -> int:
        """A set of cards' features: per card (per copy: `per_copy`), per rank (a suitless
        deck's cards are its ranks: none), per suit, its size."""
        return self._set_size

    @property
    def card_width(self) -> int:
        """A set's per-card columns, its features' first: the deck's size, or its copies
        (`per_copy`)."""
        return self._card_width

    @property
    def move_size(self) -> int:
        """One move in the history: seat round the table, kind, cards, choice (if any kind
        names one)."""
        return self._move_size

    @property
    def obs_size(self) -> int:
        return self._obs_size

    @property
    def num_actions(self) -> int:
        """The fixed head's slots."""
        return int(self._offsets[-1])

    @property
    def candidate_size(self) -> int:
        """kind | the move's cards | what it leaves in the hand, and whether it empties it |
        how it answers `answers` | its choice (if any kind names one) | its suits | what it
        keeps of them and of its ranks (`kept`)."""
        return (len(self.kinds) + 2 * self.set_size + 1 + ANSWER_SIZE + len(self.choices)
                + len(self.deck.suits) + KEPT_SIZE)  # fmt: skip

    @property
    def hand_max(self) -> int:
        return self._hand_max

    @property
    def hand_field(self) -> str | None:
        """The `Hand` zone's field (None: the game declares none)."""
        return self._hand_field

    @property
    def seat_field(self) -> str | None:
        """The `Seat` zone's field (None: the seat to act is 0)."""
        return self._seat_field

    @property
    def counted(self) -> tuple[tuple[str, bool], ...]:
        """The fields of the `counted` zones (the deck's copies bound them together), each
        with whether it holds a set per seat (`SeatPiles`)."""
        return self._counted

    def seats_from(self, seat: int) -> tuple[int, ...]:
        """The seats round the table from `seat` (itself first), for per-seat zones."""
        return self._rolls[seat]

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

    def read_cards(
        self, x: Any, max_cards: int, what: str, joined: bool = False, keep: bool = True
    ) -> CardSet:
        """(counts per card, card indices in order, features) of a JSON list of cards, or
        with `joined` of a string of one-character cards ("33345"). Kept by its text
        (`keep`; bounded, `SETS_KEPT`): a state's hands and piles repeat from one state to
        the next."""
        if joined:
            if not isinstance(x, str) or len(x) > max_cards:
                raise InvalidState(f"{what!r} must be a string of at most {max_cards} cards")
            key: Any = x
        else:
            if type(x) is not list or len(x) > max_cards:
                raise InvalidState(f"{what!r} must be a list of at most {max_cards} cards")
            key = tuple(x)
        try:
            hit = self._sets.get(key)
        except TypeError:  # an unhashable entry: read below, which says why
            hit, keep = None, False
        if hit is not None:
            return hit
        read = self._read_joined(x) if joined else None
        if read is None:  # a list, or a string the byte table cannot read: card by card
            index = self._tables[0]
            try:
                ids: list[int] | bytes = [index[c] for c in x]
            except (KeyError, TypeError):
                bad = next(c for c in x if not isinstance(c, str) or c not in index)
                raise InvalidState(f"{what!r} holds an unknown card {bad!r}") from None
            counts = np.bincount(np.array(ids, np.int64), minlength=self.deck.size)
        else:
            counts, ids = read
        if len(ids) and _ANY(counts > self._copies):
            raise InvalidState(f"{what!r} holds more copies of a card than the deck has")
        counts.setflags(write=False)  # shared by every state holding this set
        cards = CardSet(counts, ids, {})
        if keep:
            _keep(self._sets, key, cards, SETS_KEPT)
        return cards

    def _read_joined(self, x: str) -> tuple[np.ndarray, bytes] | None:
        """A `joined` string's (counts, card indices) in a few C calls (translate, count),
        not a dict lookup per character; None when a character is not a card (the caller's
        per-card read names it)."""
        try:
            ids = x.encode("ascii").translate(self._byte_index)
        except UnicodeEncodeError:
            return None
        counts = np.bincount(np.frombuffer(ids, np.uint8), minlength=self.deck.size)
        return None if len(counts) > self.deck.size else (counts, ids)

    def set_row(self, cards: CardSet, max_cards: int) -> np.ndarray:
        """float32[set_size]: `set_features` of one set, kept with the set (read only)."""
        row = cards.rows.get(max_cards)
        if row is None:
            row = self.set_features(cards.counts[None], max_cards)[0]
            row.setflags(write=False)
            cards.rows[max_cards] = row
        return row

    @property
    def known_moves(self) -> dict[str, Move]:
        """The moves read so far, by their text (read only: `move` fills it)."""
        return self._moves

    def move(self, x: Any, what: str) -> Move:
        """A move spelled `"<kind>[ <card>...]"` (or as the game's `spelling` reads it),
        checked (kept by its text, with its row: moves repeat; bounded, `MOVES_KEPT`)."""
        cached = self._moves.get(x) if isinstance(x, str) else None
        if cached is not None:
            return cached
        if not isinstance(x, str):
            raise InvalidState(f"{what!r}: a move is a string, got {x!r}")
        text = x
        if self.spelling is not None:
            try:
                text = self.spelling.read(x)
            except (KeyError, ValueError, IndexError):  # a table lookup or a parse that failed
                raise InvalidState(f"{what!r}: {x!r} is not a move of {self.name}") from None
        head, *cards = text.split(" ")
        name, colon, choice = head.partition(":")
        kinds = [k.name for k in self.kinds]
        if name not in kinds:
            raise InvalidState(f"{what!r}: unknown kind of move in {x!r} (one of {kinds})")
        kind = self.kinds[kinds.index(name)]
        lo, hi = kind.cards
        if not lo <= len(cards) <= hi or text != " ".join([head, *cards]):
            raise InvalidState(
                f"{what!r}: {name!r} takes {lo}..{hi} cards, one space before each: got {text!r}"
            )
        if (choice in kind.choices) != bool(kind.choices) or bool(colon) != bool(kind.choices):
            raise InvalidState(f"{what!r}: {name!r} names one of {list(kind.choices)}: {text!r}")
        counts, ids, _ = self.read_cards(cards, hi, what, keep=False)
        k = kinds.index(name)
        if kind.ranks and (self._places[k][0][list(ids)] < 0).any():
            raise InvalidState(f"{what!r}: {name!r} is made of {list(kind.ranks)}: {text!r}")
        first = ids[0] if ids else -1
        named = self.choices.index(choice) if colon else -1
        move = Move(k, counts, first, tuple(sorted(ids)), self._slot_of(k, counts, first, named),
                    self.move_row(k, counts, named), named)  # fmt: skip
        _keep(self._moves, x, move, MOVES_KEPT)  # only valid moves are kept
        return move

    def move_row(self, kind: int, counts: np.ndarray, named: int = -1) -> np.ndarray:
        """float32[_row_width]: what a move's features take from the move alone (the layout:
        `_tabulate`), computed once per move, gathered per state."""
        row = np.full(self._row_width, -1.0, np.float32)
        row[: len(self.kinds)] = 0.0
        row[kind] = 1.0
        row[len(self.kinds) : self._row_cand] = self.set_features(counts[None], self.hand_max)[0]
        row[self._row_groups] = counts @ self._groups
        held = np.flatnonzero(counts).tolist()
        rank, suit = self._rank_of, self._suit_of
        mine_top = max((rank[i] for i in held), default=-1)
        row[self._row_top] = mine_top
        for i in held:
            if suit[i] >= 0:
                at = self._row_suit_top + suit[i]
                row[at] = max(row[at], rank[i])
        row[self._row_rank : self._row_gap] = 0.0
        row[[self._row_rank + rank[i] for i in held]] = 1.0
        row[self._row_sizes + int(counts.sum())] = 1.0
        tops = np.arange(self.deck.num_ranks)  # (the features' own formula, once per move)
        gap = np.where(mine_top >= 0, (mine_top - tops) / self.deck.num_ranks, 0.0)
        row[self._row_gap : self._row_kept] = gap
        row[self._row_choice : self._row_rank] = 0.0  # the choice one-hot, then the suits
        if named >= 0:
            row[self._row_choice + named] = 1.0
        suits = row[self._row_suits : self._row_rank]
        chosen = self._choice_suit[named] if named >= 0 else -1
        if chosen >= 0:
            suits[chosen] = 1.0
        else:
            suits[[suit[i] for i in held if suit[i] >= 0]] = 1.0
        ranks = row[self._row_rank : self._row_rank + self.deck.num_ranks]
        taken = (0.0, 0.0)  # what it takes from the hand of its suits and of its ranks
        if held and self.kinds[kind].from_hand:
            per = counts @ self._per_suit_rank
            taken = (suits @ per[: len(suits)], ranks @ per[len(suits) :])
        at = self._row_kept
        row[at : at + 4] = (*taken, max(suits.sum(), 1.0), max(ranks.sum(), 1.0))
        row.setflags(write=False)
        return row

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
        seat = values[self._seat_field] if self._seat_field is not None else 0
        if self._counted:
            held = []
            for field, per_seat in self._counted:
                if per_seat:
                    held.extend(cards.counts for cards in values[field])
                else:
                    held.append(values[field].counts)
            if _ANY(sum(held[1:], held[0]) > self._copies):  # (adds: ~2x cheaper than a sum)
                raise InvalidState("the state's zones hold more copies of a card than the deck has")
        hand = values[self._hand_field][0] if self._hand_field is not None else self._no_hand
        if self._hand_size_field is not None:
            own = values[self._hand_size_field][seat]
            if len(values[self._hand_field].ids) != own:
                raise InvalidState(
                    f"{self._hand_field!r} does not hold {self._hand_size_field!r}[{seat}] = "
                    f"{own:g} cards"
                )
        legal = state.get(self.legal_field)
        if type(legal) is not list or not 0 < len(legal) <= self.max_legal:
            raise InvalidState(f"{self.legal_field!r} must list 1..{self.max_legal} moves")
        # Moves seen before in one C loop (`map`); a new or bad one read one by one.
        try:
            moves = list(map(self._moves.get, legal))
        except TypeError:  # an unhashable entry
            moves = [None]
        if not all(moves):  # (a Move is true, None false)
            moves = [self.move(m, self.legal_field) for m in legal]
        if not self.repeated_legal and len(set(legal)) != len(legal):
            raise InvalidState(f"a move is listed twice in {self.legal_field!r}")
        # One array operation over every legal move, not one per move (doudizhu lists up to
        # hundreds): the rows are the candidates' too.
        rows = np.concatenate([m.row for m in moves]).reshape(len(moves), self._row_width)
        counts = rows[:, self._row_counts]  # (whole numbers: compared exactly)
        if _ANY(counts > hand, None):  # (rare: say which, or pass a kind not from the hand)
            beyond = _ANY(counts > hand, 1)
            if not self._all_from_hand:
                beyond &= self._from_hand[[m.kind for m in moves]]
            if beyond.any():
                text = legal[int(np.argmax(beyond))]
                raise InvalidState(f"legal move {text!r} holds cards that are not in the hand")
        parsed = Parsed(values, seat, moves, hand, rows)
        if self.check is not None:
            self.check(state, parsed)
        return parsed

    def deal_unseen(self, state: Any, rng: random.Random) -> World:
        """One world consistent with what the seat to act was sent (`state`): every card it
        cannot see dealt at random (`rng`), each other seat's hand with its count
        (`World.hands`), the rest in `World.rest` (`worlds.py`; `unseen` says where they
        lie). InvalidState for a state whose counts cannot be dealt."""
        # A search deals many worlds from one state: what it leaves unseen is read once (UNO:
        # a state's parse 40-150 us, a deal from it ~15 us; the last state kept by identity).
        last = self._last_unseen
        if last is None or last[0] is not state:
            last = (state, read_unseen(self, state))
            object.__setattr__(self, "_last_unseen", last)
        return deal_unseen(self, last[1], state, rng)

    # --- features -----------------------------------------------------------------------------

    def set_features(
        self, counts: np.ndarray, max_cards: int, out: np.ndarray | None = None
    ) -> np.ndarray:
        """float32[n, set_size] of int[n, deck] counts: per card / its copies, per rank and
        per suit / the deck's, the size / `max_cards` (into `out` if given); `per_copy`: a
        card's and a rank's count one column per copy instead, holds more than 0, 1, ...
        The sums in one integer product (`_groups`), not a product per group: a BLAS call
        for these tiny shapes cost ~0.3 ms a state on the loaded 2-core box."""
        if out is None:
            out = np.empty((len(counts), self._set_size), np.float32)
        return self._set_from_groups(counts @ self._groups, max_cards, out)

    def _set_from_groups(self, groups: np.ndarray, max_cards: int, out: np.ndarray) -> np.ndarray:
        """`set_features` of sets given by their sums (`_groups`' columns, whole numbers,
        any dtype: each divided in float64, as the counts' own division): what a move leaves
        in the hand is the hand's sums less the move's (`candidates`)."""
        divisors = self._divisors.get(max_cards)
        if divisors is None:  # [the groups' copies..., the most cards], from `_divided_from`
            divisors = np.append(self._group_copies, max(max_cards, 1))[self._divided_from :]
            self._divisors[max_cards] = divisors
        if self.per_copy:
            of, level = self._per_copy_columns
            out[:, : len(of)] = groups[:, of] > level
            out[:, len(of) :] = groups[:, self._divided_from :] / divisors
        else:
            out[:] = groups / divisors
        return out

    def features(self, p: Parsed) -> np.ndarray:
        obs = np.zeros(self._obs_size, np.float32)
        values, seat = p.values, p.seat
        for z, lo, hi in self._layout:
            z.encode(values[z.field], self, seat, obs[lo:hi])
        return obs

    def _slot_of(self, kind_index: int, counts: np.ndarray, first: int, named: int = -1) -> int:
        kind = self.kinds[kind_index]
        offset = int(self._offsets[kind_index])
        head = kind.head_kind
        card_at, rank_at = self._places[kind_index]
        choices = max(len(kind.choices), 1)
        choice = kind.choices.index(self.choices[named]) if named >= 0 else 0
        if head == "card":
            return offset + int(card_at[max(first, 0)]) * choices + choice
        if head in ("rank", "rank-count") and first >= 0:
            rank = int(rank_at[int(np.argmax(counts @ self._tables[2]))])
            if head == "rank":
                return offset + rank * choices + choice
            lo, hi = kind.cards
            return offset + (rank * (hi - lo + 1) + int(counts.sum()) - lo) * choices + choice
        return offset + choice

    def slot(self, m: Move) -> int:
        """The fixed head's slot of a move."""
        return m.slot

    def slot_names(self) -> tuple[str, ...]:
        """Each slot of the fixed head named, in index order (the exported `policy.json`'s
        `action_names`): a slot that holds one move is that move in the toolkit's spelling
        ("pass", "play 7H", "wild:r wild"); a slot of several moves says the kind, its main
        rank and, for "rank-count", how many cards ("play 7*", "play 7*2": any two cards
        whose main rank is 7; the slot plays the first legal move listed in it)."""
        ranks, names = [*self.deck.ranks, *self.deck.jokers], []
        for kind in self.kinds:
            lo, hi = kind.cards
            if kind.head_kind == "card":
                items = [self.deck.cards[i] for i in kind.rank_cards(self.deck)]
            elif kind.head_kind == "rank":
                items = [f"{ranks[r]}*" for r in kind.rank_ids(self.deck)]
            elif kind.head_kind == "rank-count":
                items = [f"{ranks[r]}*{n}" for r in kind.rank_ids(self.deck)
                         for n in range(lo, hi + 1)]  # fmt: skip
            else:
                items = [""]
            for item in items:  # the choices vary fastest (`_slot_of`)
                for choice in kind.choices or ("",):
                    head = f"{kind.name}:{choice}" if choice else kind.name
                    names.append(f"{head} {item}" if item else head)
        assert len(names) == self.num_actions
        return tuple(names)

    def mask(self, p: Parsed) -> np.ndarray:
        mask = np.zeros(self.num_actions, np.float32)
        mask[[m.slot for m in p.legal]] = 1.0
        return mask

    def candidates(self, p: Parsed) -> np.ndarray:
        """float32[K, candidate_size], one row per legal move in the state's order: the
        move's own columns gathered from its row (`Parsed.rows`: kind, cards, choice, suits;
        the others' places filled after), what it leaves in the hand, whether that empties
        it and how it answers computed for all K at once. What it leaves is the hand's sums
        (per card, rank, suit, all: `_groups`) less the move's, divided as `set_features`
        divides: one subtraction and one division, the hand's sums read once per hand.
        Whether it empties the hand and how it answers are one comparison of the rows with
        the figures of the hand's size and of the pile (`_answer_plan`)."""
        rows, hand_sums, by_hand = p.rows, *self._hand_figures(p)
        a, s = self._row_cand, self._set_size
        out = rows.take(self._cand_columns, axis=1)
        taken = rows[:, self._row_groups]
        if not self._all_from_hand:
            taken = taken * self._from_hand[[m.kind for m in p.legal]][:, None]
        self._set_from_groups(hand_sums - taken, self._hand_max, out[:, a : a + s])
        self._answer(p, int(hand_sums[-1]), out[:, a + s : a + s + 1 + ANSWER_SIZE])
        if not self._all_from_hand:  # (a move that takes nothing leaves the hand as it is)
            out[:, a + s] = (out[:, a + s - 1] == 0) & (hand_sums[-1] > 0)
        self.kept(rows, by_hand, out[:, -KEPT_SIZE:])
        # Each feature rounded to the nearest float16 (all lie in [-1, 1]: ~5e-4 apart at
        # most): the trainer then keeps an update's padded [N, K, F] candidates in half the
        # bytes (`trainer/episodes.py`), which RLlib copies at every shuffle and minibatch;
        # doudizhu's size / 20, gap / 15 and n / (n + 2) were all that kept them float32.
        out[:] = out.astype(np.float16)
        return out

    def _hand_figures(self, p: Parsed) -> tuple[np.ndarray, np.ndarray]:
        """(the hand's sums, float64[groups]; its cards per suit and per rank as `kept`'s
        product reads them, float64[suits + ranks, 2]), kept with the hand's card set (a
        hand repeats from state to state; no hand: none held)."""
        if self._hand_field is None:
            return self._no_hand_figures
        cards = p.values[self._hand_field]
        figures = cards.rows.get(-1)
        if figures is None:
            figures = self._figures_of(cards.counts)
            cards.rows[-1] = figures
        return figures

    def _figures_of(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sums = (counts @ self._groups).astype(np.float64)
        per = (counts @ self._per_suit_rank).astype(np.float64)
        s = len(self.deck.suits)
        by_hand = np.zeros((len(per), 2))
        by_hand[:s, 0] = per[:s]
        by_hand[s:, 1] = per[s:]
        for a in (sums, by_hand):
            a.setflags(write=False)
        return sums, by_hand

    def kept(self, rows: np.ndarray, by_hand: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Per move: what it leaves in the hand of its own suits and of its own ranks (cards,
        averaged over its suits / ranks, as n / (n + 2): 1 card 0.33, 2 0.5, 8 0.8); its
        suits one-hot (a card's, or the suit its choice names) go before these. A network
        sees at once what the hand made only as a product of two inputs: the colour a wild
        should name (UNO), the suit a trick game runs short of, the set a play breaks up.
        Each move's suits and ranks (its row's, side by side) times the hand's cards per
        suit and per rank (`by_hand`, a column each: whole numbers, exact), less what the
        move takes of them (its row's)."""
        at = self._row_kept
        held = rows[:, self._row_suits : self._row_rank + self.deck.num_ranks] @ by_hand
        n = (held - rows[:, at : at + 2]) / rows[:, at + 2 : at + 4]
        out[:] = n / (n + 2.0)
        return out

    def to_answer(self, p: Parsed) -> tuple[np.ndarray, list[int] | bytes | tuple[int, ...]]:
        """(counts, card indices) of what a move answers: the `answers` pile, or from a
        `History` the newest move with cards among the last `players - 1` (none: the seat
        leads), its cards in the deck's order."""
        value = p.values[self.answers]
        if not self._answers_history:
            return value[0], value[1]
        beat = next((m for m in reversed(value.moves[1 - self.players :]) if m.first >= 0), None)
        if beat is None:
            return self._no_hand, ()
        return beat.counts, beat.cards

    def answer(self, p: Parsed, out: np.ndarray | None = None) -> np.ndarray:
        """How each legal move answers the `answers` pile: it leads (the pile is empty); it
        has a card of the pile's first card's suit (follows the lead), of its last card's
        suit or rank (matches the top); its highest rank beats the pile's highest, or the
        highest of the lead suit; the rank gap / ranks; it has as many cards as the pile
        (into `out` if given)."""
        if out is None:
            out = np.empty((len(p.legal), ANSWER_SIZE), np.float32)
        both = np.empty((len(p.legal), 1 + ANSWER_SIZE), np.float32)
        self._answer(p, 0, both)
        out[:] = both[:, 1:]
        return out

    def _answer(self, p: Parsed, hand_size: int, out: np.ndarray) -> None:
        """Whether each legal move takes all of a hand of `hand_size` cards (0: none to
        empty), then how it answers (`answer`), into `out`: comparisons of the moves' rows
        (`move_row`) with the figures of the hand's size and of the pile, one gather."""
        order: Any = None  # no pile to answer
        if self.answers is not None:
            order = self.to_answer(p)[1] or ()  # () : it leads
        key = (tuple(order) if type(order) is list else order, hand_size)
        plan = self._answer_plans.get(key)
        if plan is None:
            plan = self._answer_plan(order, hand_size)
            _keep(self._answer_plans, key, plan, SETS_KEPT)
        cols, lo, gap = plan
        picked = p.rows.take(cols, axis=1)
        out[:] = picked > lo
        if gap:
            out[:, 7] = picked[:, 7]

    def _answer_plan(self, order: Any, hand_size: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """What `_answer` reads of the moves' rows for a hand of `hand_size` cards and a pile
        of these cards (in its order; (): empty, the seat leads; None: no pile), and the
        figure each column is compared with (read in Python from the pile's few cards, once
        per pile and hand size: they repeat): whether the move holds `hand_size` cards, then
        the answer's features 0-5 and 7, each "the row's column c is above lo" (a feature
        that cannot hold, e.g. no lead suit, or 0, it leads: lo = inf; one that holds:
        -inf), and feature 6 the rank gap to the pile's top, computed with the move (copied
        where there is a pile: `gap`)."""
        st, no = self._row_suit_top, math.inf
        fits = 0 < hand_size <= self._most_cards  # (else no move holds it all)
        holds = [self._row_sizes + (hand_size if fits else 0), 0 if fits else no]  # col, lo
        if not order:  # it leads: feature 0 holds (any column is above -inf); no pile: none
            leads = -no if order is not None else no
            cols = [holds[0]] + [st] * ANSWER_SIZE
            return np.array(cols), np.array([holds[1], leads] + [no] * (ANSWER_SIZE - 1)), False
        rank, suit = self._rank_of, self._suit_of
        first, last = order[0], order[-1]
        top = max(rank[i] for i in order)
        lead, match = suit[first], suit[last]
        n = len(order)
        lead_top = max(rank[i] for i in order if suit[i] == lead) if lead >= 0 else 0
        sized = self._row_sizes + min(n, self._most_cards)
        cols = [holds[0], st, st + max(lead, 0), st + max(match, 0), self._row_rank + rank[last],
                self._row_top, st + max(lead, 0), self._row_gap + top, sized]  # fmt: skip
        lo = [holds[1], no, -1 if lead >= 0 else no, -1 if match >= 0 else no, 0, top,
              lead_top if lead >= 0 else no, no, 0 if n <= self._most_cards else no]  # fmt: skip
        return np.array(cols), np.array(lo, np.float64), True

    # --- schema -------------------------------------------------------------------------------

    def card_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": [*self.deck.cards, *(a for a, _ in self.deck.aliases)]}

    def _named(self, card: str) -> dict[str, Any]:
        """A card under any of its names (its own and its aliases), as a schema."""
        names = [card, *(a for a, c in self.deck.aliases if c == card)]
        return {"const": card} if len(names) == 1 else {"enum": names}

    def cards_schema(self, max_cards: int, joined: bool = False) -> dict[str, Any]:
        if joined:  # one character a card, each at most its copies (a lookahead per card)
            at_most = "".join(
                f"(?!(?:[^{re.escape(c)}]*{re.escape(c)}){{{n + 1}}})"
                for c, n in zip(self.deck.cards, self.deck.card_copies, strict=True)
            )
            cards = "".join(map(re.escape, self.deck.cards))
            return {"type": "string", "pattern": f"^{at_most}[{cards}]*$", "maxLength": max_cards}
        schema: dict[str, Any] = {
            "type": "array",
            "items": self.card_schema(),
            "maxItems": max_cards,
        }
        if set(self.deck.card_copies) == {1} and not self.deck.aliases:
            schema["uniqueItems"] = True
        else:
            schema["allOf"] = [
                {"contains": self._named(c), "minContains": 0, "maxContains": n}
                for c, n in zip(self.deck.cards, self.deck.card_copies, strict=True)
            ]
        return schema

    def number_schema(self, low: float, high: float, integer: bool) -> dict[str, Any]:
        return {"type": "integer" if integer else "number", "minimum": low, "maximum": high}

    def per_seat(self, one: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "array",
            "prefixItems": [one] * self.players,
            "minItems": self.players,
            "maxItems": self.players,
        }

    def move_pattern(self) -> str:
        card = self.deck.pattern()
        alts = []
        for k in self.kinds:
            lo, hi = k.cards
            name = k.name.replace(".", r"\.")  # (letters, digits, _ . - only: see __post_init__)
            if k.choices:
                name += ":(?:" + "|".join(c.replace(".", r"\.") for c in k.choices) + ")"
            alts.append(name + (f"(?: {card}){{{lo},{hi}}}" if hi else ""))
        return "^(?:" + "|".join(alts) + ")$"

    def move_schema(self) -> dict[str, Any]:
        if self.spelling is not None:
            about = self.spelling.description or "A move, as the game spells it."
            return {"type": "string", "pattern": self.spelling.pattern, "description": about}
        return {
            "type": "string",
            "pattern": self.move_pattern(),
            "description": "A move: its kind (and ':' its choice, for a kind that names "
            f"one), then its cards, space-separated (kinds: "
            f"{', '.join(k.name for k in self.kinds)}).",
        }

    def teams(self, state: dict[str, Any]) -> list[list[int]] | None:
        """The seats that share one result: the `partners`, or the seat a `RoleSeat(alone=
        True)` names against the others; None: every seat for itself."""
        if self.partners:
            return [list(team) for team in self.partners]
        for z in self.zones:
            if isinstance(z, RoleSeat) and z.alone:
                if not isinstance(state, dict) or z.field not in state:
                    raise InvalidState(f"the state has no {z.field!r}")
                alone = z.read(state[z.field], self)
                return [[alone], [s for s in range(self.players) if s != alone]]
        return None

    def state_schema(self) -> dict[str, Any]:
        props = {z.field: z.schema(self) for z in self.zones}
        props[self.legal_field] = {
            "type": "array",
            "items": self.move_schema(),
            "minItems": 1,
            "maxItems": self.max_legal,
            "uniqueItems": not self.repeated_legal,
            "description": "The moves legal now (those with cards: made of cards in the hand).",
        }
        required = [z.field for z in self.zones if z.required] + [self.legal_field]
        schema = {"type": "object", "required": required, "properties": props}
        if self._hand_size_field is not None and self._seat_field is not None:
            schema["dependentSchemas"] = {self._seat_field: self._hand_size_schema()}
        return schema

    def _hand_size_schema(self) -> dict[str, Any]:
        """`Hand.size_in` as JSON Schema: for each seat to act and each count its entry may
        hold, a hand of that many cards. Under `dependentSchemas`, which client generators
        leave out of the type."""
        hand = self._zone(self._hand_field)  # type: ignore[arg-type]
        counts = self._zone(self._hand_size_field)  # type: ignore[arg-type]
        joined = getattr(hand, "joined", False)
        most = min(int(counts.high), hand.max_cards)  # type: ignore[attr-defined]
        low = max(math.ceil(counts.low), 0)  # type: ignore[attr-defined]
        return {
            "anyOf": [
                {
                    "properties": {
                        self._seat_field: {"const": seat},
                        counts.field: {"prefixItems": [{}] * seat + [{"const": n}]},
                        hand.field: {"minLength": n, "maxLength": n}
                        if joined
                        else {"minItems": n, "maxItems": n},
                    }
                }
                for seat in range(self.players)
                for n in range(low, most + 1)
            ]
        }
