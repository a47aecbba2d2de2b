"""Hearts as OpenSpiel plays it (four seats) declared through croupier's card-game toolkit;
`examples/hearts/` is another Hearts, its engine written from scratch.

Serve the fixed head with `--game examples.hearts_openspiel.adapter:Hearts` (a slot per
card), scored candidates with `--game examples.hearts_openspiel.adapter:HeartsCandidates`.
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
    SeatPiles,
    Unseen,
)

RANKS, SUITS = "23456789TJQKA", "CDHS"
GAME = CardGame(
    name="hearts-openspiel",
    deck=Deck(ranks=RANKS, suits=SUITS),  # OpenSpiel's "QS", "2C"
    players=4,
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=13),
        Pile("trick", max_cards=3),  # this trick's cards as played (empty: you lead)
        Pile("played", max_cards=48),  # the cards of the tricks done
        # The point cards each seat took: also in `played`, so not counted against the deck.
        SeatPiles("taken", max_cards=14, counted=False),
        Choice("hearts_broken", options=("no", "yes")),
        # Each move with the suit led when it was made ("lead": it led): a card of another
        # suit says that seat has none of the one led.
        History("moves", last=12, max_moves=52, then=("lead", *SUITS)),
    ),
    kinds=(Kind("play", cards=(1, 1)),),
    answers="trick",
    payoff_range=(0.0, 1.0),  # OpenSpiel's 26 less the points taken, / 26
    max_legal=13,
    unseen=Unseen(hands=13, played="moves"),  # 13 each, less each seat's moves (all listed)
)


class Hearts(CardGameAdapter):
    game = GAME
    simulator = "examples.hearts_openspiel.game:HeartsSimulator"

    def rules(self) -> Any:
        return self.checking(hearts_rules)


class HeartsCandidates(Hearts, CardCandidatesAdapter):
    """The same game, each legal move scored as a candidate."""


def hearts_rules(state: dict[str, Any]) -> str:
    """The studio's bot: lead the lowest card, hearts last; follow with the highest card that
    does not take the trick, else the lowest (the highest but the queen of spades when last
    to a trick without points); with none of the suit led, drop the queen of spades, then
    the highest heart, then the highest card."""
    cards, trick = [m[5:] for m in state["legal_actions"]], state["trick"]

    def rank(card: str) -> int:
        return RANKS.index(card[0])

    if not trick:
        return "play " + min([c for c in cards if c[1] != "H"] or cards, key=rank)
    lead = trick[0][1]
    follow = [c for c in cards if c[1] == lead]
    if follow:
        top = max(rank(c) for c in trick if c[1] == lead)
        under = [c for c in follow if rank(c) < top]
        if under:
            return "play " + max(under, key=rank)
        clean = len(trick) == 3 and not any(c[1] == "H" or c == "QS" for c in trick)
        if clean:
            return "play " + max([c for c in follow if c != "QS"] or follow, key=rank)
        return "play " + min(follow, key=rank)
    for pick in ([c for c in cards if c == "QS"], [c for c in cards if c[1] == "H"], cards):
        if pick:
            return "play " + max(pick, key=rank)
    raise ValueError("no legal move")  # unreachable: a state always lists one
