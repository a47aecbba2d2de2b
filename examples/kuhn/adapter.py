"""Kuhn poker for croupier: the adapter (engine state -> observation + legal mask) and the
studio's rule-based bot. Serve it with `--game examples.kuhn.adapter:KuhnAdapter`."""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.games.base import InvalidState, NamedActionsAdapter

CARDS = ("J", "Q", "K")
MAX_HISTORY = 3  # check, bet, call/fold: a hand never has more actions


class KuhnAdapter(NamedActionsAdapter):
    name = "kuhn-poker"
    payoff_range = (-2.0, 2.0)  # ante 1 and one bet of 1: a hand wins or loses at most 2
    simulator = "examples.kuhn.game:KuhnSimulator"  # what croupier's arena and league deal
    action_names = ("check", "bet", "call", "fold")
    # one-hot own card, then one-hot of each action so far
    obs_size = len(CARDS) + MAX_HISTORY * len(action_names)

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        card, history = state.get("card"), state.get("history")
        if card not in CARDS:
            raise InvalidState(f"'card' must be one of {CARDS}, got {card!r}")
        if not isinstance(history, list) or len(history) >= MAX_HISTORY:
            raise InvalidState("'history' must be a list of at most 2 actions")
        obs = np.zeros(self.obs_size, np.float32)
        obs[CARDS.index(card)] = 1.0
        for i, action in enumerate(history):
            obs[len(CARDS) + i * self.num_actions + self.action_index(action, state)] = 1.0
        return obs, self.legal_mask(state.get("legal_actions"))

    def state_schema(self) -> dict[str, Any]:  # the state's type, in the server's OpenAPI doc
        return {
            "type": "object",
            "required": ["card", "history", "legal_actions"],
            "properties": {
                "card": {"type": "string", "enum": list(CARDS)},
                "history": {
                    "type": "array",
                    "items": self.action_schema(),
                    "maxItems": MAX_HISTORY - 1,
                },
                "legal_actions": self.legal_actions_schema(),
            },
        }

    def rules(self):  # noqa: ANN201
        return kuhn_rules


def kuhn_rules(state: dict[str, Any]) -> str:
    """The studio's bot: bet or call with a king, check or call with a queen, give up a jack."""
    legal, card = state["legal_actions"], state["card"]
    if card == "K":
        return "bet" if "bet" in legal else "call"
    if card == "Q":
        return "check" if "check" in legal else "call"
    return "check" if "check" in legal else "fold"
