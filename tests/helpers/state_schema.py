"""States generated from a game's state schema by schemathesis's own generators (what its
`--checks all` run sends), and whether an adapter takes one: shared by the schema property
tests (`test_state_schema.py`, `test_cards.py`)."""

from __future__ import annotations

from typing import Any

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
