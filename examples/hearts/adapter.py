"""Hearts (four seats, no passing) declared through croupier's card-game toolkit (the engine:
`game.py`).

Serve the fixed head with `--game examples.hearts.adapter:Hearts` (a slot per card),
scored candidates with `--game examples.hearts.adapter:HeartsCandidates`.
"""

from __future__ import annotations

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
    SeatPiles,
    Unseen,
)

RANKS = "23456789TJQKA"
GAME = CardGame(
    name="hearts",
    deck=Deck(ranks=RANKS, suits="CDHS"),
    players=4,
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=13),
        Pile("trick", max_cards=3, counted=False),  # also in "played"
        Choice("lead", options=("none", "C", "D", "H", "S")),  # the led suit of the trick
        Choice("broken", options=("no", "yes")),  # a heart has been played
        SeatPiles("played", max_cards=13),  # every card each seat played, this trick's too
        SeatNumbers("points", high=26),  # points taken so far
        History("moves", last=8, max_moves=52),
    ),
    kinds=(Kind("play", cards=(1, 1)),),
    answers="trick",
    payoff_range=(-1.0, 1.0),
    max_legal=13,
    unseen=Unseen(hands=13, played="played"),  # 13 each, less what each seat played
)


class Hearts(CardGameAdapter):
    game = GAME
    simulator = "examples.hearts.game:HeartsSimulator"

    def rules(self) -> Any:
        return self.checking(hearts_rules)


class HeartsCandidates(Hearts, CardCandidatesAdapter):
    """The same game, each legal move scored as a candidate."""


def hearts_rules(state: dict[str, Any]) -> str:
    """The studio's bot: following, the highest card that still loses the trick, else the
    lowest; void of the led suit, dump the queen of spades, then the highest heart, then the
    highest card; leading, the lowest card."""
    cards = [m[5:] for m in state["legal_actions"]]
    rank = RANKS.index
    trick = state["trick"]
    if not trick:
        card = min(cards, key=lambda c: rank(c[0]))
    elif cards[0][1] == trick[0][1]:  # following suit
        best = max(rank(c[0]) for c in trick if c[1] == trick[0][1])
        losing = [c for c in cards if rank(c[0]) < best]
        card = (
            max(losing, key=lambda c: rank(c[0]))
            if losing
            else min(cards, key=lambda c: rank(c[0]))
        )
    elif "QS" in cards:
        card = "QS"
    else:
        hearts = [c for c in cards if c[1] == "H"]
        card = max(hearts or cards, key=lambda c: rank(c[0]))
    return "play " + card
