"""RLCard's doudizhu from any position, in plain Python: what `DoudizhuTable.resample` plays
on (`engine/rlcard_games.py`), the same rules and the same state JSON as RLCard's game
(`tests/test_world_models.py` holds them together move by move).

Why not RLCard's own game: its objects (cards, players, a judger keeping every seat's
playable moves) cost ~97 us of CPU a move, ~6.5 ms a hand; a search plays out hundreds of
hands a decision: here 16 us a move, a world resampled and played out in ~0.6 ms
(`croupier bench worlds`). A hand is three strings and the moves come from RLCard's own
tables: a lead from its `playable_cards_from_hand` (what its judger keeps for a seat is that
of the hand it was dealt, less the moves it can no longer make: the same set, tested), an
answer from its move table (`TYPE_CARD`), as its `get_gt_cards` reads it, in its order.

RLCard's doudizhu as it plays it: the landlord is seat 0 with the three extra cards and leads;
each seat in turn beats the newest play or passes; whoever made the newest play, the others
having passed, leads anew; the first seat out of cards wins for its side: the landlord 1,
the peasants 0 each, or the other way round.
"""

from __future__ import annotations

from typing import Any

from rlcard.games.doudizhu.judger import DoudizhuJudger
from rlcard.games.doudizhu.utils import CARD_TYPE, TYPE_CARD

ORDER = "3456789TJQKA2BR"
RANK = {c: i for i, c in enumerate(ORDER)}
# A lead's moves by hand: the same hands recur across a decision's rollouts; 20-card hands
# with bombs took up to ~1 ms each in RLCard's function. Bounded: cleared when full.
LEADS_KEPT = 1 << 14
_leads: dict[str, list[str]] = {}
# A set of cards as one integer, 4 bits a rank (at most 4 of one): a hand holds a move when
# (hand + 8 in every field) - move keeps every field's 8 (no field borrows from the next:
# each stays >= 8 - 4). One subtraction, not a loop over the move's cards: the answers were
# ~70% of a played-out hand's CPU checked card by card.
_GUARD = sum(8 << 4 * r for r in range(len(ORDER)))


def packed(cards: str) -> int:
    return sum(1 << 4 * RANK[c] for c in cards)


# RLCard's move table per kind, read once per kind: [(weight, the cards every move of that
# weight holds, [(move, its cards)])], packed. A hand without the common cards skips the
# weight whole: a trio with a kicker is ~14 moves a weight, a chain of trios with kickers
# up to ~1,000.
_answers: dict[str, list[tuple[int, int, list[tuple[str, int]]]]] = {}


def _kind_table(kind: str) -> list[tuple[int, int, list[tuple[str, int]]]]:
    table = _answers.get(kind)
    if table is None:
        table = []
        for w, moves in TYPE_CARD[kind].items():
            common = set(moves[0]).intersection(*moves[1:])
            core = "".join(c * min(m.count(c) for m in moves) for c in common)
            table.append((int(w), packed(core), [(m, packed(m)) for m in moves]))
        _answers[kind] = table
    return table


def leads(hand: str) -> list[str]:
    """Every move `hand` can lead (RLCard's set; its order is the set's, not kept)."""
    moves = _leads.get(hand)
    if moves is None:
        if len(_leads) >= LEADS_KEPT:
            _leads.clear()
        moves = _leads[hand] = list(DoudizhuJudger.playable_cards_from_hand(hand))
    return moves


def answers(hand: str, beat: str) -> list[str]:
    """'pass', then every move of `hand` that beats `beat`, in RLCard's `get_gt_cards` order:
    each kind `beat` is (a rocket: none), then a rocket, then a bomb, a higher weight each."""
    out = ["pass"]
    kinds = {}
    for kind, weight in CARD_TYPE[0][beat]:
        kinds.setdefault(kind, int(weight))
    if "rocket" in kinds:
        return out
    kinds["rocket"] = -1
    kinds.setdefault("bomb", -1)
    held, seen = packed(hand) + _GUARD, set(out)
    for kind, weight in kinds.items():
        for w, core, moves in _kind_table(kind):
            if w <= weight or (held - core) & _GUARD != _GUARD:
                continue
            for move, need in moves:
                if (held - need) & _GUARD == _GUARD and move not in seen:
                    seen.add(move)
                    out.append(move)
    return out


def _merge(a: str, b: str) -> str:
    return "".join(sorted(a + b, key=RANK.__getitem__))


class DoudizhuPosition:
    """A hand of RLCard's doudizhu from a position: `hands` (each seat's cards, low to high),
    `trace` ([seat, move] since the deal), `played` (each seat's played cards, low to high),
    `seen` (RLCard's `seen_cards`), `landlord`, `turn`."""

    __slots__ = ("hands", "trace", "played", "seen", "landlord", "turn", "winner", "_legal")

    def __init__(
        self,
        hands: list[str],
        trace: list[list[Any]],
        played: list[str],
        seen: str,
        landlord: int,
        turn: int,
    ):
        self.hands, self.trace, self.played = hands, trace, played
        self.seen, self.landlord, self.turn = seen, landlord, turn
        self.winner: int | None = None
        self._legal: list[str] | None = None  # this turn's, once asked (state, then step)

    def current_player(self) -> int:
        return self.turn

    def is_over(self) -> bool:
        return self.winner is not None

    def payoffs(self) -> list[float]:
        won = self.winner == self.landlord
        return [float(won == (s == self.landlord)) for s in range(3)]

    def legal_actions(self) -> list[str]:
        if self._legal is None:
            self._legal = self._moves()
        return self._legal

    def _moves(self) -> list[str]:
        if self.winner is not None:
            return []
        for seat, move in reversed(self.trace):
            if move != "pass":
                if seat != self.turn:
                    return answers(self.hands[self.turn], move)
                break
        return leads(self.hands[self.turn])

    def state(self, seat: int) -> dict[str, Any]:
        """The JSON `DoudizhuTable.state` sends (RLCard's raw state, moves as legal_actions)."""
        hands = self.hands
        return {
            "seen_cards": self.seen,
            "landlord": self.landlord,
            "trace": [list(t) for t in self.trace],
            "played_cards": list(self.played),
            "self": seat,
            "current_hand": hands[seat],
            "others_hand": _merge(hands[(seat + 1) % 3], hands[(seat - 1) % 3]),
            "num_cards_left": [len(h) for h in hands],
            "legal_actions": list(self.legal_actions()) if seat == self.turn else [],
        }

    def step(self, action: str) -> None:
        legal = self.legal_actions()
        if action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {legal}")
        me = self.turn
        self._legal = None
        self.trace.append([me, action])
        if action != "pass":
            hand = self.hands[me]
            for c in action:
                hand = hand.replace(c, "", 1)
                if me == 0 and c in self.seen:  # (RLCard's: seat 0's play, every copy)
                    self.seen = self.seen.replace(c, "")
            self.hands[me] = hand
            self.played[me] = _merge(self.played[me], action)
            if not hand:
                self.winner = me
        self.turn = (me + 1) % 3
