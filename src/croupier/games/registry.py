"""Find a game's adapter by name: built-in, or a user's class named by import path."""

from __future__ import annotations

import importlib
from typing import Any

from croupier.games.base import GameAdapter, RulesFn
from croupier.games.vector import VectorAdapter

BUILT_IN = ("leduc-holdem", "uno", "doudizhu", "vector")


def load_adapter(
    name: str,
    *,
    obs_size: int | None = None,
    num_actions: int | None = None,
    num_players: int = 2,
) -> GameAdapter:
    """`leduc-holdem`, `uno`, `doudizhu`, `vector` (sizes required) or
    `package.module:AdapterClass`; a game of scored candidate actions comes wrapped as it is
    served and trained (`games.candidates.served`)."""
    from croupier.games.candidates import served

    return served(_load(name, obs_size=obs_size, num_actions=num_actions, num_players=num_players))


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
        from croupier.games.uno import UnoAdapter

        return UnoAdapter()
    if name == "doudizhu":
        from croupier.games.doudizhu import DoudizhuAdapter, FeatureSpec
        from croupier.games.presets import preset_for

        # The preset's features (measured: the last 15 moves did not help), so that every
        # server and trainer of `doudizhu` agrees on them.
        preset = preset_for("doudizhu")
        return DoudizhuAdapter(FeatureSpec(history=preset.history if preset else 0))
    if name == "vector":
        if obs_size is None or num_actions is None:
            raise ValueError("the vector game needs --obs-size and --num-actions")
        return VectorAdapter(obs_size, num_actions, num_players)
    if ":" in name:
        target = import_object(name)
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
