"""President declared through croupier's card-game toolkit (the engine: `game.py`).

Serve the fixed head with `--game examples.president.adapter:President` (a slot per kind and
rank), scored candidates with `--game examples.president.adapter:PresidentCandidates`.
"""

from __future__ import annotations

from typing import Any

from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Deck,
    Hand,
    History,
    Kind,
    Pile,
    Seat,
    SeatNumbers,
    Unseen,
)

GAME = CardGame(
    name="president",
    deck=Deck(ranks="3456789TJQKA2", suits="CDHS"),
    players=4,
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=13),
        Pile("to_beat", max_cards=4),  # the play to beat this trick (empty: you lead)
        SeatNumbers("num_cards", high=13),
        History("moves", last=8, max_moves=32),
    ),
    kinds=(Kind("pass"), Kind("play", cards=(1, 4))),  # the fixed head: a slot per rank
    answers="to_beat",
    payoff_range=(-1.0, 1.0),
    max_legal=53,  # pass, and up to four counts of each of 13 ranks
    # Played cards leave the game: the moves listed are gone, older plays are the rest.
    unseen=Unseen(hands="num_cards", gone=("moves",)),
)


class President(CardGameAdapter):
    game = GAME
    simulator = "examples.president.game:PresidentSimulator"

    def rules(self) -> Any:
        return self.checking(president_rules)


class PresidentCandidates(President, CardCandidatesAdapter):
    """The same game, each legal move scored as a candidate."""


def president_rules(state: dict[str, Any]) -> str:
    """The studio's bot: lead the lowest rank with all of its cards held, answer with the
    lowest play that beats, keep 2s while more than 4 cards are left; else pass."""
    legal = state["legal_actions"]
    plays = [m for m in legal if m != "pass"]
    if len(state["hand"]) > 4:
        plays = [m for m in plays if m[5] != "2"] or plays * ("pass" not in legal)
    if not plays:
        return "pass"
    lowest = min(plays, key=lambda m: "3456789TJQKA2".index(m[5]))
    same = [m for m in plays if m[5] == lowest[5]]
    return max(same, key=len)  # leading: all cards of that rank; answering: just one choice
