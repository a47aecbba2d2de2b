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
    four of each rank, one of each joker). Without suits a card is its rank ("7", "B")."""

    ranks: str | tuple[str, ...]
    suits: str | tuple[str, ...] = ()
    jokers: tuple[str, ...] = ()
    copies: int = 1
    suit_first: bool = False
    copies_of: Mapping[str, int] | tuple[tuple[str, int], ...] = ()
    cards: tuple[str, ...] = field(init=False)
    card_copies: tuple[int, ...] = field(init=False)  # per card, in `cards` order

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
        # Kept as sorted pairs: a declaration stays hashable data.
        pairs = tuple(sorted(dict(self.copies_of).items()))
        object.__setattr__(self, "copies_of", pairs)
        if any(c not in self.cards or type(n) is not int or n < 1 for c, n in pairs):
            raise ValueError("copies_of names cards of the deck, each at least once")
        per = dict(pairs)
        object.__setattr__(self, "card_copies", tuple(per.get(c, self.copies) for c in self.cards))

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
            plain = s + r if self.suit_first else r + s
        else:
            plain = "|".join(map(re.escape, self.cards[: self.size - len(self.jokers)]))
        return "(?:" + "|".join([plain, *map(re.escape, self.jokers)]) + ")"


# --- moves --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A kind of move: `cards` (fewest, most) it takes; `from_hand`: its cards must be in the
    hand; `head`: how the fixed head tells its moves apart, "card" (one slot per card: a kind
    of one card), "rank" (per main rank: the rank it holds most of), "rank-count" (per main
    rank and number of cards: a pair of 7s is not three 7s) or "none" (one slot). Default:
    none for a cardless kind, card for a one-card kind, rank-count otherwise. (With "rank",
    a four-seat president's fixed head led a single 7 where its rules led all its 7s: the
    rules' clone agreed on every slot and still played another move.)"""

    name: str
    cards: tuple[int, int] = (0, 0)
    from_hand: bool = True
    head: str = ""

    def slots(self, deck: Deck) -> int:
        counts = self.cards[1] - self.cards[0] + 1
        return {"none": 1, "card": deck.size, "rank": deck.num_ranks,
                "rank-count": deck.num_ranks * counts}[self.head_kind]  # fmt: skip

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
