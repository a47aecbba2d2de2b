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

from croupier.games.base import GameAdapter, InvalidState
from croupier.games.registry import load_adapter, load_simulator

hypothesis = pytest.importorskip("hypothesis")
schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.generation.modes import GenerationMode  # noqa: E402

GAMES = {
    "leduc-holdem": {},
    "uno": {},
    "doudizhu": {},
    "vector": {"obs_size": 5, "num_actions": 4},
    "examples.kuhn.adapter:KuhnAdapter": {},
}
EXAMPLES = 150  # per game and direction: ~1-2 s of CPU a game
# doudizhu's lookahead patterns and hand-size branches make its states ~10x dearer to generate
SLOW = {"doudizhu": 60}


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


def _operation(schema: dict[str, Any]) -> tuple[Any, Any]:
    """A one-route API whose request body is a state: schemathesis's schema and operation."""
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "state", "version": "1"},
        "paths": {
            "/state": {
                "post": {
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": schema}},
                    },
                    "responses": {"200": {"description": "taken"}},
                }
            }
        },
    }
    api = schemathesis.openapi.from_dict(doc)
    return api, api["/state"]["POST"]


def _states(schema: dict[str, Any], mode: GenerationMode) -> Any:
    """Random states (the fuzzing phase's strategy for the request body)."""
    return _operation(schema)[1].as_strategy(mode).map(lambda case: case.body)


def _boundary_states(schema: dict[str, Any], mode: GenerationMode) -> list[Any]:
    """The coverage phase's states: each constraint at its bound (positive) or just past it,
    a wrong type, a missing field (negative): deterministic, ~50-200 a game."""
    api, operation = _operation(schema)
    cases = api.iter_coverage_cases(
        operation,
        generation_modes=[mode],
        generation_config=api.config.generation_for(operation=operation),
    )
    return [case.body for case in cases if isinstance(case.body, dict)]


def _takes(adapter: GameAdapter, state: Any) -> bool:
    """Whether the adapter takes the state, as the server reads it (`check` for a rules or
    random seat, `encode` for a learned one): both, or neither."""
    verdicts = []
    for read in (adapter.check, adapter.encode):
        try:
            read(state)
            verdicts.append(True)
        except InvalidState:
            verdicts.append(False)
    assert verdicts[0] == verdicts[1], (verdicts, state)
    return verdicts[0]


@pytest.mark.integration  # in-process, but ~10 s of CPU in all (generation)
@pytest.mark.parametrize("game", list(GAMES))
def test_what_the_schema_admits_the_adapter_takes(game: str) -> None:
    adapter = _adapter(game)
    schema = adapter.state_schema()
    assert schema is not None, game
    validator = jsonschema_rs.Draft202012Validator(schema)
    semantic = SEMANTIC.get(adapter.name, lambda state: True)
    seen = {"taken": 0, "refused": 0}

    @settings(
        max_examples=SLOW.get(game, EXAMPLES),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(_states(schema, GenerationMode.POSITIVE))
    def check(state: Any) -> None:
        assert validator.is_valid(state), state  # the generator keeps to the schema
        taken = _takes(adapter, state)
        assert taken == semantic(state), state
        seen["taken" if taken else "refused"] += 1

    check()
    for state in _boundary_states(schema, GenerationMode.POSITIVE):
        check.hypothesis.inner_test(state)
    if adapter.name not in SEMANTIC:
        assert seen["refused"] == 0
    print(f"\n{game}: {seen}")


@pytest.mark.integration  # in-process, but ~15 s of CPU in all (generation)
@pytest.mark.parametrize("game", list(GAMES))
def test_what_the_schema_refuses_the_adapter_refuses(game: str) -> None:
    adapter = _adapter(game)
    schema = adapter.state_schema()
    assert schema is not None
    validator = jsonschema_rs.Draft202012Validator(schema)
    refused = []
    examples = SLOW.get(game, EXAMPLES)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_states(schema, GenerationMode.NEGATIVE))
    def check(state: Any) -> None:
        # The server's request model takes only an object as a state; anything else is its 422.
        if not isinstance(state, dict) or validator.is_valid(state):
            return
        assert not _takes(adapter, state), state
        refused.append(state)

    check()
    boundary = _boundary_states(schema, GenerationMode.NEGATIVE)
    for state in boundary:
        check.hypothesis.inner_test(state)
    assert len(refused) >= examples // 3 + len(boundary) // 2, (len(refused), len(boundary))


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
        assert _takes(adapter, state)
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
    assert all(_takes(adapter, s) for s in bases)
    tried = 0
    for field, spec in schema["properties"].items():
        one = {"type": "object", "required": [field], "properties": {field: spec}}
        values = [s[field] for s in _boundary_states(one, GenerationMode.NEGATIVE) if field in s]
        for base in bases:
            variants = [{**base, field: v} for v in values]
            if field in schema.get("required", ()):
                variants.append({k: v for k, v in base.items() if k != field})
            for state in variants:
                if not validator.is_valid(state):
                    assert not _takes(adapter, state), (field, state.get(field, "(missing)"))
                    tried += 1
    assert tried >= 10 * len(bases), tried


def test_a_float_without_a_fraction_is_an_integer() -> None:
    """JSON Schema's `integer` admits `2.0`, and so does every adapter where it says so."""
    leduc = _adapter("leduc-holdem")
    state = {"hand": "SK", "public_card": None, "all_chips": [2.0, 1], "my_chips": 1.0,
             "legal_actions": ["call", "raise", "fold"]}  # fmt: skip
    assert _takes(leduc, state)
    assert not _takes(leduc, {**state, "my_chips": 1.5})
    assert not _takes(leduc, {**state, "my_chips": True})
    vector = _adapter("vector")
    good = {"obs": [0, 1.5, -2, 3, 4], "legal_actions": [0, 3.0]}
    assert _takes(vector, good)
    for bad in ({"legal_actions": [True]}, {"legal_actions": ["1"]}, {"obs": [0, 1, "2", 3, 4]},
                {"obs": [0, 1, True, 3, 4]}, {"obs": [1e39, 0, 0, 0, 0]}):  # fmt: skip
        assert not _takes(vector, {**good, **bad}), bad
