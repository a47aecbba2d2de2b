"""The simulator interface: a game croupier can deal and play by itself.

A studio's engine talks to croupier over HTTP and needs nothing from here. But every tool that
*proves* a version is better (`croupier engine`, `eval` with duplicate deals, the league,
`score`, `promote --auto`, the rules' recording for `pretrain`, the benchmarks) deals hands
itself, and so needs the game's rules in Python: a `Simulator`. It is the engine's side of the
contract, state for state: `state(seat)` is exactly the JSON the engine would send to
`POST /v1/games/{id}/decide`, so the game's adapter reads it as it reads real traffic.

`games/registry.py` `load_simulator` finds one by the same `--game` the server takes.

A game small enough to solve exactly (Kuhn poker, Leduc hold'em) also lists its deals
(`deals`, `deal`): `games/tree.py` then walks its whole game tree, and the arena measures a
policy's exploitability on it (`arena/exploitability.py`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

# A hand that has not ended after this many moves is a broken simulator, not a long game.
MAX_MOVES_PER_HAND = 10_000


class Simulator(ABC):
    """One table of a game: deal from a seed, say whose turn it is and what that seat sees,
    apply its action, and score the hand. One hand at a time, driven by one task (no lock).

    Class attributes a game sets:
    - `name`: the game's name, as `POST /v1/games` gives it (its adapter's `name`);
    - `adapter`: how `croupier serve --game` finds the adapter: a built-in name or
      `package.module:Adapter`;
    - `num_players`: seats "0" … "num_players-1";
    - `zero_sum`: every hand's payoffs sum to 0 (False for a game that scores otherwise, e.g.
      RLCard's doudizhu: 1 to each seat of the winning side, 0 to the others).
    """

    name: str
    adapter: str
    num_players: int = 2
    zero_sum: bool = True

    @abstractmethod
    def reset(self, seed: int | None = None) -> None:
        """Deal a new hand. The same seed deals the same hand (the arena's duplicate deals
        replay it with the seats swapped); without one the table's own generator goes on."""

    @abstractmethod
    def current_player(self) -> int:
        """The seat (0-based) whose decision it is; asked only while the hand is not over."""

    @abstractmethod
    def state(self, seat: int) -> dict[str, Any]:
        """What the engine sends croupier for `seat`'s decision: plain JSON types, the legal
        actions (the engine's values, e.g. names) under `legal_actions`."""

    @abstractmethod
    def step(self, action: Any) -> None:
        """Apply the current seat's action (one of `legal_actions`); an illegal one raises
        ValueError and changes nothing."""

    @abstractmethod
    def is_over(self) -> bool: ...

    @abstractmethod
    def payoffs(self) -> list[float]:
        """Each seat's payoff for the finished hand, in seat order."""

    def teams(self) -> list[list[int]]:
        """The seats that play together this hand (asked after `reset`: a role such as
        doudizhu's landlord may change with the deal). Default: every seat for itself. The
        arena seats a policy on one whole team at a time: a duplicate set plays its deal once
        per team."""
        return [[seat] for seat in range(self.num_players)]

    def roles(self) -> list[str] | None:
        """Each seat's side this hand by name (doudizhu: "landlord", "peasant"), asked after
        `reset`; None (the default): no named sides. The engine reports a win rate per side
        and seats `--sides` by them."""
        return None

    # --- worlds consistent with a seat's view (optional): what search plays out ---------------

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """Set this table to a whole hand consistent with `state` (the JSON the seat to act
        was sent, as `state(seat)` writes it): every card that seat sees where it sees it, the
        cards it cannot see dealt at random (`rng`) into the hidden places with their known
        counts, the same seat to act and the same legal moves. The table then plays on from
        there as from any hand (`step`, `is_over`, `payoffs`): the search seat
        (`policies/search.py`) plays each candidate move out in many such worlds. A game
        declared through the card toolkit deals the hidden cards from its zones
        (`CardGame.deal_unseen`): its simulator only accepts the dealt world. Default: not
        implemented (such a game cannot be searched)."""
        raise NotImplementedError(f"{type(self).__name__} cannot set a table from a seat's view")

    @classmethod
    def resamples(cls) -> bool:
        """Whether this simulator implements `resample` (a search seat needs it)."""
        return cls.resample is not Simulator.resample

    # --- exact solving (optional): a game small enough to walk every deal -------------------

    def deals(self) -> list[tuple[Any, float]] | None:
        """Every way a hand can be dealt, each with its probability (summing to 1), for a game
        small enough to walk whole (`games/tree.py`); None (the default): too many to list.
        A deal fixes every chance outcome of the hand up front (Leduc's public card too); the
        states reveal it only when the game does."""
        return None

    def deal(self, deal: Any) -> None:
        """Start a hand dealt as `deal` (one of `deals()`), as `reset` starts a random one."""
        raise NotImplementedError(f"{type(self).__name__} does not list its deals")

    def information(self, state: dict[str, Any]) -> str:
        """A short label of what the seat to act knows (`state`: what it is sent), equal for
        any two states the seat cannot tell apart. A game may merge states that differ only
        where nothing in the rules depends on it (Leduc's suits) and should say whose turn it
        is by position, not seat number. Reports group decisions by it, and an exactly solved
        strategy is a table keyed by it. Default: the state's JSON without its legal
        actions."""
        import json

        return json.dumps({k: v for k, v in state.items() if k != "legal_actions"}, sort_keys=True)

    def legal_actions(self) -> list[Any]:
        """The current seat's legal actions (the engine's values)."""
        return list(self.state(self.current_player())["legal_actions"])

    @property
    def seats(self) -> list[str]:
        return [str(seat) for seat in range(self.num_players)]


def side_seats(table: Simulator, role: str) -> list[int]:
    """The seats playing side `role` in the hand `table` was last reset to (`Simulator.roles`);
    ValueError, naming the game's sides, for a side it has none of."""
    roles = table.roles()
    seats = [seat for seat, r in enumerate(roles or []) if r == role]
    if not seats:
        raise ValueError(f"{table.name} has no side {role!r} (its sides: {roles})")
    return seats


def mixed_play_states(
    table: Simulator, rules: Any, hands: int, seed: int = 7, rules_share: float = 0.5
) -> list[dict[str, Any]]:
    """Every state `table` sends over `hands` hands (dealt `seed`, `seed` + 1, ...), each move
    the `rules`' with probability `rules_share`, else a random legal one: both the rules' own
    games and odd ones, for checking and timing an adapter on what an engine sends."""
    rng, states = random.Random(seed), []
    for hand in range(hands):
        table.reset(seed + hand)
        for _ in range(MAX_MOVES_PER_HAND):
            if table.is_over():
                break
            state = table.state(table.current_player())
            states.append(state)
            legal = state["legal_actions"]
            table.step(rules(state) if rng.random() < rules_share else rng.choice(legal))
        else:
            raise RuntimeError(f"a hand ran past {MAX_MOVES_PER_HAND} moves")
    return states
