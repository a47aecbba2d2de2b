"""Each game's published state schema (`GameAdapter.state_schema`) and its adapter agree.

For every built-in game (as served) and the Kuhn example, with states generated from the schema
by schemathesis's own generators (what its `--checks all` run sends: the coverage phase's
boundary values, each bound and one past it, and the fuzzing phase's random states):
- a state the schema admits, the adapter takes, except where a check JSON Schema cannot state
  fails (doudizhu: `SEMANTIC` below, the checks its module docstring lists): then, and only
  then, the adapter refuses it;
- a state the schema refuses, the adapter refuses too (`InvalidState`: a 422), so a client
  validating against the document never rejects a state the server takes: generated states,
  and real states with one field replaced by a value the schema refuses there, or left out
  (a generated state is mostly refused for other reasons in doudizhu; a real one is not);
- every state the game's own engine produces (random play) validates, and the adapter takes it.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import jsonschema_rs
import pytest

from croupier.games.base import GameAdapter
from croupier.games.registry import load_adapter, load_simulator

hypothesis = pytest.importorskip("hypothesis")
schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
from tests.helpers.state_schema import (  # noqa: E402
    GenerationMode,
    admitted_states_taken,
    boundary_states,
    refused_states_refused,
    takes,
)

GAMES = {
    "leduc-holdem": {},
    "uno": {},
    "doudizhu": {},
    "vector": {"obs_size": 5, "num_actions": 4},
    "examples.kuhn.adapter:KuhnAdapter": {},
}
EXAMPLES = 150  # per game and direction: ~1-2 s of CPU a game
# doudizhu's lookahead patterns and hand-size branches make its states ~10x dearer to generate:
# hypothesis filters its card strings by the pattern (~25 tries a state kept), and 60 admitted
# states took ~25 s of CPU beside the ~19 s of its boundary states, which stay whole (each
# bound and one past it: the states most likely to find a disagreement)
SLOW = {"doudizhu": 30}


def _adapter(game: str) -> GameAdapter:
    return load_adapter(game, **GAMES[game])


def _doudizhu_semantics(state: dict[str, Any]) -> bool:
    """What doudizhu's schema cannot say: moves are the game's own, legal moves are made of
    cards in the hand, and the hands hold no more of a card than the deck."""
    from rlcard.games.doudizhu.utils import ACTION_2_ID

    hand, others = Counter(state["current_hand"]), Counter(state["others_hand"])
    deck = {r: 1 if r in "BR" else 4 for r in "3456789TJQKA2BR"}
    moves = [*state["legal_actions"], *(move for _, move in state["trace"])]
    if not all(m in ACTION_2_ID for m in moves):
        return False
    # The move to beat: the last real move of the last two (None: both others passed, or
    # nothing was played yet: the seat leads, and may not pass).
    to_beat = next((m for _, m in reversed(state["trace"][-2:]) if m != "pass"), None)
    return (
        all(hand[r] + others[r] <= n for r, n in deck.items())
        and all(Counter(m) <= hand for m in state["legal_actions"] if m != "pass")
        and all(_playable(m, to_beat) for m in state["legal_actions"])
    )


def _playable(move: str, to_beat: str | None) -> bool:
    """Doudizhu's rule, from RLCard's own table of move kinds: a lead is any real move; an
    answer is a pass, the rocket, a bomb over anything less, or the same kind ranked higher."""
    from rlcard.games.doudizhu.utils import CARD_TYPE

    if to_beat is None:
        return move != "pass"
    if move == "pass" or to_beat == "BR":  # nothing beats the rocket
        return move == "pass"
    if move == "BR":
        return True
    kinds, beaten = CARD_TYPE[0][move], CARD_TYPE[0][to_beat]
    bomb = [int(r) for k, r in kinds if k == "bomb"]
    if bomb:
        return all(k != "bomb" or bomb[0] > int(r) for k, r in beaten)
    return any(k == j and int(r) > int(q) for k, r in kinds for j, q in beaten)


SEMANTIC = {"doudizhu": _doudizhu_semantics}


@pytest.mark.integration  # in-process, but ~10 s of CPU in all (generation)
@pytest.mark.parametrize("game", list(GAMES))
def test_what_the_schema_admits_the_adapter_takes(game: str) -> None:
    adapter = _adapter(game)
    semantic = SEMANTIC.get(adapter.name, lambda state: True)
    seen = admitted_states_taken(adapter, semantic, SLOW.get(game, EXAMPLES))
    if adapter.name not in SEMANTIC:
        assert seen[False] == 0
    print(f"\n{game}: taken {seen[True]}, refused {seen[False]}")


@pytest.mark.integration  # in-process, but ~15 s of CPU in all (generation)
@pytest.mark.parametrize("game", list(GAMES))
def test_what_the_schema_refuses_the_adapter_refuses(game: str) -> None:
    examples = SLOW.get(game, EXAMPLES)
    refused, boundary = refused_states_refused(_adapter(game), examples)
    assert refused >= examples // 3 + boundary // 2, (refused, boundary)


def _engine_states(game: str, hands: int, seed: int = 5) -> list[dict[str, Any]]:
    table = load_simulator(game)
    rng = random.Random(seed)
    states = []
    for hand in range(hands):
        table.reset(seed + hand)
        for _ in range(500):
            if table.is_over():
                break
            seat = table.current_player()
            state = table.state(seat)
            states.append(state)
            table.step(rng.choice(state["legal_actions"]))
    return states


@pytest.mark.parametrize(
    ("game", "hands"),
    [("leduc-holdem", 60), ("uno", 12), ("doudizhu", 6), ("examples.kuhn.game:KuhnSimulator", 40)],
)
def test_every_engine_state_validates(game: str, hands: int) -> None:
    adapter = load_adapter(game)
    validator = jsonschema_rs.Draft202012Validator(adapter.state_schema())
    states = _engine_states(game, hands)
    assert len(states) > 60
    for state in states:
        errors = [e.message for e in validator.iter_errors(state)]
        assert not errors, (errors[:3], state)
        assert takes(adapter, state)
        if adapter.name in SEMANTIC:
            assert SEMANTIC[adapter.name](state), state


SIMULATED = {
    "leduc-holdem": "leduc-holdem",
    "uno": "uno",
    "doudizhu": "doudizhu",
    "examples.kuhn.adapter:KuhnAdapter": "examples.kuhn.game:KuhnSimulator",
}


@pytest.mark.integration  # in-process, but ~10 s of CPU in all (generation)
@pytest.mark.parametrize("game", list(GAMES))
def test_a_real_state_with_one_field_the_schema_refuses_is_refused(game: str) -> None:
    adapter = _adapter(game)
    schema = adapter.state_schema()
    validator = jsonschema_rs.Draft202012Validator(schema)
    if game in SIMULATED:
        states = _engine_states(SIMULATED[game], hands=3)
        bases = [states[0], states[len(states) // 2], states[-1]]
    else:  # the vector game: made by hand
        bases = [{"obs": [0.5, -1, 2, 0, 3], "legal_actions": [0, 2]}]
    assert all(takes(adapter, s) for s in bases)
    tried = 0
    for field, spec in schema["properties"].items():
        one = {"type": "object", "required": [field], "properties": {field: spec}}
        values = [s[field] for s in boundary_states(one, GenerationMode.NEGATIVE) if field in s]
        for base in bases:
            variants = [{**base, field: v} for v in values]
            if field in schema.get("required", ()):
                variants.append({k: v for k, v in base.items() if k != field})
            for state in variants:
                if not validator.is_valid(state):
                    assert not takes(adapter, state), (field, state.get(field, "(missing)"))
                    tried += 1
    assert tried >= 10 * len(bases), tried


def test_a_float_without_a_fraction_is_an_integer() -> None:
    """JSON Schema's `integer` admits `2.0`, and so does every adapter where it says so."""
    leduc = _adapter("leduc-holdem")
    state = {"hand": "SK", "public_card": None, "all_chips": [2.0, 1], "my_chips": 1.0,
             "legal_actions": ["call", "raise", "fold"]}  # fmt: skip
    assert takes(leduc, state)
    assert not takes(leduc, {**state, "my_chips": 1.5})
    assert not takes(leduc, {**state, "my_chips": True})
    vector = _adapter("vector")
    good = {"obs": [0, 1.5, -2, 3, 4], "legal_actions": [0, 3.0]}
    assert takes(vector, good)
    for bad in ({"legal_actions": [True]}, {"legal_actions": ["1"]}, {"obs": [0, 1, "2", 3, 4]},
                {"obs": [0, 1, True, 3, 4]}, {"obs": [1e39, 0, 0, 0, 0]}):  # fmt: skip
        assert not takes(vector, {**good, **bad}), bad
