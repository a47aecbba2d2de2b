"""Seat policies as distributions over a state's legal actions (`games/tree.py`
`StatePolicy`): what exact measurement (`arena/exploitability.py`) asks of a policy, and what
an in-process opponent samples from (`croupier bench exploit`).

A policy is named as the arena names one, resolved here against a weights directory instead
of a server:

- `rules`, `random`: the game's rule-based bot (one action, probability 1), uniform;
- `frozen@N`, `learned@latest` (the newest version in the directory): a version as a server
  serves it, its softmax over the legal actions' masked logits (what a seat samples);
  `:greedy` after either: its most likely legal action, as a `:greedy` seat plays;
- `equilibrium`: CFR+ on the game's whole tree (`games/cfr.py` `equilibrium`);
- `table:PATH`: a strategy table written by `croupier bench equilibrium --out PATH`;
- `package.module:function`: a function of the state returning an action, or a
  {action: probability} distribution.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from croupier.games.base import GameAdapter
from croupier.games.registry import import_object, load_adapter, load_simulator
from croupier.games.tree import Distribution, StatePolicy, state_key
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.policies.weights_file import WeightsState, read_weights, weights_path

# Distributions an in-process opponent remembers by state (Leduc has 1,872 distinct states;
# a model's forward costs ~50 us where a lookup costs ~3 us); bounded for larger games.
SAMPLER_CACHE = 100_000


class UnknownPolicy(ValueError):
    """A policy name this module cannot resolve (the CLI says so in one line)."""


def uniform(states: Sequence[dict[str, Any]]) -> list[Distribution]:
    out = []
    for state in states:
        legal = list(dict.fromkeys(state["legal_actions"]))  # UNO may list a card twice
        out.append({a: 1.0 / len(legal) for a in legal})
    return out


def from_function(act: Callable[[dict[str, Any]], Any]) -> StatePolicy:
    """A rules-like function as a policy: its action with probability 1, or the
    distribution it returns."""

    def policy(states: Sequence[dict[str, Any]]) -> list[Distribution]:
        out: list[Distribution] = []
        for state in states:
            answer = act(state)
            out.append(dict(answer) if isinstance(answer, dict) else {answer: 1.0})
        return out

    return policy


def from_module(
    adapter: GameAdapter, spec: ModelSpec, weights: WeightsState, greedy: bool = False
) -> StatePolicy:
    """A version's weights served through `adapter`: per state, the softmax of its masked
    logits over the legal actions (as a seat samples), or its most likely one (`greedy`)."""
    versions = PolicyVersions(adapter, spec)
    versions.install(1, weights)
    return version_policy(adapter, versions, 1, greedy)


def version_policy(
    adapter: GameAdapter, versions: PolicyVersions, version: int, greedy: bool = False
) -> StatePolicy:
    """Version `version` of `versions` (a server's, or `from_module`'s own) as a policy."""
    _, module = versions.resolve(version)

    def policy(states: Sequence[dict[str, Any]]) -> list[Distribution]:
        if not states:
            return []
        encoded = [adapter.encode(state) for state in states]
        act = versions.act_rows(
            module, [o for o, _ in encoded], [m for _, m in encoded], explore=False
        )
        out: list[Distribution] = []
        for state, (_, mask), logits in zip(states, encoded, act.logits, strict=True):
            legal = adapter.legal_indices(mask)
            row = np.asarray(logits, np.float64)[legal]
            if greedy:
                probs = np.zeros(len(legal))
                probs[int(np.argmax(row))] = 1.0
            else:
                probs = np.exp(row - row.max())
                probs /= probs.sum()
            dist: Distribution = {}
            for index, p in zip(legal.tolist(), probs.tolist(), strict=True):
                value = adapter.action_value(index, state)
                dist[value] = dist.get(value, 0.0) + p
            out.append(dist)
        return out

    return policy


def read_version(weights_dir: Path, version: int | None) -> tuple[int, ModelSpec, WeightsState]:
    """Version `version` (None: the newest, as latest.json names it) of a weights directory a
    server or trainer wrote: (version, network, weights)."""
    try:
        meta = json.loads((weights_dir / "latest.json").read_text())
        spec = ModelSpec.from_dict(meta["spec"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UnknownPolicy(f"{weights_dir}: no readable latest.json ({e})") from None
    version = int(meta["version"]) if version is None else version
    path = weights_path(weights_dir, version)
    if not path.exists():
        raise UnknownPolicy(f"version {version} is not in {weights_dir}")
    return version, spec, read_weights(path)


def table_policy(game: str, table: dict[str, Distribution]) -> StatePolicy:
    """A strategy table keyed by the game's information labels (`Simulator.information`)."""
    simulator = load_simulator(game)

    def policy(states: Sequence[dict[str, Any]]) -> list[Distribution]:
        out = []
        for state in states:
            label = simulator.information(state)
            if label not in table:
                raise UnknownPolicy(f"the table has no entry for {label!r}")
            out.append(dict(table[label]))
        return out

    return policy


def load_policy(name: str, game: str, weights_dir: Path | None = None) -> tuple[StatePolicy, str]:
    """`name` (see the module doc) as a policy of `game`, and what it resolved to (e.g.
    `frozen@78:greedy` for `learned@latest:greedy`)."""
    name = name.strip()
    base, sep, mode = name.rpartition(":")
    greedy = bool(sep) and mode == "greedy"
    if not greedy:
        base = name
    if base in ("rules", "random", "equilibrium") and greedy:
        raise UnknownPolicy(f"{name!r}: only a learned version can be :greedy")
    if base == "random":
        return uniform, "random"
    if base == "rules":
        rules = load_adapter(game).rules()
        if rules is None:
            raise UnknownPolicy(f"{game} has no rules policy")
        return from_function(rules), "rules"
    if base == "equilibrium":
        from croupier.games.cfr import equilibrium

        return table_policy(game, equilibrium(game)), "equilibrium"
    if base.startswith("table:"):
        path = Path(base.removeprefix("table:"))
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UnknownPolicy(f"{path}: {e}") from None
        return table_policy(game, data.get("strategy", data)), base
    kind, at, arg = base.partition("@")
    if at and kind in ("frozen", "learned"):
        if weights_dir is None:
            raise UnknownPolicy(f"{name!r} needs --weights-dir (the versions' files)")
        if kind == "learned" and arg != "latest":
            raise UnknownPolicy(f"{name!r}: learned@latest, or frozen@N for a version")
        try:
            wanted = None if arg == "latest" else int(arg)
        except ValueError:
            raise UnknownPolicy(f"{name!r}: frozen@ needs a version number") from None
        version, spec, weights = read_version(weights_dir, wanted)
        policy = from_module(load_adapter(game), spec, weights, greedy)
        return policy, f"frozen@{version}{':greedy' if greedy else ''}"
    if ":" in name and "." in name.partition(":")[0]:
        try:
            act = import_object(name)
        except (ImportError, AttributeError, ValueError) as e:
            raise UnknownPolicy(f"cannot import {name!r}: {e}") from None
        if not callable(act):
            raise UnknownPolicy(f"{name} is not callable")
        return from_function(act), name
    raise UnknownPolicy(
        f"unknown policy {name!r}: rules, random, frozen@N, learned@latest (either may end in "
        ":greedy), equilibrium, table:PATH or package.module:function"
    )


def sampler(policy: StatePolicy, seed: int | None = None) -> Callable[[dict[str, Any]], Any]:
    """A policy as a rules-like function: an action drawn from its distribution for the
    state (distributions remembered by state, up to `SAMPLER_CACHE`)."""
    rng = np.random.default_rng(seed)
    cache: dict[str, tuple[list[Any], np.ndarray]] = {}

    def act(state: dict[str, Any]) -> Any:
        key = state_key(state)
        hit = cache.get(key)
        if hit is None:
            dist = policy([state])[0]
            hit = (list(dist), np.cumsum(list(dist.values())))
            if len(cache) < SAMPLER_CACHE:
                cache[key] = hit
        actions, cumulative = hit
        index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
        return actions[min(index, len(actions) - 1)]

    return act


def opponent(
    game: str, policy: str, weights_dir: str | None = None, seed: int | None = None
) -> Any:
    """A seat env's opponent (`engine/seat_env.py`, named by import path there): `policy`
    (see `load_policy`) of `game`, sampled."""
    resolved, _ = load_policy(policy, game, Path(weights_dir) if weights_dir else None)
    return sampler(resolved, seed)
