"""UNO for two players, as RLCard plays it (`uno`).

State: RLCard's raw observation, e.g.
    {"hand": ["r-1", "b-wild"], "target": "b-5", "played_cards": ["b-5"],
     "legal_actions": ["b-wild", "draw"], "num_cards": [2, 7], "num_players": 2,
     "current_player": 0}
Observation: RLCard's (4, 4, 15) planes flattened to 240 floats, built with RLCard's own
`encode_hand` / `encode_target`: planes 0-2 hold 0/1/2 copies of each (colour, trait) in the
hand, plane 3 the target card. Only `hand`, `target` and `legal_actions` are read.
Actions: RLCard's 61 action ids (`ACTION_SPACE`); an action's engine value is its string.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import numpy as np
from rlcard.games.uno.utils import ACTION_LIST, encode_hand, encode_target

from croupier.games.base import InvalidState, NamedActionsAdapter, RulesFn
from croupier.games.leduc import rlcard_view

_CARDS = frozenset(a for a in ACTION_LIST if a != "draw")
_WILD_CARDS = frozenset(c for c in _CARDS if c.split("-", 1)[1] in ("wild", "wild_draw_4"))
# encode_hand puts k copies of a card on plane k; a third copy would index past plane 2.
# (The deck holds at most two of each coloured card; wild copies are not counted.)
MAX_COPIES = 2
_PLANES = (4, 4, 15)
OBS_SIZE = int(np.prod(_PLANES))

_REQUIRED = ("hand", "target", "legal_actions")


class UnoAdapter(NamedActionsAdapter):
    name = "uno"
    obs_size = OBS_SIZE
    action_names = tuple(ACTION_LIST)  # RLCard's ids: ACTION_SPACE[name] == position here
    num_players = 2
    # RLCard lists a playable card once per copy held (["r-7", "r-7", "b-0"]).
    REPEATED_LEGAL_ACTIONS = True

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a JSON object, got {type(state).__name__}")
        missing = [k for k in _REQUIRED if k not in state]
        if missing:
            raise InvalidState(f"state is missing {missing}")

        hand, target = state["hand"], state["target"]
        if not isinstance(hand, list) or not all(isinstance(c, str) for c in hand):
            raise InvalidState(f"'hand' must be a list of card strings, got {hand!r}")
        counts = Counter(hand)
        unknown = counts.keys() - _CARDS
        if unknown:
            raise InvalidState(f"unknown card(s) in 'hand': {sorted(unknown)}")
        too_many = [c for c, n in counts.items() if n > MAX_COPIES and c not in _WILD_CARDS]
        if too_many:
            raise InvalidState(f"more than {MAX_COPIES} copies of {sorted(too_many)} in 'hand'")
        if not isinstance(target, str) or target not in _CARDS:
            raise InvalidState(f"'target' must be a card string, got {target!r}")

        mask = self.legal_mask(state["legal_actions"])

        planes = np.zeros(_PLANES, np.float32)
        encode_hand(planes[:3], hand)
        encode_target(planes[3], target)
        return planes.reshape(-1), mask

    def warm_up(self) -> None:
        _rule_agent()

    def rules(self) -> RulesFn:
        # describe() calls rules() just to ask whether there is one: don't load RLCard here.
        def rule_action(state: dict[str, Any]) -> str:
            self.encode(state)
            legal = state["legal_actions"]
            try:
                action = str(_rule_agent().step(rlcard_view(state)))
            except ValueError:
                # uno-rule-v1 picks a wild_draw_4 colour from the hand's non-wild cards and
                # fails on a hand that cannot hold the legal wild card.
                action = legal[0]
            # It can also name a colour that is not listed as legal: never answer that.
            return action if action in legal else legal[0]

        return rule_action


@functools.cache
def _rule_agent() -> Any:
    # rlcard.models registers its model ids on import; `rlcard.models.load` needs that first.
    import rlcard.models

    return rlcard.models.load("uno-rule-v1").agents[0]
