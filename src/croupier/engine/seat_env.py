"""An in-process gymnasium env: one side of a game (any with a simulator) against a fixed
opponent.

The learner plays a whole team (`Simulator.teams`: one seat in most games, both peasants in
doudizhu, whose payoffs are one): a team drawn at random each hand, or every seat of one named
side (`side`: doudizhu's "peasant", as `croupier bench exploit --side` asks of an exploiter of
a landlord). Its decisions come from whichever of its seats is to act, each seeing only its
own state, as two seats of one version do on a server; its reward is the team's payoff.

The same adapter encodes the same JSON states the engine would send over HTTP, so RLlib
stepping this env (no HTTP, no link) trains the same module on the same problem. It is the
anchor the external path is measured against, and a quick place to tune hyperparameters.

The opponent, in every other seat: `rules` (the game's), `random`, or any policy made by a
factory named by import path (`opponent: "package.module:factory"`, called with
`opponent_config`'s keywords, returning a function from a state to an action): how
`croupier bench exploit` seats a frozen version (`policies/distribution.py` `opponent`), a
later stage this one never imports.

Hands in which the opponent ends the game before the learner acts have no decision for the
learner; `reset` deals on until the learner has one, keeping their payoffs in
`skipped_payoffs` (payoff per hand must count every hand, not only RLlib's episodes).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from croupier.games.candidates import is_candidate_game
from croupier.games.registry import import_object, load_adapter, load_simulator
from croupier.games.simulator import side_seats

MAX_DEALS_PER_RESET = 1000


class SeatEnv(gym.Env):
    def __init__(self, config: dict[str, Any] | None = None):
        config = dict(config or {})
        game = config.get("game", "leduc-holdem")
        self.table = load_simulator(game)
        # The game's own adapter: `pkg:Adapter` may observe the table its own way (a
        # UnoBasicAdapter on the uno table), so not the one the table names by default.
        self.adapter = load_adapter(game)
        opponent = config.get("opponent", "rules")
        if opponent == "rules":
            rules = self.adapter.rules()
            if rules is None:
                raise ValueError(f"{self.adapter.name} has no rules policy")
            self._opponent = rules
        elif opponent == "random":
            self._opponent = self._random_action
        else:
            self._opponent = import_object(opponent)(**config.get("opponent_config", {}))
        self.observation_space = self.adapter.observation_space
        self.action_space = self.adapter.action_space
        self._rng = np.random.default_rng(config.get("seed"))
        self._side: str | None = config.get("side")
        if self._side is not None:  # a side the game has not: refused before any training
            self.table.reset(0)
            side_seats(self.table, self._side)
        self._seats: list[int] = [0]  # the learner's seats this hand
        self._state: dict[str, Any] = {}
        # A candidate game's observation is its padded candidate space (what the candidate
        # module trains on); `encoded` keeps the unpadded rows, for evaluating a policy.
        self._candidates = is_candidate_game(self.adapter)
        self.encoded: tuple[np.ndarray, np.ndarray] | None = None
        self.skipped_payoffs: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        for _ in range(MAX_DEALS_PER_RESET):
            self.table.reset(int(self._rng.integers(2**31)))
            self._seats = self._learner_seats()
            self._play_opponents()
            if not self.table.is_over():
                return self._observe(), {}
            self.skipped_payoffs.append(self._payoff())
        raise RuntimeError("the learner never got a decision")

    def _learner_seats(self) -> list[int]:
        """The learner's seats this hand (asked after `reset`: a side may move with the deal)."""
        if self._side is None:
            teams = self.table.teams()
            return list(teams[int(self._rng.integers(len(teams)))])
        return side_seats(self.table, self._side)

    def _payoff(self) -> float:
        """The learner's payoff for the finished hand: its team's, one per seat."""
        payoffs = self.table.payoffs()
        return float(np.mean([payoffs[seat] for seat in self._seats]))

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        self.table.step(self.adapter.action_value(int(action), self._state))
        self._play_opponents()
        if self.table.is_over():
            reward = self._payoff()
            return self._observation(*self.adapter.terminal_observation()), reward, True, False, {}
        return self._observe(), 0.0, False, False, {}

    @property
    def state(self) -> dict[str, Any]:
        """The learner's current state, as the engine would send it."""
        return self._state

    def _play_opponents(self) -> None:
        while not self.table.is_over() and self.table.current_player() not in self._seats:
            player = self.table.current_player()
            self.table.step(self._opponent(self.table.state(player)))

    def _observe(self) -> dict[str, np.ndarray]:
        self._state = self.table.state(self.table.current_player())
        self.encoded = self.adapter.encode(self._state)
        return self._observation(*self.encoded)

    def _observation(self, obs: np.ndarray, legal: np.ndarray) -> dict[str, np.ndarray]:
        if self._candidates:
            return self.adapter.inner.pad_candidates(obs, legal)
        return {"observations": obs, "action_mask": legal}

    def _random_action(self, state: dict[str, Any]) -> Any:
        legal = state["legal_actions"]
        return legal[int(self._rng.integers(len(legal)))]
