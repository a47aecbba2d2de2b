"""UNO's reference players (`experiments/uno_reference.py`): the rollout model follows RLCard's
rules move by move, and the players play croupier's UNO table against the rules."""

from __future__ import annotations

import random
from collections import Counter

from croupier.engine.rlcard_games import RLCardTable
from experiments.uno_reference import (
    LeanUno,
    _plain,
    from_state,
    opponent_lacks,
    play_vs_rules,
    search_move,
)


def _model_of(table: RLCardTable) -> LeanUno:
    """The table's whole position (both hands, the deck in order) as the rollout model."""
    game = table.env.game
    r = game.round
    return LeanUno(
        [[_plain(c.str) for c in p.hand] for p in game.players],
        [_plain(c.str) for c in game.dealer.deck],
        [_plain(c.str) for c in r.played_cards],
        r.target.color,
        r.target.trait,
        r.current_player,
        random.Random(0),
    )


def _position(game: LeanUno) -> tuple:
    return (
        Counter(game.hands[0]),
        Counter(game.hands[1]),
        Counter(game.deck + game.pile),
        game.trait,
        game.turn if game.winner is None else None,
        game.winner,
    )


def test_lean_model_follows_rlcard_move_by_move():
    table, rng = RLCardTable("uno"), random.Random(5)
    moves = drawn_played = reshuffled = 0
    for hand in range(60):
        table.reset(seed=hand)
        while not table.is_over():
            model = _model_of(table)
            state = table.state(table.current_player())
            assert sorted(model.legal()) == sorted(set(state["legal_actions"]))
            action = rng.choice(state["legal_actions"])
            drawn = model.deck[-1] if model.deck else None
            # A deck this short may be reshuffled, by each game's own random order.
            short = len(model.deck) < 4
            model.step(action)
            table.step(action)
            after = _model_of(table)
            if table.is_over():
                after.winner = table.env.game.round.winner[0]
            if short:
                reshuffled += 1
                assert [len(h) for h in model.hands] == [len(h) for h in after.hands]
                assert _position(model)[3:] == _position(after)[3:], (hand, action)
                continue
            assert _position(model) == _position(after), (hand, action)
            if not (action == "draw" and drawn and drawn[2:] in ("wild", "wild_draw_4")):
                assert model.color == after.color  # a drawn wild's colour is random
            drawn_played += action == "draw" and len(model.pile) > len(state["played_cards"])
            moves += 1
    # drawn cards played at once, and reshuffles, were covered
    assert moves > 1000 and drawn_played > 20 and reshuffled > 0


def test_a_deal_consistent_with_the_state():
    table = RLCardTable("uno")
    table.reset(seed=3)
    for _ in range(30):
        table.step(table.state(table.current_player())["legal_actions"][0])
    me = table.current_player()
    state = table.state(me)
    game = from_state(state, random.Random(1))
    assert Counter(game.hands[me]) == Counter(_plain(c) for c in state["hand"])
    assert len(game.hands[1 - me]) == state["num_cards"][1 - me]
    assert len(game.deck) + len(game.pile) + sum(map(len, game.hands)) == 108
    assert sorted(game.legal()) == sorted(set(state["legal_actions"]))
    assert search_move(state, rollouts=3, rng=random.Random(2)) in state["legal_actions"]


def test_opponent_lacks_the_colours_it_drew_on_until_it_plays_one():
    state = {"current_player": 0, "moves": [[1, "g-3", "g"], [1, "draw", "b"], [0, "b-1", "b"],
                                             [1, "draw", "r"], [1, "y-wild", "r"]]}  # fmt: skip
    assert opponent_lacks(state) == {"r", "b"}
    state["moves"].append([1, "y-2", "y"])
    assert opponent_lacks(state) == set()


def test_the_heuristic_beats_random_play_on_the_same_deals():
    # Expected gap ~0.16 per game (docs/strength.md, 20,000 games each); the difference's
    # standard error at 500 games is ~0.06, and the games are fixed by the seed.
    base = play_vs_rules("random", 500, seed=4)
    result = play_vs_rules("heuristic", 500, seed=4)
    assert result["games"] == 500 and 0 < result["ci95"] < 0.1
    assert result["mean"] > base["mean"]


def test_search_plays_whole_games_and_is_reproducible():
    first = play_vs_rules("search", 20, seed=6, rollouts=3)
    again = play_vs_rules("search", 20, seed=6, rollouts=3)
    assert first["games"] == 20 and -1 <= first["mean"] <= 1
    assert (first["mean"], first["rollouts"]) == (again["mean"], 3)
