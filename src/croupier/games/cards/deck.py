"""A card game's deck and its kinds of moves (`croupier.games.cards`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

# --- the deck ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deck:
    """Cards named rank+suit ("7H"; `suit_first`: "H7", as RLCard and OpenSpiel spell them),
    ranks from low to high, then the jokers (named as given, ranked above every rank), each
    card `copies` times in the deck, or as `copies_of` says for the cards it names (doudizhu:
    four of each rank, one of each joker). Without suits a card is its rank ("7", "B").
    `sep` goes between suit and rank ("r-7": RLCard's UNO); `aliases` are other names an
    engine writes for a card (RLCard's UNO writes a wild with the colour it last took,
    "b-wild": the card is the deck's colourless `wild`, four copies of it)."""

    ranks: str | tuple[str, ...]
    suits: str | tuple[str, ...] = ()
    jokers: tuple[str, ...] = ()
    copies: int = 1
    suit_first: bool = False
    copies_of: Mapping[str, int] | tuple[tuple[str, int], ...] = ()
    sep: str = ""
    aliases: Mapping[str, str] | tuple[tuple[str, str], ...] = ()
    cards: tuple[str, ...] = field(init=False)
    card_copies: tuple[int, ...] = field(init=False)  # per card, in `cards` order

    def __post_init__(self) -> None:
        ranks, suits = tuple(self.ranks), tuple(self.suits)
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "suits", suits)
        sep = self.sep if suits else ""
        names = [
            s + sep + r if self.suit_first else r + sep + s for r in ranks for s in suits or ("",)
        ]
        object.__setattr__(self, "cards", (*names, *self.jokers))
        if len(set(self.cards)) != len(self.cards) or not all(self.cards):
            raise ValueError("every card of a deck needs a name of its own")
        if any(" " in c for c in self.cards) or self.copies < 1:
            raise ValueError("card names have no spaces; a deck holds each card at least once")
        # Kept as sorted pairs: a declaration stays hashable data.
        pairs = tuple(sorted(dict(self.copies_of).items()))
        object.__setattr__(self, "copies_of", pairs)
        if any(c not in self.cards or type(n) is not int or n < 1 for c, n in pairs):
            raise ValueError("copies_of names cards of the deck, each at least once")
        per = dict(pairs)
        object.__setattr__(self, "card_copies", tuple(per.get(c, self.copies) for c in self.cards))
        aliases = tuple(sorted(dict(self.aliases).items()))
        object.__setattr__(self, "aliases", aliases)
        if any(a in self.cards or c not in self.cards or " " in a or not a for a, c in aliases):
            raise ValueError("an alias is a name of its own (no spaces) for a card of the deck")

    @property
    def size(self) -> int:
        return len(self.cards)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks) + len(self.jokers)

    def tables(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        """(index by name, aliases included; rank of each card, one-hot rank matrix, one-hot
        suit matrix)."""
        index = {c: i for i, c in enumerate(self.cards)}
        index.update((a, index[c]) for a, c in self.aliases)
        per_rank = max(len(self.suits), 1)
        rank = np.array(
            [i // per_rank for i in range(len(self.cards) - len(self.jokers))]
            + [len(self.ranks) + j for j in range(len(self.jokers))],
            np.int64,
        )
        by_rank = np.eye(self.num_ranks, dtype=np.float32)[rank]
        by_suit = np.zeros((self.size, len(self.suits)), np.float32)
        for i in range(self.size - len(self.jokers)) if self.suits else ():
            by_suit[i, i % per_rank] = 1.0
        return index, rank, by_rank, by_suit

    def pattern(self) -> str:
        """One card, as a regular expression (no anchors)."""
        simple = all(len(x) == 1 for x in (*self.ranks, *self.suits))
        if simple and self.suits:
            r, s = (f"[{re.escape(''.join(x))}]" for x in (self.ranks, self.suits))
            sep = re.escape(self.sep)
            plain = s + sep + r if self.suit_first else r + sep + s
        else:
            plain = "|".join(map(re.escape, self.cards[: self.size - len(self.jokers)]))
        other = [*self.jokers, *(a for a, _ in self.aliases)]
        return "(?:" + "|".join([plain, *map(re.escape, other)]) + ")"


# --- moves --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A kind of move: `cards` (fewest, most) it takes; `from_hand`: its cards must be in the
    hand; `head`: how the fixed head tells its moves apart, "card" (one slot per card: a kind
    of one card), "rank" (per main rank: the rank it holds most of), "rank-count" (per main
    rank and number of cards: a pair of 7s is not three 7s) or "none" (one slot). Default:
    none for a cardless kind, card for a one-card kind, rank-count otherwise. (With "rank",
    a four-seat president's fixed head led a single 7 where its rules led all its 7s: the
    rules' clone agreed on every slot and still played another move.)

    `ranks`: the ranks (jokers included) its cards may have, checked, and the head's slots
    for those only (UNO: a skip is a skip card; 4 slots, not one per card of the deck).
    `choices`: what a move of the kind names beside its cards, one of them, spelled
    `"<kind>:<choice> <card>..."` (UNO's wild naming the colour in force: "wild:r wild"):
    a slot per choice in the head, one-hot in the history and the candidates. (Crazy eights
    names its suit in a move of its own, a cardless kind per suit: an engine that asks
    after the card keeps that; one that takes the card and the choice in one move needs
    this, or the move would not say what it does.)"""

    name: str
    cards: tuple[int, int] = (0, 0)
    from_hand: bool = True
    head: str = ""
    ranks: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()

    def slots(self, deck: Deck) -> int:
        counts = self.cards[1] - self.cards[0] + 1
        ranks = len(self.ranks) or deck.num_ranks
        cards = deck.size if not self.ranks else len(self.rank_cards(deck))
        return max(len(self.choices), 1) * {
            "none": 1, "card": cards, "rank": ranks, "rank-count": ranks * counts,
        }[self.head_kind]  # fmt: skip

    def rank_ids(self, deck: Deck) -> list[int]:
        """The deck's rank indices of `ranks` (every rank when empty); ValueError for a rank
        the deck has not."""
        names = [*deck.ranks, *deck.jokers]
        if any(r not in names for r in self.ranks):
            raise ValueError(f"kind {self.name!r}: ranks must be the deck's, got {self.ranks}")
        return [names.index(r) for r in self.ranks] if self.ranks else list(range(len(names)))

    def rank_cards(self, deck: Deck) -> list[int]:
        """The indices of the deck's cards of `ranks`, in the deck's order."""
        rank = deck.tables()[1]
        keep = set(self.rank_ids(deck))
        return [i for i in range(deck.size) if int(rank[i]) in keep]

    @property
    def head_kind(self) -> str:
        if self.head:
            return self.head
        return "none" if self.cards[1] == 0 else "card" if self.cards[1] == 1 else "rank-count"


@dataclass(frozen=True, eq=False)
class Move:
    """A move, read once (`CardGame.move` keeps it by its text) with what depends on it
    alone, so a state's features gather these instead of computing them per state."""

    kind: int  # index into the game's kinds
    counts: np.ndarray  # int64[deck size]
    first: int  # the first card's index (-1: no card)
    cards: tuple[int, ...]  # its cards' indices in the deck's order
    slot: int  # the fixed head's slot
    row: np.ndarray  # float32: its features and figures (`CardGame.move_row` says the layout)
    choice: int = -1  # index into the game's `choices` (-1: none)


@dataclass(frozen=True)
class Spelling:
    """A game's own spelling of its moves, for an engine that keeps its JSON (RLCard's
    doudizhu writes "33345", "pass"): `read` turns one into the toolkit's `"<kind>[ <card>
    ...]"` (a KeyError, ValueError or IndexError for anything that is not a move of the game:
    the engine sees a 422); `pattern` is the spelling's JSON Schema pattern (never stricter
    than `read`); `description` says it in the schema."""

    read: Callable[[str], str]
    pattern: str
    description: str = ""
