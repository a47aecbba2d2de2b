"""Crazy eights (OpenSpiel's, two seats) declared through croupier's card-game toolkit.

Serve the fixed head with `--game examples.crazy_eights.adapter:CrazyEights` (a slot per card
to play, draw, pass and the four suits to name), scored candidates with
`--game examples.crazy_eights.adapter:CrazyEightsCandidates`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Choice,
    Deck,
    Hand,
    History,
    Kind,
    Pile,
    Seat,
    SeatNumbers,
    TopCard,
    Unseen,
)

SUITS = "CDHS"
GAME = CardGame(
    name="crazy-eights",
    deck=Deck(ranks="23456789TJQKA", suits=SUITS, suit_first=True),  # OpenSpiel's "C4", "HA"
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=51),
        TopCard("top"),
        # The discard pile under the top card: every card played but the last, and the card
        # first turned up. Public at the table, so sent: without it a seat's worlds deal the
        # opponent cards long played (the moves list only the latest).
        Pile("played", max_cards=51),
        Choice("suit", options=tuple(SUITS)),  # the suit in force (an 8's named one)
        Choice("phase", options=("play", "nominate")),
        SeatNumbers("num_cards", high=51),
        History("moves", last=8, max_moves=16),
    ),
    kinds=(
        Kind("play", cards=(1, 1)),
        Kind("draw"),
        Kind("pass"),
        # Naming a suit is one kind with the suit as its choice (not a kind per suit): its
        # candidate row then says which suit, and how many of it the hand keeps.
        Kind("suit", choices=tuple(SUITS)),
    ),  # fmt: skip
    answers="top",
    # The first out wins the other's points, at most the deck's 508 (OpenSpiel's / 100).
    payoff_range=(-5.08, 5.08),
    max_legal=52,
    # Played cards stay out (no reshuffle): the pile and the top card are counted; the stock
    # and the opponent's hand are the rest.
    unseen=Unseen(hands="num_cards"),
)


class CrazyEights(CardGameAdapter):
    game = GAME
    simulator = "examples.crazy_eights.game:CrazyEightsSimulator"

    def rules(self) -> Any:
        return self.checking(eights_rules)


class CrazyEightsCandidates(CrazyEights, CardCandidatesAdapter):
    """The same game, each legal move scored as a candidate."""


def eights_rules(state: dict[str, Any]) -> str:
    """The studio's bot: name the suit held most; play a card that is not an 8, of the suit
    held most, highest first; an 8 only when nothing else goes; else draw, then pass."""
    legal, hand = state["legal_actions"], state["hand"]
    held = Counter(card[0] for card in hand if card[1] != "8")
    if state["phase"] == "nominate":
        return f"suit:{max(SUITS, key=lambda s: held[s])}"
    plays = [m for m in legal if m.startswith("play ")]
    plain = [m for m in plays if m[6] != "8"]
    if plain:
        return max(plain, key=lambda m: (held[m[5]], "23456789TJQKA".index(m[6])))
    if plays:
        return plays[0]
    return "draw" if "draw" in legal else legal[0]
