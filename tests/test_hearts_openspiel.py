"""Hearts as OpenSpiel plays it (`examples/hearts_openspiel`): the state the wrapper follows
from OpenSpiel's deal and plays (each hand, the trick, the point cards taken, hearts broken)
is OpenSpiel's own: the points it counts give OpenSpiel's returns, every hand; the suit led
is in each move of the history. Its declaration and both heads on its states:
tests/test_cards.py (the development games)."""

from __future__ import annotations

import importlib.util
import random

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyspiel") is None, reason="OpenSpiel's: pip install 'croupier[games]'"
)

DECK = sorted(r + s for r in "23456789TJQKA" for s in "CDHS")


def test_the_followed_hands_tricks_and_points_are_openspiels() -> None:
    from examples.hearts_openspiel.game import HeartsSimulator

    table, rng = HeartsSimulator(), random.Random(2)
    for hand in range(120):
        table.reset(hand)
        assert sorted(c for h in table.hands for c in h) == DECK
        assert all(len(h) == 13 for h in table.hands)
        while not table.is_over():
            seat = table.current_player()
            state = table.state(seat)
            # the seat to act has played one card to each trick done, none to this one yet
            assert len(state["hand"]) == 13 - len(state["played"]) // 4
            move = rng.choice(state["legal_actions"])
            table.step(move)
            led = table.moves[-1][2]
            assert led == "lead" or led in "CDHS"
        points = [sum(13 if c == "QS" else 1 for c in taken) for taken in table.taken]
        assert sum(points) == 26
        moon = 26 in points
        want = [26.0 * (p == 26) for p in points] if moon else [26.0 - p for p in points]
        assert [round(x * 26, 6) for x in table.payoffs()] == want
    assert len(table.played) == 52 and not table.trick


def test_the_same_seed_deals_the_same_hands() -> None:
    from examples.hearts_openspiel.game import HeartsSimulator

    a, b = HeartsSimulator(), HeartsSimulator()
    a.reset(7)
    b.reset(8)
    b.reset(7)
    assert a.hands == b.hands and a.current_player() == b.current_player()
