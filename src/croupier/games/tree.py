"""A small game's whole tree, walked through its simulator, and exact answers on it: what a
strategy profile wins, and a best response to a policy.

Built from any `Simulator` that lists its deals (`Simulator.deals`, `deal`): every deal, then
every legal action from every state, replayed through the simulator itself (the same
rules the engine plays: RLCard's game for the built-in Leduc). Each decision node keeps the
state the seat to act is sent (exactly what an engine sends `POST /v1/games/{id}/decide`),
so a policy is measured as it is served: a function from that JSON state to a distribution
over its legal actions (`StatePolicy`), asked once per distinct state.

Nodes are stored breadth first (a depth's nodes are one contiguous range, a node's children
too), so a pass up or down the tree is one numpy step per depth (Leduc: 9 depths, 23,280
nodes, 240 deals).

A best response plays on the finest information a seat has: its seat, the states it was sent
and the actions it took so far (`GameTree.info`), whatever the game's states carry, so it
is a best response of a player with perfect recall even when a state would not say how the
hand got there.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from croupier.games.registry import load_simulator
from croupier.games.simulator import Simulator

# A policy's answer for one state: each legal action (the engine's value) and its probability.
Distribution = dict[Any, float]
# A policy, asked for many states at once (a model answers them in one forward).
StatePolicy = Callable[[Sequence[dict[str, Any]]], list[Distribution]]

# Leduc has 23,280 nodes; a game past this is not one to walk whole.
MAX_NODES = 2_000_000
MAX_DEPTH = 1_000


class TooLarge(ValueError):
    """A game whose tree is too large (or that lists no deals) to solve exactly."""


def state_key(state: dict[str, Any]) -> str:
    """One string per distinct JSON state (key order does not matter)."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


@dataclass
class _Node:
    deal: int
    path: tuple[Any, ...]  # the actions from the deal to here
    parent: int
    slot: int  # the parent's state's action slot taken to get here (-1 at a deal)
    # The acting seat's own history so far, per seat: (info id, action position) pairs.
    own: tuple[tuple[tuple[int, int], ...], ...]


class GameTree:
    """Every deal and every line of play of a two-or-more-player game (see the module doc)."""

    def __init__(self, table: Simulator, max_nodes: int = MAX_NODES):
        deals = table.deals()
        if not deals:
            raise TooLarge(f"{table.name}: the simulator does not list its deals")
        self.name = table.name
        self.num_players = table.num_players
        self.deals = [d for d, _ in deals]
        self.chance = np.array([p for _, p in deals], np.float64)
        if not np.isclose(self.chance.sum(), 1.0) or (self.chance <= 0).any():
            raise ValueError(f"{table.name}: deal probabilities must be positive and sum to 1")
        # Distinct states (the policy's inputs) and their legal actions; slot k is one legal
        # action of one state, states' slots contiguous from `slot_start`.
        self.states: list[dict[str, Any]] = []
        self.legal: list[list[Any]] = []
        self.information: list[str] = []
        slot_start: list[int] = []
        state_ids: dict[str, int] = {}
        infos: dict[tuple[Any, ...], int] = {}
        info_state: list[int] = []

        parent, depth, player, deal_of, state_of, slot_of, info_of, level_of = (
            [] for _ in range(8)
        )
        payoffs: list[list[float]] = []
        frontier = [_Node(i, (), -1, -1, ((),) * self.num_players) for i in range(len(self.deals))]
        for d in range(MAX_DEPTH):
            if not frontier:
                break
            following: list[_Node] = []
            for node in frontier:
                index = len(parent)
                if index >= max_nodes:
                    raise TooLarge(f"{table.name}: more than {max_nodes:,} nodes")
                table.deal(self.deals[node.deal])
                for action in node.path:
                    table.step(action)
                parent.append(node.parent)
                depth.append(d)
                deal_of.append(node.deal)
                slot_of.append(node.slot)
                if table.is_over():
                    player.append(-1)
                    state_of.append(-1)
                    info_of.append(-1)
                    level_of.append(0)
                    payoffs.append([float(x) for x in table.payoffs()])
                    continue
                seat = table.current_player()
                state = table.state(seat)
                key = state_key(state)
                s = state_ids.get(key)
                if s is None:
                    s = state_ids[key] = len(self.states)
                    self.states.append(state)
                    self.legal.append(list(state["legal_actions"]))
                    self.information.append(table.information(state))
                    slot_start.append(slot_start[-1] + len(self.legal[-2]) if s else 0)
                own = node.own[seat]
                info_key = (seat, own, s)
                info = infos.get(info_key)
                if info is None:
                    info = infos[info_key] = len(info_state)
                    info_state.append(s)
                player.append(seat)
                state_of.append(s)
                info_of.append(info)
                level_of.append(len(own))
                payoffs.append([0.0] * self.num_players)
                for position, action in enumerate(self.legal[s]):
                    mine = (*own, (info, position))
                    owns = tuple(mine if p == seat else o for p, o in enumerate(node.own))
                    following.append(
                        _Node(node.deal, (*node.path, action), index, slot_start[s] + position,
                              owns)
                    )  # fmt: skip
            frontier = following
        else:
            raise TooLarge(f"{table.name}: a line of play longer than {MAX_DEPTH} moves")

        self.parent = np.array(parent, np.int64)
        self.depth = np.array(depth, np.int64)
        self.player = np.array(player, np.int64)
        self.deal_of = np.array(deal_of, np.int64)
        self.state_of = np.array(state_of, np.int64)
        self.slot = np.array(slot_of, np.int64)
        self.info = np.array(info_of, np.int64)
        self.own_level = np.array(level_of, np.int64)
        self.payoffs = np.array(payoffs, np.float64)
        self.slot_start = np.array(slot_start, np.int64)
        self.num_slots = int(self.slot_start[-1] + len(self.legal[-1]))
        self.slot_state = np.repeat(
            np.arange(len(self.states)), [len(a) for a in self.legal]
        ).astype(np.int64)
        self.info_state = np.array(info_state, np.int64)
        # Per node: the seat whose action led to it (-1 at a deal), and where each depth lies.
        self.edge_seat = np.where(self.parent >= 0, self.player[np.maximum(self.parent, 0)], -1)
        bounds = np.searchsorted(self.depth, np.arange(self.depth.max() + 2))
        self.levels = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    @property
    def num_nodes(self) -> int:
        return len(self.parent)

    def children(self, node: int) -> range:
        """A node's children (contiguous: breadth first, parents in order)."""
        return range(
            int(np.searchsorted(self.parent, node, "left")),
            int(np.searchsorted(self.parent, node, "right")),
        )

    def find(self, deal: Any, actions: Sequence[Any]) -> int:
        """The node reached from `deal` by `actions` (KeyError: no such line of play)."""
        node = self.deals.index(deal)
        for action in actions:
            if self.player[node] < 0:
                raise KeyError(f"the hand is over before {action!r}")
            legal = self.legal[self.state_of[node]]
            if action not in legal:
                raise KeyError(f"{action!r} is not legal here ({legal})")
            node = self.children(node)[legal.index(action)]
        return node

    # --- policies as arrays ------------------------------------------------------------------

    def slot_probs(self, policy: StatePolicy) -> np.ndarray:
        """`policy` asked once for every distinct state: per slot, the probability of its action.
        A distribution must cover only legal actions, with probabilities summing to 1."""
        answers = policy(self.states)
        if len(answers) != len(self.states):
            raise ValueError(f"the policy answered {len(answers)} of {len(self.states)} states")
        probs = np.zeros(self.num_slots, np.float64)
        for s, dist in enumerate(answers):
            legal = self.legal[s]
            unknown = set(dist) - set(legal)
            if unknown:
                raise ValueError(f"the policy gave illegal actions {sorted(map(str, unknown))}")
            row = np.array([float(dist.get(a, 0.0)) for a in legal])
            if (row < 0).any() or not np.isclose(row.sum(), 1.0, atol=1e-6):
                raise ValueError(f"not a distribution over {legal}: {dist}")
            start = self.slot_start[s]
            probs[start : start + len(legal)] = row / row.sum()
        return probs

    def edge_probs(self, seat_probs: Sequence[np.ndarray]) -> np.ndarray:
        """Per node, the probability that the seat acting at its parent took the edge to it
        (1 at a deal): seat i playing `seat_probs[i]` (slot probabilities)."""
        sigma = np.ones(self.num_nodes, np.float64)
        for seat, probs in enumerate(seat_probs):
            at = np.flatnonzero(self.edge_seat == seat)
            sigma[at] = probs[self.slot[at]]
        return sigma

    # --- passes ------------------------------------------------------------------------------

    def reach(self, sigma: np.ndarray, without: int | None = None) -> np.ndarray:
        """Per node, chance's probability of its deal times every seat's probability of the
        actions to it, leaving out seat `without`'s own (a counterfactual reach)."""
        step = sigma if without is None else np.where(self.edge_seat == without, 1.0, sigma)
        reach = np.empty(self.num_nodes, np.float64)
        reach[: len(self.deals)] = self.chance
        for a, b in self.levels[1:]:
            reach[a:b] = reach[self.parent[a:b]] * step[a:b]
        return reach

    def values(self, sigma: np.ndarray, seat: int) -> np.ndarray:
        """Per node, `seat`'s expected payoff from there on when every move is drawn from
        `sigma` (per-node edge probabilities)."""
        value = self.payoffs[:, seat].copy()
        for (a, b), (c, e) in zip(self.levels[-2::-1], self.levels[:0:-1], strict=True):
            value[a:b] += np.bincount(
                self.parent[c:e] - a, weights=sigma[c:e] * value[c:e], minlength=b - a
            )
        return value

    def expected(self, sigma: np.ndarray) -> np.ndarray:
        """Each seat's expected payoff per hand under `sigma`, over every deal."""
        return np.array(
            [self.chance @ self.values(sigma, seat)[: len(self.deals)] for seat in
             range(self.num_players)]
        )  # fmt: skip

    def best_response(self, sigma: np.ndarray, seat: int) -> tuple[float, np.ndarray]:
        """`seat`'s best response when the other seats play `sigma`: its expected payoff per
        hand, and its choice (an action position) per information set of `seat` (`info`; -1
        for another seat's). Decided from the seat's last decisions up: what a decision is
        worth depends only on the decisions the seat makes after it."""
        weight = self.reach(sigma, without=seat)
        chosen = np.full(len(self.info_state), -1, np.int64)
        mine = np.flatnonzero(self.edge_seat == seat)  # the edges `seat` chooses
        above = self.parent[mine]
        infos = self.info[above]
        position = self.slot[mine] - self.slot_start[self.state_of[above]]
        # Each (information set, action) pair of `seat`'s a slot of its own.
        width = np.array([len(self.legal[s]) for s in self.info_state], np.int64)
        start = np.concatenate([[0], np.cumsum(width)[:-1]])
        pair = start[infos] + position
        level = self.own_level[above]
        sig = sigma.copy()
        for lv in range(int(level.max()) if level.size else -1, -1, -1):
            value = self.values(sig, seat)
            at = level == lv
            # Q(I, a): the child's value weighted by chance's and the others' reach of its
            # parent, summed over the information set's nodes; the first best action wins.
            q = np.bincount(pair[at], weights=weight[above[at]] * value[mine[at]],
                            minlength=int(width.sum()))  # fmt: skip
            decided = np.unique(infos[at])
            for info in decided.tolist():  # a handful of actions each
                row = q[start[info] : start[info] + width[info]]
                chosen[info] = int(np.flatnonzero(row >= row.max() - 1e-12)[0])
            sig[mine[at]] = (position[at] == chosen[infos[at]]).astype(np.float64)
        value = self.values(sig, seat)
        return float(self.chance @ value[: len(self.deals)]), chosen

    def best_response_actions(self, probs: np.ndarray) -> tuple[dict[str, Any], list[float]]:
        """The best response to `probs` (slot probabilities) in every seat as a table a server
        can play from the state it is sent: {`state_key(state)`: action}, and the best
        response's win per hand in each seat. A state must tell the seat's information apart
        (Leduc's do: they carry the hand's moves); ValueError when two information sets of one
        state would choose differently."""
        sigma = self.edge_probs([probs] * self.num_players)
        table: dict[str, Any] = {}
        wins = []
        for seat in range(self.num_players):
            win, chosen = self.best_response(sigma, seat)
            wins.append(win)
            for info in np.flatnonzero(chosen >= 0).tolist():
                s = int(self.info_state[info])
                action = self.legal[s][int(chosen[info])]
                key = state_key(self.states[s])
                if table.setdefault(key, action) != action:
                    raise ValueError(
                        f"{self.name}: a state does not tell the seat's information apart "
                        "(its best response differs between two histories): no table to serve"
                    )
        return table, wins


def game_tree(game: str) -> GameTree:
    """The tree of `game` (a built-in game's name, or anything `load_simulator` takes), built
    once per process and simulator (Leduc: 1.3 s of CPU; its adapters share one)."""
    return _tree_of(type(load_simulator(game)))


@functools.cache
def _tree_of(simulator: type[Simulator]) -> GameTree:
    return GameTree(simulator())
