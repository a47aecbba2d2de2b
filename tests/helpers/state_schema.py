"""States generated from a game's state schema by schemathesis's own generators (what its
`--checks all` run sends), and whether an adapter takes one: shared by the schema property
tests (`test_state_schema.py`, `test_cards.py`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import jsonschema_rs
import schemathesis
from schemathesis.generation.modes import GenerationMode

from croupier.games.base import GameAdapter, InvalidState

__all__ = ["GenerationMode", "boundary_states", "operation", "states", "takes"]


def operation(schema: dict[str, Any]) -> tuple[Any, Any]:
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


def states(schema: dict[str, Any], mode: GenerationMode) -> Any:
    """Random states (the fuzzing phase's strategy for the request body)."""
    return operation(schema)[1].as_strategy(mode).map(lambda case: case.body)


def boundary_states(schema: dict[str, Any], mode: GenerationMode) -> list[Any]:
    """The coverage phase's states: each constraint at its bound (positive) or just past it,
    a wrong type, a missing field (negative): deterministic, ~50-200 a game."""
    api, op = operation(schema)
    cases = api.iter_coverage_cases(
        op,
        generation_modes=[mode],
        generation_config=api.config.generation_for(operation=op),
    )
    return [case.body for case in cases if isinstance(case.body, dict)]


def takes(adapter: GameAdapter, state: Any) -> bool:
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


def admitted_states_taken(
    adapter: GameAdapter, semantic: Callable[[Any], bool], examples: int
) -> Counter[bool]:
    """Every state the schema admits (random, then each bound) is taken by the adapter exactly
    when `semantic` (what no schema can state) holds; how many were taken and refused."""
    from hypothesis import HealthCheck, given, settings

    schema = adapter.state_schema()
    assert schema is not None, adapter.name
    validator = jsonschema_rs.Draft202012Validator(schema)
    seen: Counter[bool] = Counter()

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(states(schema, GenerationMode.POSITIVE))
    def check(state: Any) -> None:
        assert validator.is_valid(state), state  # the generator keeps to the schema
        taken = takes(adapter, state)
        assert taken == semantic(state), state
        seen[taken] += 1

    check()
    for state in boundary_states(schema, GenerationMode.POSITIVE):
        check.hypothesis.inner_test(state)
    return seen


def refused_states_refused(adapter: GameAdapter, examples: int) -> tuple[int, int]:
    """Every object state the schema refuses (random, then each bound just past it) the
    adapter refuses too; how many such states were tried, and how many were boundary ones."""
    from hypothesis import HealthCheck, given, settings

    schema = adapter.state_schema()
    assert schema is not None, adapter.name
    validator = jsonschema_rs.Draft202012Validator(schema)
    refused = []

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(states(schema, GenerationMode.NEGATIVE))
    def check(state: Any) -> None:
        # The server's request model takes only an object as a state; anything else is its 422.
        if not isinstance(state, dict) or validator.is_valid(state):
            return
        assert not takes(adapter, state), state
        refused.append(state)

    check()
    boundary = boundary_states(schema, GenerationMode.NEGATIVE)
    for state in boundary:
        check.hypothesis.inner_test(state)
    return len(refused), len(boundary)
