"""Find a game's adapter, and its simulator, by name: built-in, or a user's class named by
import path. One mechanism for both: a game name resolves to its adapter, and an adapter names
its simulator (an import path, `simulator`) when the game has one."""

from __future__ import annotations

import importlib
from typing import Any

from croupier.games.base import GameAdapter, RulesFn
from croupier.games.simulator import Simulator
from croupier.games.vector import VectorAdapter

BUILT_IN = ("leduc-holdem", "uno", "doudizhu", "vector")
# The widest payoff range a game may declare: a variance over 2e12-wide payoffs stays ~1e25 a
# game, far from float64's limit after any number of games.
MAX_PAYOFF = 1e12


def load_adapter(
    name: str,
    *,
    obs_size: int | None = None,
    num_actions: int | None = None,
    num_players: int = 2,
    payoff_range: tuple[float, float] | None = None,
) -> GameAdapter:
    """`leduc-holdem`, `uno`, `doudizhu`, `vector` (sizes required),
    `package.module:AdapterClass`, or `package.module:Simulator` (the adapter it names); a game
    of scored candidate actions comes wrapped as it is served and trained
    (`games.candidates.served`). `payoff_range` replaces the game's declared one (an engine
    that scores a built-in game its own way)."""
    from croupier.games.candidates import served

    adapter = _load(name, obs_size=obs_size, num_actions=num_actions, num_players=num_players)
    if payoff_range is not None:
        adapter.payoff_range = payoff_range
    check_payoff_range(adapter)
    return served(adapter)


def check_payoff_range(adapter: GameAdapter) -> None:
    """Refuse a declared payoff range that is not a finite interval within `MAX_PAYOFF`: the
    server's statistics (means and variances over millions of games) stay finite and exact
    only for payoffs that size; no card game's scoring comes near it."""
    try:
        low, high = (float(x) for x in adapter.payoff_range)
    except (TypeError, ValueError):
        raise ValueError(
            f"{adapter.name}: payoff_range must be two numbers (low, high), "
            f"got {adapter.payoff_range!r}"
        ) from None
    if not -MAX_PAYOFF <= low <= high <= MAX_PAYOFF:
        raise ValueError(
            f"{adapter.name}: payoff_range {adapter.payoff_range!r} must be finite, low <= high, "
            f"within +/-{MAX_PAYOFF:g}"
        )


def _load(
    name: str,
    *,
    obs_size: int | None = None,
    num_actions: int | None = None,
    num_players: int = 2,
) -> GameAdapter:
    if name == "leduc-holdem":
        from croupier.games.leduc import LeducAdapter

        return LeducAdapter()
    if name == "uno":
        # Scored candidates (docs/strength.md#uno: they learned where the 61-way masked head
        # did not); the masked head stays as `croupier.games.uno:UnoAdapter`.
        from croupier.games.uno import UnoCandidatesAdapter

        return UnoCandidatesAdapter()
    if name == "doudizhu":
        from croupier.games.doudizhu import SERVED_FEATURES, DoudizhuAdapter

        return DoudizhuAdapter(SERVED_FEATURES)
    if name == "vector":
        if obs_size is None or num_actions is None:
            raise ValueError("the vector game needs --obs-size and --num-actions")
        return VectorAdapter(obs_size, num_actions, num_players)
    if ":" in name:
        target = import_object(name)
        if isinstance(target, Simulator) or (
            isinstance(target, type) and issubclass(target, Simulator)
        ):
            return _load(target.adapter)  # one --game for the server and the arena
        adapter = target() if isinstance(target, type) else target
        if not isinstance(adapter, GameAdapter):
            raise TypeError(f"{name} is not a croupier GameAdapter")
        return adapter
    raise ValueError(f"unknown game {name!r}: one of {BUILT_IN} or 'package.module:Adapter'")


def import_object(path: str) -> Any:
    """`package.module:attribute` -> the attribute (a user's adapter or rules function)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'package.module:name', got {path!r}")
    return getattr(importlib.import_module(module_name), attr)


def load_rules(path: str) -> RulesFn:
    """A user's rule-based bot: a callable taking the engine's state, returning its action."""
    rules = import_object(path)
    if not callable(rules):
        raise TypeError(f"{path} is not callable")
    return rules


def load_simulator(game: str) -> Simulator:
    """A fresh table of `game`: a built-in game's name, `package.module:Simulator` (a class, or
    an instance whose class is used), or `package.module:Adapter` whose adapter names its
    simulator in `simulator` (`package.module:Simulator`). ValueError when there is none: a
    game played only by an engine in another language has no simulator (its evidence is the
    live games). Each call makes a new table: every concurrent table needs its own."""
    if ":" in game:
        try:
            target = import_object(game)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot import {game!r}: {e}") from None
        if isinstance(target, type) and issubclass(target, Simulator):
            return target()
        if isinstance(target, Simulator):
            return type(target)()
    try:
        adapter = load_adapter(game)
    except TypeError:
        raise ValueError(f"{game} is neither a croupier Simulator nor a GameAdapter") from None
    path = getattr(adapter, "simulator", None)
    if not isinstance(path, str) or ":" not in path:
        raise ValueError(
            f"the game {adapter.name!r} has no simulator: give its adapter a `simulator` "
            "attribute ('package.module:Simulator') or pass the simulator itself as --game"
        )
    simulator = import_object(path)
    table = simulator() if isinstance(simulator, type) else type(simulator)()
    if not isinstance(table, Simulator):
        raise ValueError(f"{path} (named by {game}) is not a croupier Simulator")
    return table
