"""A `CandidateAdapter` game as the server and trainer serve it: scored candidate actions.

`CandidateGame` wraps a game whose moves are described by feature vectors (doudizhu) and
presents it through the `GameAdapter` interface the rest of croupier knows, with one change of
meaning: the second array `encode` returns is not a 0/1 mask but the legal moves' features,
float32[K, candidate_size], one row per legal action in the engine's order (K varies per
state). Action index k is candidate k. `legal_indices` / `is_legal` read it as such, and the
spaces are the padded candidate spaces an RLlib module trains on (`max_candidates` slots).

`load_adapter` wraps every built-in or user adapter that is a `CandidateAdapter`, so
`--game doudizhu` serves and trains candidate scoring; the masked path over all 27,472
moves is no longer used for it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from croupier.games.base import CandidateAdapter, GameAdapter, InvalidState, RulesFn


class CandidateGame(GameAdapter):
    """Serves `inner`'s legal moves as scored candidates (see the module docstring)."""

    candidates = True  # the served policy scores candidates (policies read this flag)

    def __init__(self, inner: GameAdapter):
        if not isinstance(inner, CandidateAdapter):
            raise TypeError(f"{type(inner).__name__} is not a CandidateAdapter")
        self.inner: Any = inner
        self.name = inner.name
        self.obs_size = inner.obs_size
        self.num_players = inner.num_players
        self.payoff_range = inner.payoff_range
        self.candidate_size = int(inner.candidate_size)
        self.max_candidates = int(inner.max_candidates)
        self.num_actions = self.max_candidates
        simulator = getattr(inner, "simulator", None)  # how `load_simulator` finds its table
        if simulator is not None:
            self.simulator = simulator

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(state features float32[obs_size], candidates float32[K, candidate_size])."""
        obs, cands = self.inner.encode_candidates(state)
        self.inner.checked_count(len(cands))
        return obs, np.ascontiguousarray(cands, np.float32)

    def encode_many(
        self, states: list[dict[str, Any]]
    ) -> list[tuple[np.ndarray, np.ndarray] | InvalidState]:
        """`encode` of each state, the features built together where the game can
        (`CandidateAdapter.encode_candidates_many`); a refused state: its InvalidState."""
        out: list[tuple[np.ndarray, np.ndarray] | InvalidState] = []
        for item in self.inner.encode_candidates_many(states):
            if isinstance(item, InvalidState):
                out.append(item)
                continue
            try:
                self.inner.checked_count(len(item[1]))
            except InvalidState as e:
                out.append(e)
                continue
            out.append((item[0], np.ascontiguousarray(item[1], np.float32)))
        return out

    def check(self, state: dict[str, Any]) -> np.ndarray:
        """The candidates without their features: K rows of nothing, all that `legal_indices`
        and `is_legal` read (a rules seat's decision needs no features)."""
        k = self.inner.checked_count(self.inner.candidate_count(state))
        return np.empty((k, 0), np.float32)

    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        return self.inner.candidate_value(int(index), state)

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        """The candidate index of an engine action value (its place in the legal list)."""
        legal = (
            state.get("legal_actions", state.get("actions")) if isinstance(state, dict) else None
        )
        if type(legal) is not list:
            raise InvalidState("the state lists no legal actions")
        try:
            return legal.index(value)
        except ValueError:
            raise InvalidState(f"{value!r} is not a legal action here") from None

    def legal_indices(self, mask: np.ndarray) -> np.ndarray:
        return np.arange(len(mask))

    def legal_count(self, mask: np.ndarray) -> int:
        return len(mask)

    def is_legal(self, mask: np.ndarray, index: int) -> bool:
        return 0 <= index < len(mask)

    def teams(self, state: dict[str, Any]) -> list[list[str]] | None:
        return self.inner.teams(state)

    def state_schema(self) -> dict[str, Any] | None:
        return self.inner.state_schema()

    def action_schema(self) -> dict[str, Any] | None:
        # The engine's value of candidate k is the k-th legal action, whatever the inner
        # adapter calls its actions.
        return self.inner.action_schema()

    def rules(self) -> RulesFn | None:
        return self.inner.rules()

    def checked_rules(self) -> RulesFn | None:
        return self.inner.checked_rules()

    def warm_up(self) -> None:
        self.inner.warm_up()

    @property
    def seats(self) -> list[str]:
        return self.inner.seats

    @property
    def observation_space(self) -> gym.spaces.Dict:
        return self.inner.candidate_observation_space

    @property
    def action_space(self) -> gym.spaces.Discrete:
        return self.inner.candidate_action_space

    def terminal_observation(self) -> tuple[np.ndarray, np.ndarray]:
        """Zeros, with one (zero) candidate: the learner needs one legal slot there."""
        return np.zeros(self.obs_size, np.float32), np.zeros((1, self.candidate_size), np.float32)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "policy": "candidates",
            "candidate_size": self.candidate_size,
            "max_candidates": self.max_candidates,
        }


def served(adapter: GameAdapter) -> GameAdapter:
    """The adapter as croupier serves it: candidate games wrapped, others as they are."""
    if isinstance(adapter, CandidateAdapter) and not isinstance(adapter, CandidateGame):
        return CandidateGame(adapter)
    return adapter


def is_candidate_game(adapter: Any) -> bool:
    return getattr(adapter, "candidates", False) is True
