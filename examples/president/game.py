"""President (a shedding game), four seats, written from scratch as a studio's engine.

52 cards, 13 each; the holder of the 3 of clubs leads. A lead is one to four cards of one rank;
each next seat plays as many cards of a higher rank (2 is high) or passes. When every other
seat still in the hand has passed since the last play, its player (or, if out, the next seat
in) leads anew. The first out scores +1, then +1/3, -1/3, the last -1. The engine lists one
move per rank and count (suits do not matter here): "pass", "play 7C 7H".
"""

from __future__ import annotations

import random
from typing import Any

from croupier.games.simulator import Simulator
from examples.president.adapter import GAME

RANKS, SUITS, SEATS = "3456789TJQKA2", "CDHS", 4
DECK = [r + s for r in RANKS for s in SUITS]
SCORES = (1.0, 1 / 3, -1 / 3, -1.0)


class PresidentSimulator(Simulator):
    name = "president"
    adapter = "examples.president.adapter:President"
    num_players = SEATS

    def __init__(self) -> None:
        self.rng = random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng.seed(seed)
        deck = self.rng.sample(DECK, len(DECK))
        self.hands = [sorted(deck[i::SEATS], key=DECK.index) for i in range(SEATS)]
        self.turn = next(s for s in range(SEATS) if "3C" in self.hands[s])
        self.to_beat: list[str] = []
        self.last, self.passes = self.turn, 0
        self.out: list[int] = []
        self.moves: list[list[Any]] = []

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other hands dealt from what this seat cannot see (`GAME.deal_unseen`: the
        cards played before the listed moves are the world's rest, out of the game). Who
        played the pile to beat and the passes since are read from the moves; the seats
        already out in the order their last moves show (a seat out moves no more), those
        whose last move is older than the list first, in a random order."""
        world = GAME.deal_unseen(state, rng)
        self.hands, self.turn = world.hands, world.seat
        self.to_beat, self.moves = list(state["to_beat"]), [list(m) for m in state["moves"]]
        self.last, self.passes = self.turn, 0
        if self.to_beat:
            at = max(i for i, (_, move) in enumerate(self.moves) if move != "pass")
            self.last, self.passes = self.moves[at][0], len(self.moves) - 1 - at
        last_move = {seat: i for i, (seat, _) in enumerate(self.moves)}
        out = [s for s in range(SEATS) if not self.hands[s]]
        rng.shuffle(out)  # (ties: out before the listed moves)
        self.out = sorted(out, key=lambda s: last_move.get(s, -1))

    def current_player(self) -> int:
        return self.turn

    def legal_actions(self) -> list[str]:
        hand, need = self.hands[self.turn], len(self.to_beat)
        low = RANKS.index(self.to_beat[0][0]) + 1 if need else 0
        moves = [] if not need else ["pass"]
        for rank in RANKS[low:]:
            held = [c for c in hand if c[0] == rank]
            counts = range(1, len(held) + 1) if not need else [need] * (len(held) >= need)
            moves += ["play " + " ".join(held[:n]) for n in counts]
        return moves

    def state(self, seat: int) -> dict[str, Any]:
        legal = self.legal_actions() if seat == self.turn else ["pass"]
        return {"seat": seat, "hand": list(self.hands[seat]), "to_beat": list(self.to_beat),
                "num_cards": [len(h) for h in self.hands], "moves": self.moves[-32:],
                "legal_actions": legal}  # fmt: skip

    def _next(self, seat: int) -> int:
        seat = (seat + 1) % SEATS
        while seat in self.out:
            seat = (seat + 1) % SEATS
        return seat

    def step(self, action: Any) -> None:
        if self.is_over() or action not in self.legal_actions():
            raise ValueError(f"illegal action {action!r}; legal: {self.legal_actions()}")
        seat = self.turn
        self.moves.append([seat, action])
        if action == "pass":
            self.passes += 1
        else:
            cards = action.split(" ")[1:]
            self.hands[seat] = [c for c in self.hands[seat] if c not in cards]
            self.to_beat, self.last, self.passes = cards, seat, 0
            if not self.hands[seat]:
                self.out.append(seat)
                if len(self.out) == SEATS - 1:
                    self.out.append(next(s for s in range(SEATS) if s not in self.out))
                    return
        in_hand = SEATS - len(self.out)
        if self.passes >= in_hand - (self.last not in self.out):  # the trick is over
            self.to_beat, self.passes = [], 0
            self.turn = self.last if self.last not in self.out else self._next(self.last)
        else:
            self.turn = self._next(seat)

    def is_over(self) -> bool:
        return len(self.out) == SEATS

    def payoffs(self) -> list[float]:
        return [SCORES[self.out.index(s)] for s in range(SEATS)]
