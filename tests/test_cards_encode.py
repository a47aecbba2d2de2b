"""The card-game toolkit's encode, held number for number (bit for bit) to the plain
reference (`tests/helpers/cards_reference.py`: a zone and a move at a time, no cache) on
hundreds of real states of every game declared through it, its caches cold, warm and
evicting; and every cache bounded."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import random
from typing import Any

import numpy as np
import pytest

from croupier.games.cards import (
    CardGame,
    Choice,
    Deck,
    Hand,
    History,
    Kind,
    Number,
    Numbers,
    Pile,
    Seat,
    SeatNumbers,
    SeatPiles,
    TopCard,
)
from croupier.games.cards import game as cards_game
from croupier.games.cards.game import MOVES_KEPT, SETS_KEPT
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import mixed_play_states
from tests.helpers import cards_reference as ref

SPIEL = pytest.mark.skipif(
    importlib.util.find_spec("pyspiel") is None, reason="crazy eights and hearts are OpenSpiel's"
)
# (scored candidates adapter, hands of play: a few hundred states each)
GAMES = [
    pytest.param("croupier.games.doudizhu_cards:DoudizhuCardsCandidates", 6, id="doudizhu"),
    pytest.param("croupier.games.uno_cards:UnoCardsCandidates", 8, id="uno"),
    pytest.param("examples.president.adapter:PresidentCandidates", 4, id="president"),
    pytest.param("examples.crazy_eights.adapter:CrazyEightsCandidates", 5, id="crazy-eights",
                 marks=SPIEL),
    pytest.param("examples.hearts_openspiel.adapter:HeartsCandidates", 4, id="hearts-openspiel",
                 marks=SPIEL),
    pytest.param("examples.limit_holdem.adapter:LimitHoldemCandidates", 120, id="limit-holdem"),
]  # fmt: skip


def play_states(name: str, hands: int, seed: int = 11) -> list[dict[str, Any]]:
    """States the game's simulator sends: the rules' move or a random one, half and half."""
    return mixed_play_states(load_simulator(name), load_adapter(name).rules(), hands, seed)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_against_reference(g: CardGame, states: list[dict[str, Any]]) -> None:
    for state in states:
        p = g.parse(state)
        obs, cands = g.features(p), g.candidates(p)
        want_obs, want_cands = ref.state_features(g, state), ref.candidates(g, state)
        assert same_bits(obs, want_obs), np.flatnonzero(obs != want_obs)
        assert same_bits(cands, want_cands), np.argwhere(cands != want_cands)[:5]
        # each a float16's value: the trainer keeps the candidates in half the bytes
        assert same_bits(cands, cands.astype(np.float16).astype(np.float32))
        assert set(np.flatnonzero(g.mask(p)).tolist()) == ref.mask_slots(g, state)


@pytest.mark.parametrize(("name", "hands"), GAMES)
def test_the_encode_is_the_references_bit_for_bit(name: str, hands: int) -> None:
    g = load_adapter(name).inner.game
    states = play_states(name, hands)
    assert len(states) >= 200
    assert any(len(s["legal_actions"]) > 2 for s in states)
    check_against_reference(g, states)  # caches filling
    check_against_reference(g, states[::-1])  # warm


# Every kind of zone, jokers beside suits, two copies of each card, a kind not from the hand,
# three seats read round the table, a zone left out (its default), the history's recency.
TOY = CardGame(
    name="toy",
    deck=Deck(ranks="9TJQKA", suits="HS", jokers=("RJ",), copies=2),
    players=3,
    zones=(
        Seat("seat"),
        Hand("hand", max_cards=8),
        Pile("trick", max_cards=3),
        TopCard("top", required=False, counted=False),
        SeatPiles("won", max_cards=20, counted=False),
        SeatNumbers("score", low=-10, high=10, integer=False),
        Number("round", low=0, high=4, integer=True),
        Numbers("bids", low=0, high=3, integer=True, length=2),
        Choice("phase", options=("bid", "play")),
        History("moves", last=2, max_moves=10, recency=True),
    ),
    kinds=(
        Kind("pass"),
        Kind("play", cards=(1, 1)),
        Kind("pair", cards=(2, 2)),
        Kind("bid.up", from_hand=False),
    ),  # fmt: skip
    answers="trick",
    max_legal=16,
)


def toy_state(**over: Any) -> dict[str, Any]:
    state = {"seat": 1, "hand": ["9H", "9H", "KS", "RJ"], "trick": ["QH", "AS"], "top": None,
             "won": [["9S"], [], ["TH", "TS"]], "score": [1.5, -2, 0], "round": 2,
             "bids": [1, 3], "phase": "play",
             "moves": [[2, "play QH"], [0, "play AS"], [1, "pass"]],
             "legal_actions": ["pass", "play 9H", "pair 9H 9H", "play RJ", "bid.up"]}  # fmt: skip
    return {**state, **over}


def test_the_toy_game_every_zone_is_the_references() -> None:
    states = [
        toy_state(),
        toy_state(trick=[], moves=[]),
        toy_state(top="RJ", trick=["RJ"], legal_actions=["pass", "bid.up", "pair 9H 9H"]),
        toy_state(trick=["KS", "QH", "AS"], legal_actions=["play KS", "pass"]),
        {k: v for k, v in toy_state().items() if k != "top"},
        toy_state(seat=2, moves=[[0, "play 9S"], [1, "pair TH TH"], [2, "bid.up"]]),
    ]
    # count / copies (the default), and one column per copy (`per_copy`)
    for g in (TOY, dataclasses.replace(TOY, per_copy=True)):
        check_against_reference(g, states)
        check_against_reference(g, states)


def test_the_caches_are_bounded_at_their_caps() -> None:
    """A server runs for days: the moves and card sets kept stay within their caps however
    many distinct ones arrive (president: any 1-4 cards is a well-formed play)."""
    from examples.president.adapter import GAME as PRESIDENT

    g = dataclasses.replace(PRESIDENT)  # its own, empty caches
    cards = list(g.deck.cards)
    plays = itertools.chain.from_iterable(itertools.combinations(cards, n) for n in (3, 4))
    for play in itertools.islice(plays, MOVES_KEPT + 2_000):
        g.move("play " + " ".join(play), "legal_actions")
    kept = len(g.known_moves)  # (a count: a failing assert would print every move)
    assert kept == MOVES_KEPT
    rng = random.Random(5)
    for _ in range(SETS_KEPT + 500):
        g.read_cards(rng.sample(cards, 13), 13, "hand")
    kept = len(g._sets)
    assert kept == SETS_KEPT


def test_the_encode_is_the_references_while_its_caches_evict(monkeypatch) -> None:
    """Caps of a few entries: moves and card sets leave and come back, the features stay."""
    monkeypatch.setattr(cards_game, "MOVES_KEPT", 6)
    monkeypatch.setattr(cards_game, "SETS_KEPT", 3)
    name = "croupier.games.doudizhu_cards:DoudizhuCardsCandidates"
    g = dataclasses.replace(load_adapter(name).inner.game)
    states = play_states(name, 2, seed=3)
    check_against_reference(g, states)
    kept = len(g.known_moves), len(g._sets)
    assert kept[0] <= 6 and kept[1] <= 3
