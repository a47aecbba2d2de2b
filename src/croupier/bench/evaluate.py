"""Play a policy's weights against the rules in-process: the same yardstick for any run.

Both sides of `bench train` and `bench strength` are scored here (the anchor's module and the
external path's served versions), so neither gains from how it is evaluated. The number is
croupier's one strength score (`arena/duplicate.py`), the one `croupier eval` reports through
a server: duplicate sets on the simulator, A's payoff per hand less the deal's par.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from croupier.arena.duplicate import SCORE_MEANING, Hand, score_summary, set_outcome
from croupier.games.base import rules_seeded
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import Simulator, side_seats
from croupier.policies.learned import PolicyVersions, WeightsState
from croupier.policies.module import ModelSpec
from croupier.stats import Mean

MAX_STEPS_PER_HAND = 10_000
Act = Callable[[dict[str, Any]], Any]  # an engine state in, the engine's action value out


def policy_player(game: str, spec: ModelSpec, weights: WeightsState, explore: bool) -> Act:
    """The weights as a player: the state encoded as the server encodes it, one forward,
    sampled (or its most likely legal action with `explore=False`)."""
    adapter = load_adapter(game)
    versions = PolicyVersions(adapter, spec)
    versions.install(1, weights)
    _, module = versions.resolve(None)

    def act(state: dict[str, Any]) -> Any:
        obs, legal = adapter.encode(state)
        index = int(versions.act_rows(module, [obs], [legal], explore=explore).actions[0])
        return adapter.action_value(index, state)

    return act


def opponent_player(game: str, opponent: str, seed: int) -> Act:
    """`rules` (the game's rules bot) or `random` (uniform over the legal actions)."""
    import numpy as np

    adapter = load_adapter(game)
    if opponent == "rules":
        rules = adapter.rules()
        if rules is None:
            raise ValueError(f"{adapter.name} has no rules policy")
        return rules
    if opponent != "random":
        raise ValueError(f"opponent must be rules or random, got {opponent!r}")
    rng = np.random.default_rng(seed)

    def random_action(state: dict[str, Any]) -> Any:
        legal = adapter.legal_indices(adapter.check(state))
        return adapter.action_value(int(legal[rng.integers(len(legal))]), state)

    return random_action


def _play_hand(game: str, table: Any, deal: int, a: Act, b: Act, mine: list[int]) -> list[float]:
    """Play the hand `table` was reset to, A on the seats `mine` and B on the rest; every
    seat's payoff. The rule agents' own draws are seeded by the deal: alike in every hand
    played on it."""
    with rules_seeded(deal % 2**32):
        for _ in range(MAX_STEPS_PER_HAND):
            if table.is_over():
                break
            seat = table.current_player()
            table.step((a if seat in mine else b)(table.state(seat)))
        else:
            raise RuntimeError(f"a {game} hand took over {MAX_STEPS_PER_HAND} steps")
    return [float(p) for p in table.payoffs()]


def duplicate_score(game: str, a: Act, b: Act, hands: int, seed: int = 0,
                    table: Simulator | None = None) -> dict[str, Any]:  # fmt: skip
    """A against B over `hands` hands (whole duplicate sets) on the simulator (`table`, else
    a new one), scored by the strength score; also A's raw payoff per hand (a different
    number outside two-player zero-sum games: said beside it)."""
    table = table if table is not None else load_simulator(game)
    table.reset(seed * 1_000_003)
    per_set = max(1, len(table.teams()))
    values: list[float] = []
    payoff = Mean()
    wins = 0
    for k in range(math.ceil(hands / per_set)):
        deal = seed * 1_000_003 + k
        table.reset(deal)
        teams = table.teams()
        played: list[Hand] = []
        for i, mine in enumerate(teams):
            if i:
                table.reset(deal)  # the same cards, A on the next team's seats
            payoffs = _play_hand(game, table, deal, a, b, mine)
            played.append((mine, [t for t in teams if t is not mine], payoffs))
            payoff.add(sum(payoffs[s] for s in mine) / len(mine))
        outcome = set_outcome(played)
        values.append(outcome.value)
        wins += outcome.wins
    mean, half_width = score_summary(values)
    n = len(values) * per_set
    return {
        "n": n,  # hands
        "sets": len(values),
        "mean": mean,  # the strength score
        "ci95": half_width,
        "score": SCORE_MEANING,
        "payoff": payoff.mean,  # A's raw payoff per hand
        "payoff_ci95": payoff.to_dict()["ci95"],
        "win": wins / n if n else float("nan"),
    }


def side_score(game: str, a: Act, b: Act, hands: int, side: str, seed: int = 0,
               table: Simulator | None = None) -> dict[str, Any]:  # fmt: skip
    """A on every seat of one side (`Simulator.roles`: doudizhu's "peasant") against B on the
    rest, `hands` deals (on `table`, else a new one): A's win rate (its team scored more than
    the other teams' mean, as `set_outcome` counts a win) and raw payoff per hand, each with a
    95% CI over hands. No par: a side played alone has none (B never plays it), so this is a
    payoff against a fixed opponent, read beside another A's on the same deals (the same
    `seed`)."""
    table = table if table is not None else load_simulator(game)
    win, payoff = Mean(), Mean()
    for k in range(hands):
        deal = seed * 1_000_003 + k
        table.reset(deal)
        mine = side_seats(table, side)
        payoffs = _play_hand(game, table, deal, a, b, mine)
        ours = sum(payoffs[s] for s in mine) / len(mine)
        rest = [p for s, p in enumerate(payoffs) if s not in mine]
        win.add(float(ours > sum(rest) / len(rest)) if rest else 0.0)
        payoff.add(ours)
    return {
        "n": hands,
        "side": side,
        "win": win.mean,
        "win_ci95": win.to_dict()["ci95"],
        "payoff": payoff.mean,
        "payoff_ci95": payoff.to_dict()["ci95"],
    }


def payoff_vs(
    game: str,
    spec: ModelSpec,
    weights: WeightsState,
    hands: int,
    opponent: str = "rules",
    seed: int = 0,
    explore: bool = True,
) -> dict[str, Any]:
    """The weights' strength score against `opponent` (rules or random) over `hands` hands,
    sampled or greedy (`explore=False`), with a 95% CI; and its raw payoff per hand."""
    a = policy_player(game, spec, weights, explore)
    return duplicate_score(game, a, opponent_player(game, opponent, seed), hands, seed)


def rules_record(game: str, hands: int, seed: int = 0) -> dict[str, Any]:
    """The rules' own record, drawn from the game: the rules in A's seats against the rules,
    on the same deals the versions are scored on. Its strength score is 0 by construction
    (measured: the yardstick's check); its raw payoff per hand is what the rules score
    against themselves, not 0 in a game that is not zero-sum."""
    rules = opponent_player(game, "rules", seed)
    return duplicate_score(game, rules, rules, hands, seed)
