"""Playing a simulator's hand through the API, as an engine does, for tests that check
something of every decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from croupier.games.simulator import Simulator


async def play_hand(
    client: httpx.AsyncClient,
    table: Simulator,
    game_id: str,
    *,
    headers: dict[str, str] | None = None,
    on_decision: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> dict[str, float]:
    """Play `table`'s current hand (reset by the caller) on game `game_id`: every seat's
    decision through `/decide` (each a 200 whose action is one of the state's legal moves,
    handed to `on_decision(state, answer)`), then `/end` with the table's payoffs (a 200).
    Returns the payoffs sent."""
    base = f"/v1/games/{game_id}"
    while not table.is_over():
        seat = table.current_player()
        state = table.state(seat)
        d = await client.post(
            f"{base}/decide", json={"seat": str(seat), "state": state}, headers=headers
        )
        assert d.status_code == 200, d.text
        answer = d.json()
        assert answer["action"] in state["legal_actions"]
        if on_decision is not None:
            on_decision(state, answer)
        table.step(answer["action"])
    payoffs = {str(s): p for s, p in enumerate(table.payoffs())}
    e = await client.post(f"{base}/end", json={"payoffs": payoffs}, headers=headers)
    assert e.status_code == 200, e.text
    return payoffs
