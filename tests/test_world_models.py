"""The models a resampled table plays on where a library's state cannot be set cheaply from a
position, against the library itself, move by move: set from the library's whole game at a
random point of a random hand, both play the same random moves to the end with the same
chance; every state (so every legal move) and the payoffs agree. UNO and doudizhu against
RLCard (`engine/uno_position.py`, `engine/doudizhu_position.py`), crazy eights against
OpenSpiel (`examples/crazy_eights/position.py`)."""

from __future__ import annotations

import importlib.util
import random
from typing import Any

import pytest

from croupier.engine.doudizhu_position import DoudizhuPosition
from croupier.engine.rlcard_games import DoudizhuTable, UnoTable
from croupier.engine.uno_position import UnoPosition, Wild


class SameChance:
    """RLCard's numpy generator's two calls UNO makes (a drawn wild's colour, a reshuffle),
    answered by a `random.Random` seeded as the model's: the same draws in the same order."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def choice(self, options: Any) -> Any:
        return self.rng.choice(list(options))

    def shuffle(self, x: list[Any]) -> None:
        self.rng.shuffle(x)


def _uno_position(table: UnoTable, seed: int) -> UnoPosition:
    """The model set from RLCard's whole game: every card where RLCard holds it, a wild as
    the one object it is there (played and the target at once)."""
    game, objects = table.env.game, {}

    def model(c: Any) -> Any:
        if c.type != "wild":
            return c.str
        if id(c) not in objects:
            objects[id(c)] = Wild(c.str[0], c.color, c.trait)
        return objects[id(c)]

    r = game.round
    return UnoPosition(
        [[model(c) for c in p.hand] for p in game.players],
        [model(c) for c in game.dealer.deck],
        [model(c) for c in r.played_cards],
        model(r.target),
        r.target.color,
        r.current_player,
        [list(m) for m in table._moves],
        random.Random(seed),
    )


def test_uno_s_position_plays_rlcard_s_rules_move_by_move() -> None:
    table, rng, moves = UnoTable(), random.Random(1), 0
    for hand in range(60):
        table.reset(hand)
        for _ in range(rng.randrange(0, 30)):  # a random point of the hand
            if table.is_over():
                break
            table.step(rng.choice(table.legal_actions()))
        if table.is_over():
            continue
        game = table.env.game
        game.np_random = game.dealer.np_random = game.round.np_random = SameChance(hand)
        position = _uno_position(table, hand)
        for _ in range(3_000):
            assert position.is_over() == table.is_over()
            if table.is_over():
                break
            seat = table.current_player()
            assert position.current_player() == seat
            assert position.state(seat) == table.state(seat)
            move = rng.choice(table.legal_actions())
            table.step(move)
            position.step(move)
            moves += 1
        assert table.is_over() and position.payoffs() == table.payoffs()
    assert moves > 1_000


def test_doudizhu_s_position_plays_rlcard_s_rules_move_by_move() -> None:
    from rlcard.games.doudizhu.utils import cards2str

    table, rng, moves, leads = DoudizhuTable(), random.Random(2), 0, 0
    for hand in range(25):
        table.reset(hand)
        for _ in range(rng.randrange(0, 40)):
            if table.is_over():
                break
            table.step(rng.choice(table.legal_actions()))
        if table.is_over():
            continue
        game, r = table.env.game, table.env.game.round
        position = DoudizhuPosition(
            [cards2str(p.current_hand) for p in game.players],
            [list(t) for t in r.trace],
            list(r.public["played_cards"]),
            r.seen_cards,
            r.landlord_id,
            r.current_player,
        )
        for _ in range(500):
            assert position.is_over() == table.is_over()
            if table.is_over():
                break
            seat = table.current_player()
            want, got = table.state(seat), position.state(seat)
            if "pass" not in want["legal_actions"]:  # a lead: RLCard's set, in a set's order
                want["legal_actions"].sort()
                got["legal_actions"].sort()
                leads += 1
            assert got == want
            move = rng.choice(want["legal_actions"])
            table.step(move)
            position.step(move)
            moves += 1
        assert table.is_over() and position.payoffs() == table.payoffs()
        assert table.roles() is not None
    assert moves > 400 and leads > 50


@pytest.mark.skipif(
    importlib.util.find_spec("pyspiel") is None, reason="OpenSpiel's: pip install 'croupier[games]'"
)
def test_crazy_eights_position_plays_openspiel_s_rules_move_by_move() -> None:
    from examples.crazy_eights.game import CrazyEightsSimulator
    from examples.crazy_eights.position import NUMBER, EightsPosition

    table, rng, moves, passes = CrazyEightsSimulator(), random.Random(3), 0, 0
    for hand in range(80):
        table.reset(hand)
        first_up = table.top
        for _ in range(rng.randrange(0, 120)):  # some hands reach the empty stock
            if table.is_over():
                break
            table.step(rng.choice(table.state(table.current_player())["legal_actions"]))
        if table.is_over():
            continue
        # Everything the simulator followed since the deal: the stock is the rest.
        played = [m[1][5:] for m in table.moves if m[1].startswith("play ")]
        out = {c for h in table.hands for c in h} | set(played) | {first_up}
        stock = [c for c in NUMBER if c not in out]
        seat, legal = table.current_player(), table.state(table.current_player())
        draws = 0
        for who, move in reversed(table.moves):
            if who != seat or move != "draw":
                break
            draws += 1
        run = 0
        for _, move in reversed(table.moves):
            if move != "pass":
                break
            run += 1
        position = EightsPosition(
            [list(h) for h in table.hands], stock, table.top, legal["suit"], seat,
            legal["phase"] == "nominate", draws if stock else 5,
            run if not stock else 0, [list(m) for m in table.moves], list(table.pile),
        )  # fmt: skip
        assert table.pile == [first_up, *played][:-1]  # the pile: all played but the top card
        s = table.s
        for _ in range(3_000):
            assert position.is_over() == s.is_terminal()
            if s.is_terminal():
                break
            legal = list(table._legal())  # OpenSpiel's legal moves, by name
            assert position.current_player() == s.current_player()
            assert position.legal_actions() == legal
            move, me = rng.choice(legal), s.current_player()
            passes += move == "pass"
            position.step(move)
            s.apply_action(table._legal()[move])
            if move == "draw":  # OpenSpiel deals the card the model drew
                s.apply_action(NUMBER[position.hands[me][-1]])
            moves += 1
        assert s.is_terminal() and position.returns() == s.returns()
    assert moves > 2_000 and passes > 20
