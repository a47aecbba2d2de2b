"""The card-game toolkit's declarations for an engine that keeps its own JSON, on a small game
of their own (doudizhu uses them all: `test_doudizhu_cards.py`): cards with different copies,
a suitless deck, card sets written as one string, a game's own spelling of its moves, the seat
a role names and the teams it makes, fixed partners, the move to beat read from the history;
and the state's schema held to the checks both ways, as `test_cards.py` does."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np
import pytest

from croupier.games.base import InvalidState
from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Deck,
    Hand,
    History,
    Kind,
    RoleSeat,
    Seat,
    SeatPiles,
    Spelling,
)
from croupier.games.registry import load_adapter

# Two of each rank, one joker; no suits: a card is its rank ("A", "J").
DECK = Deck(ranks="A23", jokers=("J",), copies=2, copies_of={"J": 1})


def read_move(move: str) -> str:
    """The engine's spelling: "-" passes, "A" plays one card, "AA" two of a rank."""
    if move == "-":
        return "pass"
    if len(move) == 1:
        return f"single {move}"
    if len(move) == 2 and move[0] == move[1]:
        return f"double {move[0]} {move[1]}"
    raise ValueError(move)


SHED = CardGame(
    name="shed",
    deck=DECK,
    players=3,
    zones=(
        Seat("me"),
        RoleSeat("dealer", alone=True),
        Hand("hand", max_cards=7, joined=True),
        SeatPiles("played", max_cards=7, joined=True),
        History("moves", last=2, max_moves=20),
    ),
    kinds=(Kind("pass"), Kind("single", (1, 1)), Kind("double", (2, 2))),
    answers="moves",
    payoff_range=(-2.0, 2.0),
    max_legal=8,
    spelling=Spelling(read_move, "^(?:-|[A23J]{1,2})$", "'-', a card, or two of a rank"),
)


class Shed(CardGameAdapter):
    game = SHED


class ShedCandidates(CardCandidatesAdapter):
    game = SHED


def shed_state(**over: Any) -> dict[str, Any]:
    state = {"me": 2, "dealer": 0, "hand": "A22J", "played": ["3", "A", ""],
             "moves": [[0, "3"], [1, "A"]], "legal_actions": ["-", "2", "22", "J"]}  # fmt: skip
    return {**state, **over}


def test_cards_of_different_copies_and_a_suitless_deck() -> None:
    assert DECK.cards == ("A", "2", "3", "J") and DECK.card_copies == (2, 2, 2, 1)
    assert Deck("A23", "HS", copies=2).card_copies == (2,) * 6
    # a suitless deck's card is its rank: per card and the size, no per-rank block
    assert SHED.set_size == 4 + 1
    features = SHED.set_features(np.array([[1, 2, 0, 1]]), 7)[0]
    np.testing.assert_allclose(features, [0.5, 1.0, 0.0, 1.0, 4 / 7])
    per_copy = dataclasses.replace(SHED, per_copy=True)  # a card's count a column a copy
    assert per_copy.set_size == 2 + 2 + 2 + 1 + 1
    features = per_copy.set_features(np.array([[1, 2, 0, 1]]), 7)[0]
    np.testing.assert_allclose(features, [1, 0, 1, 1, 0, 0, 1, 4 / 7])
    with pytest.raises(ValueError, match="copies_of"):
        Deck("A23", copies_of={"K": 1})
    with pytest.raises(InvalidState, match="more copies"):
        Shed().encode(shed_state(hand="AJJ"))  # two of a one-copy joker


def test_cards_written_as_one_string_and_moves_in_the_games_spelling() -> None:
    a = Shed()
    obs, mask = a.encode(shed_state())
    assert obs.shape == (a.obs_size,) and np.isfinite(obs).all()
    state = shed_state()
    for move in state["legal_actions"]:  # each reads into a kind and cards, and back
        assert a.action_value(a.action_index(move, state), state) == move
    m = SHED.move("22", "legal_actions")
    assert SHED.kinds[m.kind].name == "double" and m.counts.tolist() == [0, 2, 0, 0]
    for bad, why in (("23", "not a move of shed"), ("-2", "not a move"), (7, "a string")):
        with pytest.raises(InvalidState, match=why):
            a.encode(shed_state(legal_actions=[bad]))
    with pytest.raises(InvalidState, match="not in the hand"):
        a.encode(shed_state(legal_actions=["33"]))
    with pytest.raises(InvalidState, match="zones hold more copies"):
        a.encode(shed_state(played=["3", "AA", ""]))  # with the hand's A: three of two
    with pytest.raises(InvalidState, match="a string of at most 7"):
        a.encode(shed_state(hand=["A"]))
    with pytest.raises(InvalidState, match="unknown card 'K'"):
        a.encode(shed_state(hand="AK"))
    with pytest.raises(ValueError, match="one-character"):
        CardGame("x", Deck(["10", "J"]), (Hand("h", joined=True),), (Kind("p", (1, 1)),))


def test_the_role_seat_is_read_from_the_acting_one_and_makes_the_teams() -> None:
    a = Shed()
    obs, _ = a.encode(shed_state())  # seat 2; the dealer, seat 0, is the next one round
    assert obs[:3].tolist() == [0.0, 1.0, 0.0]
    assert a.teams(shed_state()) == [["0"], ["1", "2"]]
    assert a.teams(shed_state(dealer=1)) == [["1"], ["0", "2"]]
    with pytest.raises(InvalidState):
        a.teams(shed_state(dealer=3))
    partners = CardGame("bridge-ish", Deck("A2", "HS"), (Hand("h"),), (Kind("p", (1, 1)),),
                        players=4, partners=((0, 2), (1, 3)))  # fmt: skip
    assert partners.teams({}) == [[0, 2], [1, 3]]
    with pytest.raises(ValueError, match="teams"):
        CardGame("x", Deck("A2", "HS"), (Hand("h"),), (Kind("p", (1, 1)),), players=4,
                 partners=((0, 2), (1,)))  # fmt: skip


def test_the_move_to_beat_is_read_from_the_history() -> None:
    """The newest move with cards among the last `players - 1`: after a play and a pass the
    play is to beat; after two passes the seat leads."""
    a = ShedCandidates()
    _, rows = a.encode_candidates(shed_state(moves=[[0, "2"], [1, "-"]]))
    at = len(a.game.kinds) + 2 * a.game.set_size + 1  # kind | cards | left, empties | answer
    answer = rows[:, at : at + 8]
    assert (answer[:, 0] == 0).all()  # not leading
    # "-", "2", "22", "J" against a single 2: only J's best rank beats it; 2 and J match its size
    assert answer[:, 4].tolist() == [0, 0, 0, 1]
    assert answer[:, 7].tolist() == [0, 1, 0, 1]
    _, rows = a.encode_candidates(shed_state(moves=[[0, "2"], [1, "-"], [2, "-"]]))
    assert (rows[:, at] == 1).all()  # both others passed: the seat leads
    with pytest.raises(ValueError, match="answers"):
        CardGame("x", DECK, (Hand("h"), Seat("s")), (Kind("p", (1, 1)),), answers="s")


# --- the schema, held to the checks (schemathesis's generators) ---------------------------------


def semantics(state: dict[str, Any]) -> bool:
    """What the schema cannot say, written apart from the toolkit: moves the spelling reads,
    each within the deck (no "JJ" of the one joker, in the history too), legal moves made of
    cards in the hand, the hand and the played cards within the deck."""
    moves = [*state["legal_actions"], *(m for _, m in state["moves"])]
    if not all(m == "-" or len(m) == 1 or m[0] == m[1] for m in moves):
        return False
    copies = dict(zip(DECK.cards, DECK.card_copies, strict=True))
    if any(n > copies[c] for m in moves if m != "-" for c, n in Counter(m).items()):
        return False
    hand = Counter(state["hand"])
    held = hand + Counter("".join(state["played"]))
    return all(held[c] <= n for c, n in zip(DECK.cards, DECK.card_copies, strict=True)) and all(
        Counter(m) <= hand for m in state["legal_actions"] if m != "-"
    )


@pytest.mark.integration  # in-process, ~5-10 s of CPU (generation)
def test_what_the_schema_admits_the_game_takes_unless_a_semantic_check_fails() -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import admitted_states_taken

    seen = admitted_states_taken(load_adapter("tests.test_cards_spelling:Shed"), semantics, 60)
    assert seen[True] > 0 and seen[False] > 0, seen  # both ways


@pytest.mark.integration
def test_what_the_schema_refuses_the_game_refuses() -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import refused_states_refused

    refused, boundary = refused_states_refused(load_adapter("tests.test_cards_spelling:Shed"), 60)
    assert refused >= 20 + boundary // 2, (refused, boundary)
