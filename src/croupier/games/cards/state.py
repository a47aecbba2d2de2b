"""A state as the toolkit reads it: a set of cards (`CardSet`) and the whole state, checked
(`Parsed`) (`croupier.games.cards`).

Values, not behaviour: the zones build them (`zones.py`), the game gathers them (`game.py`),
the dealer reads them (`worlds.py`). Apart from all three, so none imports another to say
what it holds (no import circle, `tests/test_import_graph.py`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from croupier.games.cards.deck import Move


class CardSet(NamedTuple):
    """A set of cards read from a state: counts per card, indices as listed (a `joined`
    string's: `bytes`), and its features by `max_cards`, filled as asked
    (`CardGame.set_row`)."""

    counts: np.ndarray  # int64[deck size], read only: shared by every state that holds it
    ids: list[int] | bytes
    rows: dict[int, np.ndarray]


class Parsed(NamedTuple):
    """A state, checked: each zone's value by field, the seat, the legal moves. (A named
    tuple: built on every state, ~3x cheaper than a frozen dataclass, 0.5 against 1.5 us.)"""

    values: dict[str, Any]
    seat: int
    legal: list[Move]
    hand: np.ndarray
    rows: np.ndarray  # float32[len(legal), move row]: the legal moves' rows (`move_row`)
