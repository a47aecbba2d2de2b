"""Hearts (`examples/hearts`), the fourth development game, brought in from docs/your-game.md:
the simulator's rules (the 2 of clubs leads, follow suit, hearts broken, the trick's taker,
26 points a hand or the moon), the declaration's checks and both heads on the engine's own
states, the studio's bot playing only legal moves, and a hand of each head served."""

from __future__ import annotations

import inspect
import random
from pathlib import Path

import jsonschema_rs
import numpy as np
import pytest

from croupier.games.base import InvalidState
from croupier.games.candidates import is_candidate_game
from croupier.games.registry import load_adapter, load_simulator
from examples.hearts.adapter import GAME, hearts_rules
from examples.hearts.game import DECK, HeartsSimulator
from tests.helpers.hands import play_hand

ROOT = Path(__file__).resolve().parent.parent
FIXED, CANDIDATES = "examples.hearts.adapter:Hearts", "examples.hearts.adapter:HeartsCandidates"


def hands_of_play(n: int, seed: int = 5):
    """Each state of `n` hands, half rules and half random moves, with the table after it."""
    table, rng = HeartsSimulator(), random.Random(seed)
    for hand in range(n):
        table.reset(hand)
        while not table.is_over():
            state = table.state(table.current_player())
            yield table, state
            legal = state["legal_actions"]
            table.step(hearts_rules(state) if rng.random() < 0.5 else rng.choice(legal))
        yield table, None  # the hand is over


def test_a_deal_gives_thirteen_each_and_the_two_of_clubs_leads() -> None:
    table = HeartsSimulator()
    for seed in range(20):
        table.reset(seed)
        assert sorted(c for h in table.hands for c in h) == sorted(DECK)
        assert [len(h) for h in table.hands] == [13] * 4
        seat = table.current_player()
        assert "2C" in table.hands[seat]
        assert table.state(seat)["legal_actions"] == ["play 2C"]
    table.reset(7)
    first = [list(h) for h in table.hands]
    table.reset(7)
    assert table.hands == first  # a seeded deal replays


def test_every_move_follows_suit_and_hearts_wait_to_be_broken() -> None:
    """The rules written apart from the engine, held to every state of 40 hands."""
    for _, state in hands_of_play(40):
        if state is None:
            continue
        hand, trick = state["hand"], state["trick"]
        legal = [m.removeprefix("play ") for m in state["legal_actions"]]
        if trick:
            suit = [c for c in hand if c[1] == trick[0][1]]
            assert sorted(legal) == sorted(suit or hand), (trick, hand, legal)
            assert state["lead"] == trick[0][1]
        elif len(hand) < 13:
            assert state["lead"] == "none"
            only_hearts = all(c[1] == "H" for c in hand)
            if state["broken"] == "no" and not only_hearts:
                assert sorted(legal) == sorted(c for c in hand if c[1] != "H")
            else:
                assert sorted(legal) == sorted(hand)
        broken = any(c[1] == "H" for pile in state["played"] for c in pile)
        assert state["broken"] == ("yes" if broken else "no")


def test_a_heart_may_be_led_unbroken_only_from_a_hand_of_hearts() -> None:
    table = HeartsSimulator()
    table.reset(0)
    table.hands = [["2H", "9H"], ["3C", "4C"], ["5D", "6D"], ["7S", "8S"]]
    table.turn = table.leader = 0
    assert table.legal_actions() == ["play 2H", "play 9H"]  # only hearts held
    table.hands[0] = ["2H", "9H", "4D"]
    assert table.legal_actions() == ["play 4D"]
    table.broken = True
    assert table.legal_actions() == ["play 2H", "play 9H", "play 4D"]
    with pytest.raises(ValueError, match="illegal"):
        table.step("play 3C")  # not in the hand


def test_the_highest_card_of_the_led_suit_takes_the_trick_and_its_points() -> None:
    table = HeartsSimulator()
    table.reset(0)
    table.hands = [["AS", "2C"], ["5D", "3C"], ["KD", "4C"], ["QS", "5C"]]
    table.turn = table.leader = 1
    table.broken = True
    for move in ("play 5D", "play KD", "play QS", "play AS"):  # seat 3 void: the queen
        table.step(move)
    assert table.taken == [0, 0, 13, 0] and table.current_player() == 2  # KD: the lead's best
    for move in ("play 4C", "play 5C", "play 2C", "play 3C"):
        table.step(move)
    assert table.is_over() and table.taken == [0, 0, 13, 0]


def test_a_hand_scores_26_points_or_the_moon_and_pays_zero_sum() -> None:
    low, high = GAME.payoff_range
    totals = set()
    for table, state in hands_of_play(40, seed=9):
        if state is None:
            totals.add(sum(table.scores()))
            pays = table.payoffs()
            assert abs(sum(pays)) < 1e-9 and all(low <= p <= high for p in pays)
            assert sum(table.taken) == 26
    assert totals <= {26, 78} and 26 in totals
    table = HeartsSimulator()
    table.taken = [0, 26, 0, 0]  # seat 1 shot the moon
    assert table.scores() == [26, 0, 26, 26]
    assert table.payoffs() == pytest.approx([-1 / 3, 1.0, -1 / 3, -1 / 3])
    table.taken = [13, 13, 0, 0]
    assert table.payoffs() == pytest.approx([-(13 - 13 / 3) / 26] * 2 + [(26 / 3) / 26] * 2)


def test_every_engine_state_validates_and_both_heads_take_it() -> None:
    fixed, cands = load_adapter(FIXED), load_adapter(CANDIDATES)
    assert is_candidate_game(cands) and (fixed.num_actions, cands.num_players) == (52, 4)
    validator = jsonschema_rs.Draft202012Validator(fixed.state_schema())
    lead = [z.field for z in GAME.zones].index("lead")
    start = sum(z.size(GAME) for z in GAME.zones[:lead])
    decisions = 0
    for _, state in hands_of_play(6):
        if state is None:
            continue
        assert validator.is_valid(state), [e.message for e in validator.iter_errors(state)]
        legal = state["legal_actions"]
        obs, mask = fixed.encode(state)
        assert obs.shape == (fixed.obs_size,) and np.isfinite(obs).all()
        assert sorted(fixed.action_value(i, state) for i in np.flatnonzero(mask)) == sorted(legal)
        one_hot = obs[start : start + 5]
        assert one_hot[("none", "C", "D", "H", "S").index(state["lead"])] == 1 == one_hot.sum()
        _, rows = cands.encode(state)
        assert rows.shape == (len(legal), cands.candidate_size) and np.isfinite(rows).all()
        assert [cands.action_value(i, state) for i in range(len(legal))] == legal
        decisions += 1
    assert decisions == 6 * 52


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"legal_actions": ["play AH"]}, "not in the hand"),
        ({"hand": ["2C", "2C"]}, "more copies"),
        ({"lead": "X"}, "one of"),
        ({"points": [0, 0, 27, 0]}, "in"),
    ],
)
def test_a_state_the_game_cannot_have_is_refused(change: dict, why: str) -> None:
    table = HeartsSimulator()
    table.reset(3)
    state = table.state(table.current_player()) | change
    with pytest.raises(InvalidState, match=why):
        load_adapter(FIXED).encode(state)


def test_the_studios_bot_plays_legal_moves_as_its_docstring_says() -> None:
    for _, state in hands_of_play(30, seed=2):
        if state is not None:
            assert hearts_rules(state) in state["legal_actions"]
    base = {"seat": 0, "lead": "D", "broken": "no", "played": [[], [], [], []],
            "points": [0, 0, 0, 0], "moves": []}  # fmt: skip
    following = base | {"hand": ["3D", "9D", "KD", "QS"], "trick": ["TD", "4D"],
                        "legal_actions": ["play 3D", "play 9D", "play KD"]}  # fmt: skip
    assert hearts_rules(following) == "play 9D"  # the highest that still loses to TD
    above = following | {"trick": ["2D"]}
    assert hearts_rules(above) == "play 3D"  # nothing loses: the lowest
    void = base | {"hand": ["AH", "5H", "QS", "KC"], "trick": ["TD"],
                   "legal_actions": ["play AH", "play 5H", "play QS", "play KC"]}  # fmt: skip
    assert hearts_rules(void) == "play QS"
    no_queen = void | {"legal_actions": ["play AH", "play 5H", "play KC"]}
    assert hearts_rules(no_queen) == "play AH"


def test_hearts_is_declared_in_under_100_lines_with_a_short_bot() -> None:
    assert len((ROOT / "examples/hearts/adapter.py").read_text().splitlines()) < 100
    assert len(inspect.getsource(hearts_rules).splitlines()) <= 30


@pytest.mark.parametrize("game", [FIXED, CANDIDATES])
def test_a_hand_of_hearts_is_served(inprocess, game: str) -> None:
    """A learned seat and three rules seats through the HTTP API: every answer one of the
    state's legal moves, the hand ended with its payoffs, the learned seat's episode recorded."""
    table = load_simulator(game)
    seats = {"0": "learned", "1": "rules", "2": "rules", "3": "rules"}

    async def body(client, service):
        policies = []
        r = await client.post("/v1/games", json={"game": "hearts", "seats": seats})
        assert r.status_code == 201, r.text
        table.reset(11)
        await play_hand(
            client, table, r.json()["game_id"], on_decision=lambda _, a: policies.append(a)
        )
        return policies, service.outbox.stats()["recorded"]

    answers, recorded = inprocess(body, game=game)
    assert len(answers) == 52 and {a["policy"] for a in answers} == {"learned", "rules"}
    assert recorded > 0


@pytest.mark.integration  # in-process, ~5-10 s of CPU (schemathesis's generation)
def test_hearts_schema_admits_what_the_game_takes_and_refuses_what_it_refuses() -> None:
    """The declaration's schema held to its checks both ways, as the other development
    games' are in `test_cards.py`; what a schema cannot say, written apart from the toolkit:
    no card twice in the hand and what the seats played together, each move from the hand."""
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import admitted_states_taken, refused_states_refused

    def semantics(state: dict) -> bool:
        held = [*state["hand"], *(c for pile in state.get("played", []) for c in pile)]
        moves = [m.split(" ")[1:] for m in state["legal_actions"]]
        return len(held) == len(set(held)) and all(set(m) <= set(state["hand"]) for m in moves)

    adapter, examples = load_adapter(FIXED), 50
    seen = admitted_states_taken(adapter, semantics, examples)
    assert seen[True] > 0, seen
    refused, boundary = refused_states_refused(adapter, examples)
    assert refused >= 20 + boundary // 2, (refused, boundary)
