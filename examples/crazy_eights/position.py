"""OpenSpiel's two-seat crazy eights from any position, in plain Python: what
`CrazyEightsSimulator.resample` plays on. OpenSpiel's state cannot be set from a position
(only replayed from the deal, and a state keeps only its last 16 moves), so this models its
rules (`tests/test_world_models.py` plays it against OpenSpiel move by move: the same legal moves,
the same returns).

OpenSpiel's rules with its defaults (no special cards, no reshuffle): play an 8, or a card of
the suit in force or of the top card's rank; an 8 then names the suit; else draw, at most 5 a
turn, then pass; with the stock empty a seat may pass, and the third pass in a row ends the
hand, as do an empty hand and the 100th card played. Each seat then scores minus what it
holds: an 8 50, a jack to an ace 10, any other card its OpenSpiel number (rank * 4 + suit,
clubs to spades) plus 2, as OpenSpiel counts it.
"""

from __future__ import annotations

from typing import Any

RANKS, SUITS = "23456789TJQKA", "CDHS"
MAX_DRAWS, MAX_PLAYS, PASSES_TO_END = 5, 100, 3
MOVES_SENT = 16  # the moves a state lists (`CrazyEightsSimulator.state`)
# OpenSpiel's card number ("C3": 4): its legal moves come in this order, then draw, pass.
NUMBER = {s + r: i * 4 + j for i, r in enumerate(RANKS) for j, s in enumerate(SUITS)}
POINTS = {
    c: 50 if c[1] == "8" else 10 if RANKS.index(c[1]) >= 9 else n + 2 for c, n in NUMBER.items()
}
NAMES = ["suit:" + s for s in SUITS]


def goes_on(card: str, top_rank: str, suit: str) -> bool:
    """Whether `card` may be played: an 8, or of the suit in force, or of the top card's rank."""
    return card[1] == "8" or card[0] == suit or card[1] == top_rank


class EightsPosition:
    """A hand from a position: `hands` (each seat's cards, in the order held), `stock`
    (drawn from its end), the `top` card and the `suit` in force, `turn`, `nominate` (the
    seat to act names a suit), `draws` (this turn's), `passes` (in a row, the stock
    empty), `moves` (as a state lists them), `played` (the discard pile under the top card:
    a card for each one played, the first turned up under them)."""

    __slots__ = ("hands", "stock", "top", "suit", "turn", "nominate", "draws", "passes",
                 "moves", "played", "over")  # fmt: skip

    def __init__(
        self,
        hands: list[list[str]],
        stock: list[str],
        top: str,
        suit: str,
        turn: int,
        nominate: bool,
        draws: int,
        passes: int,
        moves: list[list[Any]],
        played: list[str],
    ):
        self.hands, self.stock, self.top, self.suit, self.turn = hands, stock, top, suit, turn
        self.nominate, self.draws, self.passes = nominate, draws, passes
        self.moves, self.played, self.over = moves, played, False

    def current_player(self) -> int:
        return self.turn

    @property
    def plays(self) -> int:
        """Cards played so far (the 100th ends the hand)."""
        return len(self.played)

    def is_over(self) -> bool:
        return self.over

    def returns(self) -> list[float]:
        """OpenSpiel's returns: each seat minus the points it holds."""
        return [-float(sum(POINTS[c] for c in hand)) for hand in self.hands]

    def legal_actions(self) -> list[str]:
        if self.nominate:
            return list(NAMES)
        rank, suit = self.top[1], self.suit
        cards = [c for c in self.hands[self.turn] if goes_on(c, rank, suit)]
        legal = ["play " + c for c in sorted(cards, key=NUMBER.__getitem__)]
        if self.stock and self.draws != MAX_DRAWS:
            legal.append("draw")
        if not self.stock or self.draws == MAX_DRAWS:
            legal.append("pass")
        return legal

    def state(self, seat: int) -> dict[str, Any]:
        """The JSON `CrazyEightsSimulator.state` sends."""
        return {"seat": seat, "hand": list(self.hands[seat]), "top": self.top,
                "played": list(self.played), "suit": self.suit,
                "phase": "nominate" if self.nominate else "play",
                "num_cards": [len(h) for h in self.hands], "moves": self.moves[-MOVES_SENT:],
                "legal_actions": self.legal_actions()}  # fmt: skip

    def step(self, action: str) -> None:
        if self.over or action not in self.legal_actions():
            raise ValueError(f"illegal action {action!r}; legal: {self.legal_actions()}")
        me = self.turn
        self.moves.append([me, action])
        if action == "pass":
            self.passes = self.passes + 1 if not self.stock else 0
            if self.passes == PASSES_TO_END:
                self.over = True
                return
            if self.draws == MAX_DRAWS:
                self.draws = 0
            self.turn = 1 - me
            return
        self.passes = 0
        if action == "draw":
            self.hands[me].append(self.stock.pop())
            self.draws = self.draws + 1 if self.stock else MAX_DRAWS
        elif self.nominate:
            self.suit, self.nominate, self.turn = action[5:], False, 1 - me
        else:
            card = action[5:]
            self.hands[me].remove(card)
            self.draws = 0
            self.played.append(self.top)
            self.top, self.suit = card, card[0]
            if not self.hands[me] or self.plays >= MAX_PLAYS:
                self.over = True
            elif card[1] == "8":
                self.nominate = True
            else:
                self.turn = 1 - me
