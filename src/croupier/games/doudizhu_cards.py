"""Doudizhu declared through the card-game toolkit, reading the engine's own JSON unchanged.

The state is RLCard's raw state as `croupier engine --game doudizhu` sends it (`games/
doudizhu.py`: "33345"-style card strings, moves "pass", "3334"): its fields are the zones,
cards written as one string (`joined`), moves read by RLCard's move table into a kind and a
card set (`Spelling`). The same engine plays it: `--game croupier.games.doudizhu_cards:
DoudizhuCards` (fixed head) or `...:DoudizhuCardsCandidates` (scored candidates, the preset
the hand-made `--game doudizhu` trains). It checks what the hand-made checks (the hand's size,
`Hand.size_in`; each legal move beats the trace, `check`) and more, but reads no `actions`.

In croupier, not examples/ (a package install has none): `bench strength --game doudizhu
--adapter croupier.games.doudizhu_cards:DoudizhuCardsCandidates` sets it beside the hand-made.
"""

from __future__ import annotations

from typing import Any

from rlcard.games.doudizhu.utils import CARD_TYPE

from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Deck,
    Hand,
    History,
    Kind,
    Pile,
    RoleSeat,
    Seat,
    SeatNumbers,
    SeatPiles,
    Spelling,
    Unseen,
)
from croupier.games.doudizhu import MOVE_PATTERN, beats_the_trace, rule_agent, rule_move
from croupier.games.presets import PRESETS

# RLCard's move types without the chain length ("trio_solo_chain_3" -> "trio_solo_chain"),
# with the cards each takes.
KINDS = (Kind("pass"), Kind("solo", (1, 1)), Kind("pair", (2, 2)), Kind("trio", (3, 3)),
         Kind("trio_solo", (4, 4)), Kind("trio_pair", (5, 5)), Kind("solo_chain", (5, 12)),
         Kind("pair_chain", (6, 20)), Kind("trio_chain", (6, 18)),
         Kind("trio_solo_chain", (8, 20)), Kind("trio_pair_chain", (10, 20)),
         Kind("four_two_solo", (6, 6)), Kind("four_two_pair", (8, 8)), Kind("bomb", (4, 4)),
         Kind("rocket", (2, 2)))  # fmt: skip


def read_move(move: str) -> str:
    """RLCard's spelling ("3334") -> the toolkit's ("trio_solo 3 3 3 4"); KeyError if none."""
    if move == "pass":
        return move
    name = CARD_TYPE[0][move][0][0]
    base, _, n = name.rpartition("_")
    return " ".join([base if n.isdigit() else name, *move])


GAME = CardGame(
    name="doudizhu",  # the engine's game: `croupier engine --game doudizhu` plays it
    deck=Deck(ranks="3456789TJQKA2", jokers=("B", "R"), copies=4, copies_of={"B": 1, "R": 1}),
    players=3,
    zones=(
        Seat("self"),
        RoleSeat("landlord", alone=True),  # landlord against the two peasants: the teams
        Hand("current_hand", max_cards=20, joined=True, size_in="num_cards_left"),
        Pile("others_hand", max_cards=37, joined=True),
        SeatPiles("played_cards", max_cards=20, joined=True),
        SeatNumbers("num_cards_left", high=20),
        History("trace", last=3, max_moves=200),  # a round of the table, newest first
    ),
    kinds=KINDS,
    answers="trace",  # the move to beat: the newest play of the last two moves
    payoff_range=(0.0, 1.0),  # RLCard's: 1 to each seat of the winning side
    max_legal=512,  # as `games/doudizhu.py` MAX_CANDIDATES
    spelling=Spelling(read_move, MOVE_PATTERN, "A move: 'pass', or its cards low to high."),
    # RLCard's state lists the other two hands together: split by their counts.
    unseen=Unseen(hands="num_cards_left", pool="others_hand"),
    check=beats_the_trace,
)


class DoudizhuCards(CardGameAdapter):
    """The fixed head (a slot per kind and main rank and size)."""

    game = GAME
    simulator = "croupier.engine.rlcard_games:DoudizhuTable"

    def warm_up(self) -> None:
        rule_agent()

    def rules(self) -> Any:
        return self.checking(rule_move)  # RLCard's doudizhu-rule-v1, as `--game doudizhu`


class DoudizhuCardsCandidates(DoudizhuCards, CardCandidatesAdapter):
    """Each legal move scored as a candidate, trained with `--game doudizhu`'s preset."""

    preset = PRESETS["doudizhu"]
