"""The RLCard table wrapper the reference engine drives, without a server."""

from __future__ import annotations

import json
import random

import pytest

from croupier.engine.rlcard_games import RLCardTable


def play(table: RLCardTable, rng: random.Random, max_steps: int = 5000) -> list[dict]:
    states = []
    for _ in range(max_steps):
        if table.is_over():
            return states
        state = table.state_json(table.current_player())
        json.dumps(state)  # plain JSON types only
        assert state["legal_actions"] == table.legal_actions()
        states.append(state)
        table.step(rng.choice(state["legal_actions"]))
    raise AssertionError("hand did not finish")


@pytest.mark.parametrize("game", ["leduc-holdem", "uno"])
def test_hands_play_to_completion(game):
    table = RLCardTable(game)
    rng = random.Random(0)
    for hand in range(20 if game == "uno" else 200):
        table.reset(seed=hand)
        assert play(table, rng)
        payoffs = table.payoffs()
        assert len(payoffs) == 2 and all(type(p) is float for p in payoffs)
        assert sum(payoffs) == pytest.approx(0.0)


def test_same_seed_same_deal():
    a, b = RLCardTable("leduc-holdem"), RLCardTable("leduc-holdem")
    a.reset(seed=42)
    b.reset(seed=42)
    assert a.state_json(a.current_player()) == b.state_json(b.current_player())


def test_illegal_action_rejected():
    table = RLCardTable("leduc-holdem")
    table.reset(seed=1)
    state = table.state_json(table.current_player())
    illegal = next(a for a in ["call", "raise", "fold", "check"] if a not in state["legal_actions"])
    with pytest.raises(ValueError):
        table.step(illegal)


def test_unknown_game():
    with pytest.raises(ValueError):
        RLCardTable("chess")
