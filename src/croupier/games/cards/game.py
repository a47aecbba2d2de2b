"""`CardGame`: the declaration, and what croupier builds from it: the state's checks, the
features, the fixed head's slots, the candidates and the JSON Schema (`croupier.games.cards`).

Why ~450 lines in one module: the checks, the features and the schema all read the declaration's
tables (card indices and ranks, each card's copies, the moves read so far); apart, each would
reach into the others' private state, and a schema could drift from the checks it mirrors."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from croupier.games.base import InvalidState, json_int
from croupier.games.cards.deck import Deck, Kind, Move, Spelling
from croupier.games.cards.zones import Hand, History, Pile, RoleSeat, Seat, SeatPiles, Zone

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
    counts: np.ndarray  # int64[len(legal), deck size]: the legal moves' cards, stacked once


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
    it (RLCard's UNO: a card once per copy held), each listing the same move."""

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
        object.__setattr__(self, "_moves", {})
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
        """A set of cards' features: per card, per rank (a suitless deck's cards are its
        ranks: none), per suit, its size."""
        ranks = self.deck.num_ranks if self.deck.suits else 0
        return self.deck.size + ranks + len(self.deck.suits) + 1

    @property
    def move_size(self) -> int:
        """One move in the history: seat round the table, kind, cards, choice (if any kind
        names one)."""
        return self.players + len(self.kinds) + self.deck.size + len(self.choices)

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
        how it answers `answers` | its choice (if any kind names one)."""
        return len(self.kinds) + 2 * self.set_size + 1 + ANSWER_SIZE + len(self.choices)

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

    def read_cards(
        self, x: Any, max_cards: int, what: str, joined: bool = False
    ) -> tuple[np.ndarray, list[int]]:
        """(counts per card, card indices in order) of a JSON list of cards, or with `joined`
        of a string of one-character cards ("33345")."""
        if joined:
            if not isinstance(x, str) or len(x) > max_cards:
                raise InvalidState(f"{what!r} must be a string of at most {max_cards} cards")
            x = list(x)
        elif type(x) is not list or len(x) > max_cards:
            raise InvalidState(f"{what!r} must be a list of at most {max_cards} cards")
        index = self._tables[0]
        try:
            ids = [index[c] for c in x]
        except (KeyError, TypeError):
            bad = next(c for c in x if not isinstance(c, str) or c not in index)
            raise InvalidState(f"{what!r} holds an unknown card {bad!r}") from None
        counts = np.bincount(np.array(ids, np.int64), minlength=self.deck.size)
        if len(ids) and (counts > self._copies).any():
            raise InvalidState(f"{what!r} holds more copies of a card than the deck has")
        return counts, ids

    @property
    def known_moves(self) -> dict[str, Move]:
        """The moves read so far, by their text (read only: `move` fills it)."""
        return self._moves

    def move(self, x: Any, what: str) -> Move:
        """A move spelled `"<kind>[ <card>...]"` (or as the game's `spelling` reads it),
        checked (cached: moves repeat)."""
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
        counts, ids = self.read_cards(cards, hi, what)
        if kind.ranks and (self._places[kinds.index(name)][0][ids] < 0).any():
            raise InvalidState(f"{what!r}: {name!r} is made of {list(kind.ranks)}: {text!r}")
        move = Move(kinds.index(name), counts, ids[0] if ids else -1,
                    self.choices.index(choice) if colon else -1)  # fmt: skip
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
        counted = [
            values[z.field][0] for z in self.zones if isinstance(z, Pile | SeatPiles) and z.counted
        ]
        if (
            counted
            and (sum(c.reshape(-1, self.deck.size).sum(0) for c in counted) > self._copies).any()
        ):
            raise InvalidState("the state's zones hold more copies of a card than the deck has")
        hand = next((values[z.field][0] for z in self.zones if type(z) is Hand), None)
        hand = np.zeros(self.deck.size, np.int64) if hand is None else hand
        legal = state.get(self.legal_field)
        if type(legal) is not list or not 0 < len(legal) <= self.max_legal:
            raise InvalidState(f"{self.legal_field!r} must list 1..{self.max_legal} moves")
        moves = [self.move(m, self.legal_field) for m in legal]
        if len(set(legal)) != len(legal) and not self.repeated_legal:
            raise InvalidState(f"a move is listed twice in {self.legal_field!r}")
        # One array operation over every legal move, not one per move (doudizhu lists up to
        # hundreds): the stack is the candidates' too.
        counts = np.stack([m.counts for m in moves])
        beyond = (counts > hand).any(1) & self._from_hand[[m.kind for m in moves]]
        if beyond.any():
            text = legal[int(np.argmax(beyond))]
            raise InvalidState(f"legal move {text!r} holds cards that are not in the hand")
        return Parsed(values, seat, moves, hand, counts)

    # --- features -----------------------------------------------------------------------------

    def set_features(self, counts: np.ndarray, max_cards: int) -> np.ndarray:
        """float32[n, set_size] of int[n, deck] counts: per card / its copies, per rank and
        per suit / the deck's, the size / `max_cards`. Sums over the deck's rank-major layout,
        not a matrix product: a BLAS call for these tiny shapes cost ~0.3 ms a state on the
        loaded 2-core box, the sums ~10x less."""
        d = self.deck
        n = len(counts)
        out = np.empty((n, self.set_size), np.float32)
        out[:, : d.size] = counts / self._copies
        if d.suits:  # (suitless: a card is its rank, already counted)
            ranks, suits = len(d.ranks), len(d.suits)
            plain = ranks * suits
            grid = counts[:, :plain].reshape(n, ranks, suits)
            copies = self._copies[:plain].reshape(ranks, suits)
            o = d.size
            out[:, o : o + ranks] = grid.sum(2) / copies.sum(1)
            o += ranks
            out[:, o : o + len(d.jokers)] = out[:, plain : d.size]
            o += len(d.jokers)
            out[:, o : o + suits] = grid.sum(1) / copies.sum(0)
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
        card_at, rank_at = self._places[m.kind]
        choices = max(len(kind.choices), 1)
        choice = kind.choices.index(self.choices[m.choice]) if m.choice >= 0 else 0
        if head == "card":
            return offset + int(card_at[max(m.first, 0)]) * choices + choice
        if head in ("rank", "rank-count") and m.first >= 0:
            rank = int(rank_at[int(np.argmax(m.counts @ self._tables[2]))])
            if head == "rank":
                return offset + rank * choices + choice
            lo, hi = kind.cards
            return offset + (rank * (hi - lo + 1) + int(m.counts.sum()) - lo) * choices + choice
        return offset + choice

    def mask(self, p: Parsed) -> np.ndarray:
        mask = np.zeros(self.num_actions, np.float32)
        mask[[self.slot(m) for m in p.legal]] = 1.0
        return mask

    def candidates(self, p: Parsed) -> np.ndarray:
        """float32[K, candidate_size], one row per legal move in the state's order."""
        k = len(p.legal)
        counts = p.counts
        kinds = [m.kind for m in p.legal]
        kind = np.zeros((k, len(self.kinds)), np.float32)
        kind[np.arange(k), kinds] = 1.0
        left = p.hand[None] - np.where(self._from_hand[kinds][:, None], counts, 0)
        hand_max = self.hand_max
        out = [
            kind,
            self.set_features(counts, hand_max),
            self.set_features(left, hand_max),
            ((left.sum(1) == 0) & (p.hand.sum() > 0))[:, None].astype(np.float32),
            self.answer(counts, p),
        ]
        if self.choices:
            chosen = np.zeros((k, len(self.choices)), np.float32)
            choice = np.array([m.choice for m in p.legal])
            named = np.flatnonzero(choice >= 0)
            chosen[named, choice[named]] = 1.0
            out.append(chosen)
        return np.concatenate(out, axis=1)

    def to_answer(self, p: Parsed) -> tuple[np.ndarray, list[int]]:
        """(counts, card indices) of what a move answers: the `answers` pile, or from a
        `History` the newest move with cards among the last `players - 1` (none: the seat
        leads), its cards in the deck's order."""
        value = p.values[self.answers]
        if not isinstance(self._zone(self.answers), History):
            return value
        recent = [entry[1] for entry in value[1 - self.players :]]  # [seat, move(, then)]
        beat = next((m for m in reversed(recent) if m.first >= 0), None)
        if beat is None:
            return np.zeros(self.deck.size, np.int64), []
        return beat.counts, np.repeat(np.arange(self.deck.size), beat.counts).tolist()

    def answer(self, counts: np.ndarray, p: Parsed) -> np.ndarray:
        """How each move answers the `answers` pile: it leads (the pile is empty); it has a
        card of the pile's first card's suit (follows the lead), of its last card's suit or
        rank (matches the top); its highest rank beats the pile's highest, or the highest
        of the lead suit; the rank gap / ranks; it has as many cards as the pile."""
        out = np.zeros((len(counts), ANSWER_SIZE), np.float32)
        if self.answers is None:
            return out
        pile, order = self.to_answer(p)
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
        return {"type": "object", "required": required, "properties": props}
