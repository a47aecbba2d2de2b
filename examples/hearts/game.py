"""Hearts, four seats, no passing, written from scratch as a studio's engine.

52 cards, 13 each. The holder of the 2 of clubs leads it to the first trick. Each seat follows
the led suit if it can, else plays any card; the highest card of the led suit takes the trick
and leads the next. Hearts may not be led until one has been played (hearts "broken"), unless
the leader holds only hearts. Each heart taken is 1 point, the queen of spades 13 (26 a hand).
Shooting the moon is played: a seat that takes all 26 scores 0 and each other seat 26.

Payoff per seat: (the mean of the other seats' points - its own) / 26. Zero-sum, in -1..+1
(+1: shot the moon; -1: took all 26 while nobody shot; a clean hand while another took the
queen is about +0.17), so a point taken costs the same whoever gives it away.

A move is "play 7H"; the engine lists one per playable card, in hand order.
"""

from __future__ import annotations

import random
from typing import Any

from croupier.games.simulator import Simulator
from examples.hearts.adapter import GAME

RANKS, SUITS, SEATS = "23456789TJQKA", "CDHS", 4
DECK = [r + s for s in SUITS for r in RANKS]  # hand order: by suit, then rank
ORDER = {card: i for i, card in enumerate(DECK)}
QUEEN, MOON = "QS", 26


def points(card: str) -> int:
    return 13 if card == QUEEN else int(card[1] == "H")


class HeartsSimulator(Simulator):
    name = "hearts"
    adapter = "examples.hearts.adapter:Hearts"
    num_players = SEATS

    def __init__(self) -> None:
        self.rng = random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng.seed(seed)
        deck = self.rng.sample(DECK, len(DECK))
        self.hands = [sorted(deck[i::SEATS], key=DECK.index) for i in range(SEATS)]
        self.turn = next(s for s in range(SEATS) if "2C" in self.hands[s])
        self.trick: list[str] = []  # cards of the trick in play, in the order played
        self.leader = self.turn
        self.taken = [0] * SEATS  # points taken so far
        self.played: list[list[str]] = [[] for _ in range(SEATS)]
        self.broken = False
        self.moves: list[list[Any]] = []

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other hands dealt from what this seat cannot see (`GAME.deal_unseen`); the
        trick, the cards played, the points and the moves are the state's: nothing else is
        hidden in this Hearts."""
        world = GAME.deal_unseen(state, rng)
        seat = self.turn = world.seat
        self.hands = [h if s == seat else sorted(h, key=ORDER.get)
                      for s, h in enumerate(world.hands)]  # fmt: skip
        self.trick = list(state["trick"])
        self.leader = (seat - len(self.trick)) % SEATS
        self.taken = list(state["points"])
        self.played = [list(p) for p in state["played"]]
        self.broken = state["broken"] == "yes"
        self.moves = [list(m) for m in state["moves"]]

    def current_player(self) -> int:
        return self.turn

    def legal_actions(self) -> list[str]:
        hand = self.hands[self.turn]
        if not self.trick:  # leading
            if len(hand) == 13:  # the first trick: the 2 of clubs
                cards = ["2C"]
            elif self.broken or all(c[1] == "H" for c in hand):
                cards = hand
            else:
                cards = [c for c in hand if c[1] != "H"]
        else:
            cards = [c for c in hand if c[1] == self.trick[0][1]] or hand
        return ["play " + c for c in cards]

    def state(self, seat: int) -> dict[str, Any]:
        legal = self.legal_actions() if seat == self.turn else []
        return {"seat": seat, "hand": list(self.hands[seat]), "trick": list(self.trick),
                "lead": self.trick[0][1] if self.trick else "none",
                "broken": "yes" if self.broken else "no",
                "played": [list(p) for p in self.played], "points": list(self.taken),
                "moves": [list(m) for m in self.moves], "legal_actions": legal}  # fmt: skip

    def step(self, action: Any) -> None:
        if self.is_over() or action not in self.legal_actions():
            raise ValueError(f"illegal action {action!r}; legal: {self.legal_actions()}")
        seat, card = self.turn, action[5:]
        self.moves.append([seat, action])
        self.hands[seat].remove(card)
        self.played[seat].append(card)
        self.trick.append(card)
        self.broken = self.broken or card[1] == "H"
        if len(self.trick) < SEATS:
            self.turn = (seat + 1) % SEATS
            return
        lead = self.trick[0][1]
        best = max((c for c in self.trick if c[1] == lead), key=lambda c: RANKS.index(c[0]))
        winner = (self.leader + self.trick.index(best)) % SEATS
        self.taken[winner] += sum(points(c) for c in self.trick)
        self.trick, self.leader, self.turn = [], winner, winner

    def is_over(self) -> bool:
        return not any(self.hands)

    def scores(self) -> list[int]:
        """Each seat's points for the hand, the moon applied."""
        if MOON in self.taken:
            return [0 if t == MOON else MOON for t in self.taken]
        return list(self.taken)

    def payoffs(self) -> list[float]:
        s = self.scores()
        return [((sum(s) - own) / (SEATS - 1) - own) / MOON for own in s]
