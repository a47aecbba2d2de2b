"""Limit hold'em (RLCard's `limit-holdem`) declared through croupier's card-game toolkit.

The state is RLCard's raw observation for the seat to act, plus the seat and the moves so far
(`examples/limit_holdem/game.py` sends it); the studio's bot is RLCard's `limit-holdem-rule-v1`.
Serve the fixed head with `--game examples.limit_holdem.adapter:LimitHoldem`, scored
candidates with `--game examples.limit_holdem.adapter:LimitHoldemCandidates`.
"""

from __future__ import annotations

import functools
from typing import Any

from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Deck,
    Hand,
    History,
    Kind,
    Number,
    Numbers,
    Pile,
    Seat,
    SeatNumbers,
    Unseen,
)

# Chips one seat can put in: big blind 2, four raises of 2 before the flop and on it, of 4 on
# the turn and the river: 2 + 8 + 8 + 16 + 16 = 50 (RLCard's limit hold'em).
MAX_CHIPS = 50

GAME = CardGame(
    name="limit-holdem",
    deck=Deck(ranks="23456789TJQKA", suits="SHDC", suit_first=True),  # RLCard's "SA", "HT"
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=2),
        Pile("public_cards", max_cards=5),
        SeatNumbers("all_chips", low=0, high=MAX_CHIPS),
        Number("my_chips", low=0, high=MAX_CHIPS, integer=True),
        Numbers("raise_nums", low=0, high=4, integer=True, length=4),
        History("moves", last=12, max_moves=64),
    ),
    kinds=(Kind("call"), Kind("raise"), Kind("fold"), Kind("check")),
    payoff_range=(-MAX_CHIPS / 2, MAX_CHIPS / 2),  # RLCard pays chips / big blind
    max_legal=4,
    unseen=Unseen(hands=2),  # two hole cards each; the rest: the stock the board comes from
)


class LimitHoldem(CardGameAdapter):
    """The fixed head: one slot per kind of move (its moves hold no cards)."""

    game = GAME
    simulator = "examples.limit_holdem.game:LimitHoldemSimulator"

    def warm_up(self) -> None:
        _rule_agent()

    def rules(self) -> Any:
        return self.checking(self.checked_rules())

    def checked_rules(self) -> Any:
        return holdem_rules


class LimitHoldemCandidates(LimitHoldem, CardCandidatesAdapter):
    """The same game, each legal move scored as a candidate."""


@functools.cache
def _rule_agent() -> Any:
    import rlcard.models  # registers the model ids

    return rlcard.models.load("limit-holdem-rule-v1").agents[0]


def holdem_rules(state: dict[str, Any]) -> str:
    """The studio's bot: RLCard's `limit-holdem-rule-v1` on the state it reads (it can name a
    move that is not legal: then check, else call)."""
    legal = state["legal_actions"]
    action = _rule_agent().step({"raw_obs": state, "raw_legal_actions": legal})
    if action in legal:
        return str(action)
    return "check" if "check" in legal else "call"
