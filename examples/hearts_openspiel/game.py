"""Hearts, four seats, as OpenSpiel plays it (`pip install 'croupier[games]'`: the
`open-spiel` package), wrapped from scratch as a studio wraps its engine: the hands are read
from OpenSpiel's deal, the trick, the cards taken and the hearts broken followed from the
plays; chance is drawn from the table's seed.

OpenSpiel's rules (its defaults): 13 cards each, dealt without a pass here (OpenSpiel's pass
direction "No Pass" every hand: one kind of decision); the 2 of clubs leads the first trick;
follow the lead suit if you can; no points on the first trick; hearts are not led until one
(or the queen of spades) has been played; the highest card of the lead suit takes the trick
and leads the next. Each heart taken costs a point, the queen of spades 13; a seat that takes
all 26 ("shoots the moon") gives every other seat 26 instead. OpenSpiel's return is 26 less
the points; the payoff here is that / 26 (1: no points taken).
"""

from __future__ import annotations

import random
from typing import Any

from croupier.games.simulator import Simulator
from examples.hearts_openspiel.adapter import GAME

SEATS, SCALE = 4, 26.0
RANKS, SUITS = "23456789TJQKA", "CDHS"
QUEEN = "QS"
# OpenSpiel's card (a chance outcome when dealt, an action when played): rank * 4 + suit.
CARD_ID = {r + s: i * 4 + j for i, r in enumerate(RANKS) for j, s in enumerate(SUITS)}
# A hand in the order OpenSpiel's view of it lists it (`_dealt`): spades first, high first.
HAND_ORDER = {c: (-SUITS.index(c[1]), -RANKS.index(c[0])) for c in CARD_ID}


def points(card: str) -> int:
    return 13 if card == QUEEN else int(card[1] == "H")


def _spiel() -> Any:
    try:
        import pyspiel  # the optional `games` extra
    except ImportError:
        raise ValueError("hearts is OpenSpiel's: pip install 'croupier[games]'") from None
    return pyspiel.load_game("hearts")


class HeartsSimulator(Simulator):
    name = "hearts-openspiel"
    adapter = "examples.hearts_openspiel.adapter:Hearts"
    num_players = SEATS
    zero_sum = False  # every payoff is 0..1: they sum to 3 a hand, 1 after a moon

    def __init__(self) -> None:
        self.game, self.rng = _spiel(), random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng.seed(seed)
        self.s = self.game.new_initial_state()
        self.s.apply_action(0)  # the pass direction: "No Pass"
        while self.s.is_chance_node():
            self.s.apply_action(self.rng.choice(self.s.chance_outcomes())[0])
        self.hands = [self._dealt(seat) for seat in range(SEATS)]
        self.trick: list[str] = []  # this trick's cards, in the order played
        self.played: list[str] = []  # the cards of the tricks done
        self.taken: list[list[str]] = [[] for _ in range(SEATS)]  # point cards taken
        self.broken = False
        self.moves: list[list[Any]] = []

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other hands dealt from what this seat cannot see (`GAME.deal_unseen`), then
        OpenSpiel's own game set from them: each seat dealt its hand and the cards it has
        played (the moves list every move of the hand), every move replayed (~100 C++
        calls, no model of the rules to keep in step). No pass is played here: nothing
        else is hidden."""
        world = GAME.deal_unseen(state, rng)
        moves = [list(m) for m in state["moves"]]
        dealt = [list(h) for h in world.hands]
        for seat, move, _ in moves:
            dealt[seat].append(move[5:])
        s = self.game.new_initial_state()
        s.apply_action(0)  # the pass direction: "No Pass"
        for i in range(13):  # OpenSpiel deals card i of the deal to seat i % 4
            for seat in range(SEATS):
                s.apply_action(CARD_ID[dealt[seat][i]])
        for _, move, _ in moves:
            s.apply_action(CARD_ID[move[5:]])
        self.s = s
        self.hands = [h if seat == world.seat else sorted(h, key=HAND_ORDER.get)
                      for seat, h in enumerate(world.hands)]  # fmt: skip
        self.trick, self.played = list(state["trick"]), list(state["played"])
        self.taken = [list(t) for t in state["taken"]]
        self.broken, self.moves = state["hearts_broken"] == "yes", moves

    def _dealt(self, seat: int) -> list[str]:
        """The seat's hand from OpenSpiel's view of it ("S JT3" a line per suit)."""
        lines = self.s.information_state_string(seat).split("Hand:")[1].split("\n")
        return [rank + line[0] for line in lines if line[:2] in ("S ", "H ", "D ", "C ")
                for rank in line[2:].strip().replace("none", "")]  # fmt: skip

    def current_player(self) -> int:
        return int(self.s.current_player())

    def _legal(self) -> dict[str, int]:
        return {"play " + self.s.action_to_string(a): a for a in self.s.legal_actions()}

    def state(self, seat: int) -> dict[str, Any]:
        legal = list(self._legal()) if seat == self.current_player() else []
        return {"seat": seat, "hand": list(self.hands[seat]), "trick": list(self.trick),
                "played": list(self.played), "taken": [list(t) for t in self.taken],
                "hearts_broken": "yes" if self.broken else "no", "moves": self.moves[-52:],
                "legal_actions": legal}  # fmt: skip

    def step(self, action: Any) -> None:
        legal = self._legal()
        if self.is_over() or action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {list(legal)}")
        seat, card = self.current_player(), action[5:]
        self.moves.append([seat, action, self.trick[0][1] if self.trick else "lead"])
        self.hands[seat].remove(card)
        self.trick.append(card)
        self.broken = self.broken or points(card) > 0
        self.s.apply_action(legal[action])
        if len(self.trick) == SEATS:
            lead = self.trick[0][1]
            best = max((c for c in self.trick if c[1] == lead), key=lambda c: RANKS.index(c[0]))
            winner = (seat + 1 + self.trick.index(best)) % SEATS  # seat played the 4th card
            self.taken[winner] += [c for c in self.trick if points(c)]
            self.played += self.trick
            self.trick = []

    def is_over(self) -> bool:
        return bool(self.s.is_terminal())

    def payoffs(self) -> list[float]:
        return [r / SCALE for r in self.s.returns()]
