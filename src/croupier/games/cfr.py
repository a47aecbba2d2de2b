"""CFR+ on a small game's whole tree (`games/tree.py`), over any partition of its states into
the information sets one strategy must play alike.

- The game's own information (`Simulator.information`: Leduc's blind, ranks and moves) is
  the full game with perfect recall: CFR+'s average strategy goes to an equilibrium
  (Leduc: exploitability 6e-6 after 5,000 iterations).
- An observation (`partition_by_observation`: the adapter's vector and legal mask, what a
  served model sees) merges states a model cannot tell apart, the same strategy in every
  seat, as croupier trains one: CFR+ then finds the least exploitable policy that
  observation allows, or near it (no recall of its own past: no guarantee, so the best
  checkpoint counts). That is the ceiling an observation puts on any policy trained on it.

Regret matching+ with alternating updates and linear averaging (Tammelin et al., 2015), each
iteration a few numpy passes over the tree per seat (Leduc: 0.9 ms of CPU an iteration).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from croupier.games.tree import GameTree, game_tree


def partition_by_information(tree: GameTree) -> list[Hashable]:
    """The game's own information labels: the full game."""
    return list(tree.information)


def partition_by_observation(tree: GameTree, adapter: Any) -> list[Hashable]:
    """What `adapter` makes of each state (observation and legal mask, as bytes): the
    information a policy served through it has, shared by every seat."""
    keys: list[Hashable] = []
    for state in tree.states:
        obs, mask = adapter.encode(state)
        keys.append(np.asarray(obs, np.float32).tobytes() + np.asarray(mask).tobytes())
    return keys


class CFRPlus:
    """CFR+ with the tree's states grouped by `keys` (one hashable per state, in
    `tree.states`' order): states with equal keys share one strategy and must list the same
    legal actions.

    `by_seat`: each seat keeps its own strategy per key, as the game's players do, and the
    seats' updates alternate (CFR+'s convergence needs that: on Leduc's information labels,
    which name the blind, not the seat, one strategy for both seats updated seat by seat was
    still at 8e-4 after 5,000 iterations, split by seat 6e-6). The strategy reported per key
    (`average_by_key`) then merges the seats' average strategies weighted by how often each
    reaches the key (their realisation plans summed: a mixture of the two, an equilibrium
    when each is one). Without `by_seat` every seat plays the key's one strategy: a model
    served through one observation for every seat."""

    def __init__(self, tree: GameTree, keys: Sequence[Hashable], by_seat: bool = True):
        if len(keys) != len(tree.states):
            raise ValueError(f"{len(keys)} keys for {len(tree.states)} states")
        self.tree = tree
        self.by_seat = by_seat
        key_ids: dict[Hashable, int] = {}
        key_of_state = np.array([key_ids.setdefault(k, len(key_ids)) for k in keys], np.int64)
        self.keys = list(key_ids)
        # A key's actions: the first of its states' legal actions; every other state of the
        # key must list the same ones (any order).
        self.key_actions: list[list[Any]] = [[] for _ in self.keys]
        position_in_key = np.empty(tree.num_slots, np.int64)  # per state slot
        for s, legal in enumerate(tree.legal):
            actions = self.key_actions[key_of_state[s]]
            if not actions:
                actions.extend(legal)
            if sorted(map(str, legal)) != sorted(map(str, actions)):
                raise ValueError(
                    f"states with one key list different legal actions: {actions} and {legal}"
                )
            where = {a: i for i, a in enumerate(actions)}
            for i, action in enumerate(legal):
                position_in_key[tree.slot_start[s] + i] = where[action]
        key_width = np.array([len(a) for a in self.key_actions], np.int64)
        self.key_start = np.concatenate([[0], np.cumsum(key_width)[:-1]])
        self.key_slots = int(key_width.sum())
        # Strategy slots: per (seat, key) with `by_seat`, else per key.
        copies = tree.num_players if by_seat else 1
        self.num_slots = copies * self.key_slots
        self.slot_info = np.tile(np.repeat(np.arange(len(self.keys)), key_width), copies)
        self.slot_info += np.repeat(np.arange(copies) * len(self.keys), self.key_slots)
        self.width = np.tile(np.repeat(key_width, key_width), copies).astype(np.float64)
        # Per state slot, its key slot; per node, the strategy slot of the edge into it.
        self.state_to_key_slot = self.key_start[key_of_state[tree.slot_state]] + position_in_key
        nonroot = tree.parent >= 0
        key_slot = np.where(nonroot, self.state_to_key_slot[np.maximum(tree.slot, 0)], 0)
        self.node_slot = key_slot + (tree.edge_seat.clip(0) * self.key_slots if by_seat else 0)
        self.regret = np.zeros(self.num_slots, np.float64)
        self.total = np.zeros(self.num_slots, np.float64)  # linearly weighted strategy sums
        self.iterations = 0
        self._edges = [np.flatnonzero(tree.edge_seat == seat) for seat in range(tree.num_players)]

    @property
    def num_infos(self) -> int:
        return len(self.keys) * (self.tree.num_players if self.by_seat else 1)

    def _normalise(self, weights: np.ndarray) -> np.ndarray:
        """Per information set, `weights` as a distribution (uniform where they are all 0)."""
        infos = int(self.slot_info.max()) + 1
        sums = np.bincount(self.slot_info, weights=weights, minlength=infos)[self.slot_info]
        safe = np.where(sums > 0, sums, 1.0)
        return np.where(sums > 0, weights / safe, 1.0 / self.width)

    def current(self) -> np.ndarray:
        """This iteration's strategy (regret matching+), per strategy slot."""
        return self._normalise(np.maximum(self.regret, 0.0))

    def average(self) -> np.ndarray:
        """The average strategy, per strategy slot: what converges to an equilibrium."""
        return self._normalise(self.total) if self.iterations else self.current()

    def sigma(self, strategy: np.ndarray) -> np.ndarray:
        """A strategy (per strategy slot) as per-node edge probabilities (`GameTree`'s)."""
        sigma = strategy[self.node_slot]
        sigma[: len(self.tree.deals)] = 1.0
        return sigma

    def average_by_key(self) -> np.ndarray:
        """Per key slot, the average strategy every seat would play: with `by_seat`, the
        seats' realisation weights summed before normalising (see the class doc)."""
        total = self.total.reshape(-1, self.key_slots).sum(axis=0)
        slot_key = self.slot_info[: self.key_slots]
        sums = np.bincount(slot_key, weights=total, minlength=len(self.keys))[slot_key]
        width = self.width[: self.key_slots]
        return np.where(sums > 0, total / np.where(sums > 0, sums, 1.0), 1.0 / width)

    def slot_probs(self, by_key: np.ndarray) -> np.ndarray:
        """A per-key strategy as the tree's per-state slot probabilities (`slot_probs`)."""
        return by_key[self.state_to_key_slot]

    def table(self, by_key: np.ndarray) -> dict[str, dict[str, float]]:
        """A per-key strategy as {key: {action: probability}} (keys and actions as strings)."""
        return {
            str(key): {
                str(a): float(by_key[self.key_start[k] + i])
                for i, a in enumerate(self.key_actions[k])
            }
            for k, key in enumerate(self.keys)
        }

    def run(self, iterations: int) -> None:
        tree = self.tree
        for _ in range(iterations):
            self.iterations += 1
            t = self.iterations
            for seat, mine in enumerate(self._edges):
                sigma = self.sigma(self.current())
                others = tree.reach(sigma, without=seat)
                own = self._own_reach(sigma, seat)
                value = tree.values(sigma, seat)
                above = tree.parent[mine]
                gain = np.bincount(
                    self.node_slot[mine],
                    weights=others[above] * (value[mine] - value[above]),
                    minlength=self.num_slots,
                )
                self.regret = np.maximum(self.regret + gain, 0.0)
                self.total += t * np.bincount(
                    self.node_slot[mine], weights=own[above] * sigma[mine],
                    minlength=self.num_slots,
                )  # fmt: skip

    def _own_reach(self, sigma: np.ndarray, seat: int) -> np.ndarray:
        tree = self.tree
        step = np.where(tree.edge_seat == seat, sigma, 1.0)
        reach = np.ones(tree.num_nodes, np.float64)
        for a, b in tree.levels[1:]:
            reach[a:b] = reach[tree.parent[a:b]] * step[a:b]
        return reach


def exploitability(tree: GameTree, sigma: np.ndarray) -> float:
    """The mean over seats of a best response's payoff per hand against the others playing
    `sigma` (per-node edge probabilities): for a two-player zero-sum game, half the profile's
    NashConv, 0 at an equilibrium."""
    return float(np.mean([tree.best_response(sigma, s)[0] for s in range(tree.num_players)]))


def solve(
    tree: GameTree,
    keys: Sequence[Hashable],
    iterations: int,
    check_every: int = 0,
    by_seat: bool = True,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[CFRPlus, list[dict[str, Any]]]:
    """`iterations` of CFR+; every `check_every` (0: only at the end) the exploitability of
    the average strategy as every seat would play it (`average_by_key`) and of the current
    one, reported and returned as a curve."""
    import time

    cfr = CFRPlus(tree, keys, by_seat)
    curve: list[dict[str, Any]] = []
    seconds = 0.0  # solving only, the checks left out
    step = check_every or iterations
    while cfr.iterations < iterations:
        t1 = time.monotonic()
        cfr.run(min(step, iterations - cfr.iterations))
        seconds += time.monotonic() - t1
        avg = cfr.average_by_key()
        point = {
            "iterations": cfr.iterations,
            "seconds": round(seconds, 2),
            "exploitability": exploitability(tree, shared(tree, cfr.slot_probs(avg))),
            "exploitability_current": exploitability(tree, cfr.sigma(cfr.current())),
        }
        curve.append(point)
        if report is not None:
            report(point)
    return cfr, curve


def shared(tree: GameTree, slot_probs: np.ndarray) -> np.ndarray:
    """One policy (per-state slot probabilities) played in every seat, as edge probabilities."""
    return tree.edge_probs([slot_probs] * tree.num_players)


# CFR+ iterations behind `equilibrium`: Leduc's average strategy is exploitable by 2.4e-5 a
# hand after 2,000 (6e-6 after 5,000), so a payoff against it is good to 4 decimals; ~1.8 s of
# CPU and deterministic: recomputed, not stored.
EQUILIBRIUM_ITERATIONS = 2000


@functools.cache
def equilibrium(game: str, iterations: int = EQUILIBRIUM_ITERATIONS) -> dict[str, dict[str, float]]:
    """An equilibrium of `game` (one small enough to walk: `game_tree`) as a table {the game's
    information label: {action: probability}}, every seat playing it: CFR+ on the full game."""
    tree = game_tree(game)
    cfr = CFRPlus(tree, partition_by_information(tree))
    cfr.run(iterations)
    return cfr.table(cfr.average_by_key())
