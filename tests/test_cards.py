"""The card-game toolkit (`games/cards.py`) and the development games declared through it
(`examples/limit_holdem`, `examples/crazy_eights`, `examples/president`): the features, the
fixed head and the candidates a declaration gives, the legal-move checks, the state's JSON
Schema held to the checks both ways (schemathesis's generators, as `test_state_schema.py`),
every state each game's engine produces, and one short round of each served."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import random
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema_rs
import numpy as np
import pytest

from croupier.games.base import InvalidState
from croupier.games.candidates import is_candidate_game
from croupier.games.cards import (
    CardCandidatesAdapter,
    CardGame,
    CardGameAdapter,
    Choice,
    Deck,
    Hand,
    History,
    Kind,
    Number,
    Pile,
    RoleSeat,
    Seat,
    SeatNumbers,
    SeatPiles,
    TopCard,
)
from croupier.games.registry import load_adapter, load_simulator
from tests.helpers.hands import play_hand

ROOT = Path(__file__).resolve().parent.parent
SPIEL = pytest.mark.skipif(
    importlib.util.find_spec("pyspiel") is None,
    reason="crazy eights and hearts are OpenSpiel's: pip install 'croupier[games]' (open-spiel)",
)
# The development games: (fixed head, scored candidates, hands of random play to check).
EXAMPLES = [
    pytest.param("examples.limit_holdem.adapter:LimitHoldem", 80, id="limit-holdem"),
    pytest.param("examples.president.adapter:President", 4, id="president"),
    pytest.param("examples.crazy_eights.adapter:CrazyEights", 6, id="crazy-eights", marks=SPIEL),
    pytest.param("examples.hearts_openspiel.adapter:Hearts", 3, id="hearts-openspiel", marks=SPIEL),
]

# A small game that uses every zone: two copies of each card and a joker (the schema's
# per-card `maxContains`), three seats (read round the table), a trick to answer; a card's
# and a rank's count as count / copies (`per_copy=True` writes them one column per copy:
# `test_per_copy_writes_a_column_per_copy`).
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
        Choice("phase", options=("bid", "play")),
        History("moves", last=2, max_moves=10),
    ),
    kinds=(
        Kind("pass"),
        Kind("play", cards=(1, 1)),
        Kind("pair", cards=(2, 2)),
        Kind("bid.up", from_hand=False),
    ),  # fmt: skip
    answers="trick",
    payoff_range=(-3.0, 3.0),
    max_legal=16,
)


class Toy(CardGameAdapter):
    game = TOY


class ToyCandidates(CardCandidatesAdapter):
    game = TOY


def toy_state(**over: Any) -> dict[str, Any]:
    state = {"seat": 1, "hand": ["9H", "9H", "KS", "RJ"], "trick": ["QH", "AS"], "top": None,
             "won": [["9S"], [], ["TH", "TS"]], "score": [1.5, -2, 0], "round": 2,
             "phase": "play", "moves": [[2, "play QH"], [0, "play AS"], [1, "pass"]],
             "legal_actions": ["pass", "play 9H", "pair 9H 9H", "play RJ", "bid.up"]}  # fmt: skip
    return {**state, **over}


def blocks(game: CardGame) -> dict[str, tuple[int, int]]:
    """Each zone's (start, size) in the observation."""
    out, o = {}, 0
    for z in game.zones:
        out[z.field] = (o, z.size(game))
        o += z.size(game)
    return out


# --- features ---------------------------------------------------------------------------------


def test_a_declaration_gives_sizes_and_each_zone_its_features() -> None:
    a = Toy()
    deck = TOY.deck
    assert (a.name, a.num_players, a.payoff_range) == ("toy", 3, (-3.0, 3.0))
    assert deck.cards[:3] == ("9H", "9S", "TH") and deck.cards[-1] == "RJ" and deck.size == 13
    # a card set: per card, per rank (6 + the joker), per suit, its size
    assert TOY.set_size == 13 + 7 + 2 + 1
    assert a.obs_size == sum(n for _, n in blocks(TOY).values())
    obs, _ = a.encode(toy_state())
    b = blocks(TOY)
    o, n = b["hand"]
    hand = obs[o : o + n]
    assert hand[0] == 1.0 and hand[deck.size - 1] == 0.5  # two of two 9H; one of two jokers
    assert hand[deck.size + 0] == pytest.approx(2 / 4)  # rank 9: 2 of its 4 copies
    assert hand[deck.size + 6] == 0.5  # the joker's rank
    assert hand[deck.size + 7] == pytest.approx(2 / 12)  # hearts: 2 of 12 (no joker)
    assert hand[-1] == pytest.approx(4 / 8)
    o, _ = b["score"]  # read from the acting seat (1) round the table: 1, 2, 0
    np.testing.assert_allclose(obs[o : o + 3], [(-2 + 10) / 20, 0.5, (1.5 + 10) / 20])
    o, _ = b["won"]
    assert obs[o : o + 13].sum() == 0 and obs[o + 13 + 2] == 0.5  # mine empty; seat 2's TH
    o, _ = b["round"]
    assert obs[o] == 0.5
    o, n = b["phase"]
    assert list(obs[o : o + n]) == [0.0, 1.0]
    o, _ = b["moves"]  # the last 2, newest first: mine (a pass), then seat 0's AS
    slot = TOY.move_size
    assert slot == 3 + 4 + 13
    assert obs[o + 0] == 1.0 and obs[o + 3 + 0] == 1.0  # me, pass
    assert obs[o + slot + 2] == 1.0 and obs[o + slot + 3 + 1] == 1.0  # 0 is 2 seats on: play
    assert obs[o + slot + 7 + deck.cards.index("AS")] == 0.5
    # the same table seen by seat 2: the scores rotate with it
    obs2, _ = a.encode(toy_state(seat=2))
    o, _ = b["score"]
    np.testing.assert_allclose(obs2[o : o + 3], [0.5, (1.5 + 10) / 20, (-2 + 10) / 20])


def test_per_copy_writes_a_column_per_copy() -> None:
    """`per_copy`: each card's and each rank's count one column per copy, holds > 0, > 1,
    ... (a pair, a trio is a column); the per-card columns the same in the played piles and
    the history. A one-copy deck's per-card columns are the same either way."""
    g = dataclasses.replace(TOY, per_copy=True)
    deck = g.deck
    assert g.card_width == 2 * 12 + 2 and g.set_size == 26 + (4 * 6 + 2) + 2 + 1
    assert g.move_size == 3 + 4 + 26
    obs = g.features(g.parse(toy_state()))
    b = blocks(g)
    o, n = b["hand"]
    hand = obs[o : o + n]
    assert list(hand[:4]) == [1.0, 1.0, 0.0, 0.0]  # two of two 9H, no 9S
    assert list(hand[24:26]) == [1.0, 0.0]  # one of two jokers
    assert list(hand[26:30]) == [1.0, 1.0, 0.0, 0.0]  # rank 9: 2 of its 4 copies
    assert list(hand[26 + 24 : 26 + 26]) == [1.0, 0.0]  # the joker's rank
    assert hand[52] == pytest.approx(2 / 12) and hand[-1] == pytest.approx(4 / 8)
    o, _ = b["won"]  # round the table from seat 1: its own, seat 2's (TH TS), seat 0's (9S)
    ts = 2 * deck.cards.index("TS")
    assert obs[o : o + 26].sum() == 0 and list(obs[o + 26 + ts : o + 26 + ts + 2]) == [1, 0]
    o, _ = b["moves"]  # the second newest: seat 0's AS, one of its two copies
    at = o + g.move_size + 7 + 2 * deck.cards.index("AS")
    assert list(obs[at : at + 2]) == [1.0, 0.0]
    one_copy = dataclasses.replace(
        g, deck=Deck(ranks="9TJQKA", suits="HS"), kinds=g.kinds[:2] + g.kinds[3:]
    )
    state = toy_state(hand=["9H", "KS"], won=[["9S"], [], ["TH"]], trick=["QH"],
                      legal_actions=["pass", "play 9H", "bid.up"])  # fmt: skip
    p = one_copy.parse(state)
    declared = dataclasses.replace(one_copy, per_copy=True)
    one_copy = dataclasses.replace(one_copy, per_copy=False)
    assert one_copy.set_size == 12 + 6 + 2 + 1  # count / copies
    assert declared.set_size == 12 + 2 * 6 + 2 + 1  # a rank is still two cards (two suits)
    np.testing.assert_array_equal(  # the per-card columns: the same either way
        declared.features(declared.parse(state))[: declared.card_width],
        one_copy.features(p)[: one_copy.card_width],
    )


def test_the_fixed_head_has_a_slot_per_kind_card_or_rank_and_inverts() -> None:
    a = Toy()
    # pass 1 | play: a slot per card (13) | pair: per rank (7) | bid.up 1
    assert a.num_actions == 1 + 13 + 7 + 1
    state = toy_state()
    _, mask = a.encode(state)
    legal = np.flatnonzero(mask)
    assert list(legal) == [0, 1, 1 + 12, 14, 21]
    for move in state["legal_actions"]:
        assert a.action_value(a.action_index(move, state), state) == move
    with pytest.raises(InvalidState):
        a.action_value(2, state)  # play 9S: not legal here


def test_the_fixed_head_tells_a_pair_from_a_single_of_one_rank() -> None:
    """President's plays take 1-4 cards: a slot per rank and count, so the head can lead all
    its 7s (a slot per rank alone would stand for the first listed, the single 7)."""
    a = load_adapter("examples.president.adapter:President")
    assert a.num_actions == 1 + 13 * 4
    state = {"seat": 0, "hand": ["7C", "7H", "9S"], "to_beat": [], "num_cards": [3, 3, 3, 3],
             "moves": [], "legal_actions": ["play 7C", "play 7C 7H", "play 9S"]}  # fmt: skip
    _, mask = a.encode(state)
    slots = [a.action_index(m, state) for m in state["legal_actions"]]
    assert len(set(slots)) == 3 and list(np.flatnonzero(mask)) == sorted(slots)
    assert slots[:2] == [1 + 4 * 4, 1 + 4 * 4 + 1]  # rank 7 is the 5th: 1 card, 2 cards
    assert [a.action_value(i, state) for i in slots] == state["legal_actions"]


def test_candidates_say_the_kind_the_cards_what_is_left_and_what_they_answer() -> None:
    a = ToyCandidates()
    state = toy_state(hand=["9H", "KS"], legal_actions=["pass", "play 9H", "play KS", "bid.up"])
    obs, cands = a.encode_candidates(state)
    assert obs.shape == (a.obs_size,) and cands.shape == (4, a.candidate_size)
    assert a.candidate_size == 4 + 2 * TOY.set_size + 1 + 8 + 2 + 2  # ..., suits, kept
    # the kinds, in the legal order: pass, play, play, bid.up
    np.testing.assert_array_equal(cands[:, :4], np.eye(4)[[0, 1, 1, 3]])
    card = 4  # the move's cards start here; then what it leaves in the hand
    left = card + TOY.set_size
    ks = TOY.deck.cards.index("KS")
    assert cands[2, card + ks] == 0.5 and cands[2, left + ks] == 0.0 and cands[2, left] == 0.5
    assert cands[0, left + ks] == 0.5  # a pass leaves the hand as it is
    assert cands[:, left + TOY.set_size - 1].tolist() == [2 / 8, 1 / 8, 1 / 8, 2 / 8]
    # The trick is QH then AS: 9H follows the lead (hearts), KS matches the top's suit and
    # beats the lead suit's best (QH) but not the trick's best (AS).
    at = 4 + 2 * TOY.set_size + 1
    answer = cands[:, at : at + 8]
    assert answer[1, 1] == 1 and answer[2, 1] == 0  # follows the lead suit
    assert answer[2, 2] == 1 and answer[1, 2] == 0  # the top card's suit
    assert answer[2, 4] == 0 and answer[2, 5] == 0 and answer[1, 5] == 0
    # K against A: one rank below (each candidate feature the nearest float16: ~5e-4 apart)
    assert answer[2, 6] == np.float16(-1 / 7)
    assert (answer[:, 0] == 0).all()  # not leading
    gone = a.encode_candidates(toy_state(hand=["KS"], legal_actions=["play KS", "pass"]))[1]
    assert gone[:, 4 + 2 * TOY.set_size].tolist() == [1.0, 0.0]  # it empties the hand
    lead = a.encode_candidates(toy_state(trick=[]))[1]
    assert (lead[:, at] == 1).all()  # leading: nothing to answer
    # Its suits, then what it keeps of them and of its ranks (n cards: n / (n + 2)).
    kept = a.encode_candidates(
        toy_state(hand=["9H", "TH", "KS", "KS"], legal_actions=["play 9H", "play KS", "pass"])
    )[1][:, -4:]
    want = np.array([[1, 0, 1 / 3, 0], [0, 1, 1 / 3, 1 / 3], [0, 0, 0, 0]], np.float16)
    np.testing.assert_array_equal(kept, want.astype(np.float32))
    assert a.candidate_value(3, state) == "bid.up"
    served = load_adapter("tests.test_cards:ToyCandidates")
    assert is_candidate_game(served) and served.action_index("play KS", state) == 2


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"legal_actions": ["play KH"]}, "not in the hand"),
        ({"legal_actions": ["pair KS KS"]}, "not in the hand"),  # one KS held
        ({"legal_actions": ["pass", "pass"]}, "twice"),
        ({"legal_actions": ["fold"]}, "unknown kind"),
        ({"legal_actions": ["play 9H 9H"]}, "takes 1..1"),
        ({"legal_actions": ["pass 9H"]}, "takes 0..0"),
        ({"legal_actions": ["play  9H"]}, "one space before each"),
        ({"legal_actions": ["pass "]}, "takes 0..0"),
        ({"legal_actions": []}, "1..16"),
        ({"hand": ["9H", "9H", "9H"]}, "more copies"),
        ({"trick": ["9H", "QH"]}, "zones hold more copies"),  # two 9H in the hand, a third
        ({"moves": [[0, "pair QH QH QH"]]}, "takes 2..2"),
        ({"moves": [[3, "pass"]]}, "0..2"),
        ({"seat": True}, "integer"),
        ({"seat": 1.5}, "integer"),
        ({"round": 5}, "integer in"),
        ({"score": [1, 2]}, "one entry per seat"),
        ({"score": [1, float("nan"), 0]}, "a number"),
        ({"phase": "deal"}, "one of"),
        ({"top": 7}, "a card or null"),
        ({"won": [[], [], ["XX"]]}, "unknown card"),
    ],
)
def test_the_checks_refuse_what_the_game_cannot_have(change: dict, why: str) -> None:
    with pytest.raises(InvalidState, match=why):
        Toy().encode(toy_state(**change))


def test_the_checks_take_what_jsontakes() -> None:
    a = Toy()
    a.encode(toy_state(seat=1.0, round=2.0, top="9S"))  # a float without a fraction is an integer
    state = toy_state()
    del state["top"]  # optional: null
    a.encode(state)
    for missing in ("hand", "legal_actions", "moves"):
        with pytest.raises(InvalidState):
            a.encode({k: v for k, v in toy_state().items() if k != missing})


def test_a_declaration_that_cannot_work_is_refused() -> None:
    deck = Deck("23", "HS")
    with pytest.raises(ValueError, match="Hand"):
        CardGame("x", deck, (Pile("p"),), (Kind("play", (1, 1)),))
    with pytest.raises(ValueError, match="answers"):
        CardGame("x", deck, (Hand("h"), Number("n")), (Kind("pass"),), answers="n")
    with pytest.raises(ValueError, match="distinct"):
        CardGame("x", deck, (Hand("h"), Pile("h")), (Kind("pass"),))
    with pytest.raises(ValueError, match="kind"):
        CardGame("x", deck, (Hand("h"),), (Kind("a b"),))
    with pytest.raises(ValueError, match="name of its own"):
        Deck("22", "H")


def test_zones_left_out_read_as_their_defaults_and_a_role_stays_required() -> None:
    """docs/card-toolkit.md, "Which zones are optional": a zone declared `required=False`
    may be left out and reads as its default (empty, `low`, the first option, no moves), the
    same as a state that sends that default; a required one left out is a 422; a role's seat
    has no default, so declaring it optional is refused. A move that takes a card from a pile
    (`from_hand=False`) need not be in the hand."""
    with pytest.raises(ValueError, match="no default"):
        RoleSeat("dealer", required=False)
    game = CardGame(
        "optional",
        Deck("A23", "HS"),
        (Seat("seat"), Hand("hand", max_cards=6), TopCard("top", required=False),
         Pile("melds", required=False), SeatNumbers("n", low=1, high=6, required=False),
         Choice("phase", options=("bid", "play"), required=False),
         History("moves", required=False)),
        (Kind("draw"), Kind("take", (1, 1), from_hand=False), Kind("play", (1, 1))),
        max_legal=8,
    )  # fmt: skip

    adapter = type("OptionalHead", (CardGameAdapter,), {"game": game})()
    bare = {"seat": 1, "hand": ["2H"], "legal_actions": ["draw", "take 3S", "play 2H"]}
    full = {**bare, "top": None, "melds": [], "n": [1, 1], "phase": "bid", "moves": []}
    (obs, mask), (obs_full, mask_full) = adapter.encode(bare), adapter.encode(full)
    np.testing.assert_array_equal(obs, obs_full)
    np.testing.assert_array_equal(mask, mask_full)
    assert adapter.action_value(int(np.flatnonzero(mask)[1]), bare) == "take 3S"  # not held
    with pytest.raises(InvalidState, match="no 'hand'"):
        adapter.encode({k: v for k, v in bare.items() if k != "hand"})
    with pytest.raises(InvalidState, match="not in the hand"):
        adapter.encode({**bare, "legal_actions": ["play 3S"]})


# --- the schema, held to the checks (schemathesis's generators) ---------------------------------


def semantics(game: CardGame, state: dict[str, Any]) -> bool:
    """What the schema cannot say, written apart from the toolkit: no card more often than the
    deck has it in the counted zones together or in one move; a hand's move from the hand."""
    copies = game.deck.copies
    seen: Counter[str] = Counter()
    for z in game.zones:
        if isinstance(z, Pile | SeatPiles) and z.counted and z.field in state:
            value = state[z.field]
            if isinstance(z, TopCard):
                value = [] if value is None else [value]
            elif isinstance(z, SeatPiles):
                value = [c for pile in value for c in pile]
            seen.update(value)
    hand = Counter(next((state[z.field] for z in game.zones if type(z) is Hand), []))
    kinds = {k.name: k for k in game.kinds}
    # each history entry is [seat, move] or [seat, move, what was in force]
    moves = [entry[1] for entry in state.get("moves", [])] + state["legal_actions"]
    # a move is "kind[:choice] cards..."
    in_hand = [Counter(m.split(" ")[1:]) <= hand for m in state["legal_actions"]
               if kinds[m.split(" ")[0].split(":")[0]].from_hand]  # fmt: skip
    return (
        all(n <= copies for n in seen.values())
        and all(n <= copies for m in moves for n in Counter(m.split(" ")[1:]).values())
        and all(in_hand)
    )


EXAMPLES_PER_GAME = 50  # per direction: 15-45 s a game at load ~30 on the 2-core box
SCHEMA_GAMES = [
    pytest.param("tests.test_cards:Toy", id="toy"),
    pytest.param("examples.limit_holdem.adapter:LimitHoldem", id="limit-holdem"),
    pytest.param("examples.president.adapter:President", id="president"),
    pytest.param("examples.crazy_eights.adapter:CrazyEights", id="crazy-eights"),
    pytest.param("examples.hearts_openspiel.adapter:Hearts", id="hearts-openspiel"),
]


@pytest.mark.integration  # in-process, ~5-10 s of CPU a game (generation)
@pytest.mark.parametrize("game", SCHEMA_GAMES)
def test_what_the_schema_admits_the_game_takes_unless_a_semantic_check_fails(game: str) -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import admitted_states_taken

    adapter = load_adapter(game)
    seen = admitted_states_taken(
        adapter, lambda state: semantics(adapter.game, state), EXAMPLES_PER_GAME
    )
    assert seen[True] > 0, seen  # the check can fail both ways: some states are taken


@pytest.mark.integration
@pytest.mark.parametrize("game", SCHEMA_GAMES)
def test_what_the_schema_refuses_the_game_refuses(game: str) -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import refused_states_refused

    refused, boundary = refused_states_refused(load_adapter(game), EXAMPLES_PER_GAME)
    assert refused >= 20 + boundary // 2, (refused, boundary)


# --- the development games ---------------------------------------------------------------------


def _candidates_of(game: str) -> str:
    return game + "Candidates"


@pytest.mark.parametrize(("game", "hands"), EXAMPLES)
def test_every_engine_state_validates_and_both_heads_take_it(game: str, hands: int) -> None:
    fixed, cands = load_adapter(game), load_adapter(_candidates_of(game))
    assert fixed.name == cands.name and is_candidate_game(cands)
    table = load_simulator(game)
    assert table.name == fixed.name and table.num_players == fixed.num_players
    validator = jsonschema_rs.Draft202012Validator(fixed.state_schema())
    rules, rng, decisions = fixed.rules(), random.Random(3), 0
    low, high = fixed.payoff_range
    for hand in range(hands):
        table.reset(hand)
        while not table.is_over():
            state = table.state(table.current_player())
            assert validator.is_valid(state), [e.message for e in validator.iter_errors(state)]
            legal = state["legal_actions"]
            _, mask = fixed.encode(state)
            assert {fixed.action_value(i, state) for i in np.flatnonzero(mask)} <= set(legal)
            assert all(mask[fixed.action_index(m, state)] == 1 for m in legal)
            _, rows = cands.encode(state)
            assert rows.shape == (len(legal), cands.candidate_size)
            assert np.isfinite(rows).all()
            move = rules(state)
            assert move in legal, (move, legal)  # the studio's bot answers a legal move
            table.step(move if rng.random() < 0.5 else rng.choice(legal))
            decisions += 1
        assert all(low <= p <= high for p in table.payoffs()), table.payoffs()
    assert decisions > 20


def test_each_development_game_is_declared_in_under_100_lines_with_a_short_bot() -> None:
    from examples.crazy_eights.adapter import eights_rules  # (no OpenSpiel needed here)
    from examples.hearts_openspiel.adapter import hearts_rules
    from examples.limit_holdem.adapter import holdem_rules
    from examples.president.adapter import president_rules

    for name in ("limit_holdem", "president", "crazy_eights", "hearts_openspiel"):
        lines = (ROOT / f"examples/{name}/adapter.py").read_text().splitlines()
        assert len(lines) < 100, (name, len(lines))
    for bot in (holdem_rules, president_rules, eights_rules, hearts_rules):
        assert len(inspect.getsource(bot).splitlines()) <= 30, bot.__name__


def test_the_state_docs_your_game_shows_is_taken() -> None:
    """The Hearts state of docs/your-game.md, step 1, as written."""
    import json

    from examples.hearts.adapter import hearts_rules

    doc = (ROOT / "docs/your-game.md").read_text().split("## 1. Declare your card game")[1]
    state = json.loads(doc.split("```json\n")[1].split("```")[0])
    fixed = load_adapter("examples.hearts.adapter:Hearts")
    _, mask = fixed.encode(state)
    legal = ["play 4C", "play 9C", "play KC"]
    assert [fixed.action_value(i, state) for i in np.flatnonzero(mask)] == legal
    assert hearts_rules(state) in legal  # the bot takes it too


def test_the_limit_holdem_chips_bound_holds_when_every_seat_raises() -> None:
    """`MAX_CHIPS`: a hand where both seats raise whenever they may reaches it exactly."""
    from examples.limit_holdem.adapter import MAX_CHIPS

    table = load_simulator("examples.limit_holdem.adapter:LimitHoldem")
    table.reset(1)
    most = 0
    while not table.is_over():
        state = table.state(table.current_player())
        most = max(most, *state["all_chips"])
        legal = state["legal_actions"]
        table.step("raise" if "raise" in legal else "call" if "call" in legal else "check")
    assert most == MAX_CHIPS


@pytest.mark.parametrize("head", ["", "Candidates"])
@pytest.mark.parametrize(("game", "hands"), EXAMPLES)
def test_a_round_of_each_game_is_served(inprocess, game: str, hands: int, head: str) -> None:
    """A learned seat and the rules through the HTTP API, each seat's answer one of its legal
    moves, every hand ended with its payoffs (the learned seat's episodes recorded)."""
    game = game + head
    table = load_simulator(game)
    seats = {str(s): "rules" for s in range(table.num_players)} | {"0": "learned"}

    async def body(client, service):
        answers = []
        for hand in range(2):
            r = await client.post("/v1/games", json={"game": table.name, "seats": seats})
            assert r.status_code == 201, r.text
            game_id = r.json()["game_id"]
            table.reset(hand)
            payoffs = await play_hand(
                client, table, game_id, on_decision=lambda _, a: answers.append(a["policy"])
            )
        bad = await client.post(f"/v1/games/{game_id}/end", json={"payoffs": payoffs})
        return answers, service.outbox.stats()["recorded"], bad.status_code

    answers, recorded, again = inprocess(body, game=game)
    assert "rules" in answers and again == 409
    if "learned" in answers:  # (hold'em: the rules may fold both hands before it acts)
        assert recorded > 0


def test_a_hand_sized_by_a_count_and_the_games_own_check() -> None:
    """`Hand.size_in`: the hand holds its seat's count (a 422 otherwise; the schema says it
    too); `CardGame.check`: the game's own check, after the toolkit's."""
    game = CardGame(
        name="sized",
        deck=Deck(ranks="9TJ", suits="HS"),
        zones=(
            Seat("seat"),
            Hand("hand", max_cards=6, size_in="held"),
            SeatNumbers("held", high=6),
        ),
        kinds=(Kind("pass"), Kind("play", (1, 1))),
    )
    state = {"seat": 1, "hand": ["9H", "TS"], "held": [3, 2], "legal_actions": ["pass", "play 9H"]}
    short = {**state, "held": [3, 1]}
    assert len(game.parse(state).legal) == 2
    with pytest.raises(InvalidState, match="does not hold 'held'\\[1\\] = 1 cards"):
        game.parse(short)
    valid = jsonschema_rs.Draft202012Validator(game.state_schema()).is_valid
    assert valid(state) and not valid(short)
    with pytest.raises(ValueError, match="size_in='seat' must name a SeatNumbers"):
        dataclasses.replace(game, zones=(Seat("seat"), Hand("hand", size_in="seat")))

    def no_pass(s: dict[str, Any], p: Any) -> None:
        if "pass" in s["legal_actions"] and len(p.legal) > 1:
            raise InvalidState("pass beside a play")

    checked = dataclasses.replace(game, check=no_pass)
    with pytest.raises(InvalidState, match="pass beside a play"):
        checked.parse(state)
    assert len(checked.parse({**state, "legal_actions": ["play 9H"]}).legal) == 1
