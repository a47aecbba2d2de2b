"""UNO declared through the card-game toolkit, reading the engine's own JSON unchanged.

The state is RLCard's raw state as `croupier engine --game uno` sends it (`games/uno.py`: cards
"r-1", "b-skip", "g-wild_draw_4"; `color` in force; `moves`, each [seat, action, colour faced]);
the actions are RLCard's 61 ("r-7"; "r-wild", a wild naming red; "draw"). What UNO asked of the
toolkit: a wild is one colourless card that RLCard writes with the colour it last took
(`Deck.aliases`); a wild's action names the colour (`Kind.choices`: "r-wild" reads "wild:r wild");
kinds of some ranks only (`Kind.ranks`); a card listed once per copy held (`repeated_legal`); the
colour faced (`History.then`). `--game croupier.games.uno_cards:UnoCards` (fixed head) or
`...:UnoCardsCandidates` (scored candidates, `PRESETS["uno"]`, as the built-in `uno`)."""

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
    Spelling,
    TopCard,
    Unseen,
)
from croupier.games.presets import PRESETS
from croupier.games.uno import UnoBasicAdapter

COLORS = ("r", "g", "b", "y")
NUMBERS = tuple("0123456789")
ACTIONS = ("skip", "reverse", "draw_2")
WILDS = ("wild", "wild_draw_4")
KINDS = (Kind("number", (1, 1), ranks=NUMBERS),
         *(Kind(a, (1, 1), ranks=(a,)) for a in ACTIONS),
         *(Kind(w, (1, 1), ranks=(w,), choices=COLORS) for w in WILDS),
         Kind("draw"))  # fmt: skip


def read_move(move: str) -> str:
    """RLCard's action ("r-7", "b-skip", "g-wild", "draw") -> the toolkit's ("number r-7",
    "skip b-skip", "wild:g wild"); KeyError or ValueError if it is none."""
    if move == "draw":
        return move
    color, trait = move.split("-", 1)
    if trait in WILDS:
        return f"{trait}:{color} {trait}"
    return f"{'number' if trait in NUMBERS else ACTIONS[ACTIONS.index(trait)]} {move}"


# RLCard's deck: per colour one 0, two of 1-9, skip, reverse, draw_2; four of each wild.
DECK = Deck(ranks=(*NUMBERS, *ACTIONS), suits=COLORS, suit_first=True, sep="-", copies=2,
            jokers=WILDS, copies_of={**{f"{c}-0": 1 for c in COLORS}, **dict.fromkeys(WILDS, 4)},
            aliases={f"{c}-{w}": w for c in COLORS for w in WILDS})  # fmt: skip
SPELLING = Spelling(read_move, "^(?:draw|[rgby]-(?:[0-9]|skip|reverse|draw_2|wild|wild_draw_4))$",
                    "RLCard's action: 'draw', or colour-trait ('r-wild': wild, red)")  # fmt: skip
GAME = CardGame(
    name="uno",  # the engine's game: `croupier engine --game uno` plays it
    deck=DECK,
    zones=(
        Seat("current_player"),
        Hand("hand", max_cards=108),
        TopCard("target", counted=False),  # also in played_cards, or reshuffled in the stock
        Choice("color", options=COLORS),  # required (the hand-made adapter defaults it)
        Pile("played_cards", max_cards=108),  # since the last reshuffle
        SeatNumbers("num_cards", high=108),
        History("moves", last=8, max_moves=64, required=False, then=COLORS, recency=True),
    ),
    kinds=KINDS,
    answers="target",
    max_legal=35,  # a colour's 25 cards, a trait's 6 others, a wild's 4 colours (padding)
    repeated_legal=True,
    spelling=SPELLING,
    unseen=Unseen(hands="num_cards"),  # the rest: the draw pile (the target too, reshuffled)
)


class UnoCards(CardGameAdapter):
    """The fixed head: RLCard's 61 actions, a slot each."""

    game = GAME
    simulator = "croupier.engine.rlcard_games:UnoTable"

    def warm_up(self) -> None:
        UnoBasicAdapter().warm_up()

    def rules(self) -> Any:
        return self.checking(UnoBasicAdapter().checked_rules())  # uno-rule-v1, as `--game uno`


class UnoCardsCandidates(UnoCards, CardCandidatesAdapter):
    """Each legal action scored as a candidate, trained with `--game uno`'s preset."""

    preset = PRESETS["uno"]
