"""Play a policy's weights against the rules in-process: the same yardstick for any run.

Both sides of `bench train` are scored here (the anchor's module and the external path's last
served version), so neither gains from how it is evaluated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.engine.seat_env import SeatEnv
from croupier.policies.learned import PolicyVersions, WeightsState
from croupier.policies.module import ModelSpec
from croupier.stats import ci95

MAX_STEPS_PER_HAND = 10_000


def payoff_vs(
    game: str,
    spec: ModelSpec,
    weights: WeightsState,
    hands: int,
    opponent: str = "rules",
    seed: int = 0,
    explore: bool = True,
) -> dict[str, Any]:
    """Mean payoff per hand (seats random) with a 95% CI half-width; actions sampled from the
    policy, or its most likely legal action with `explore=False` (greedy)."""
    env = SeatEnv({"game": game, "opponent": opponent, "seed": seed})
    versions = PolicyVersions(env.adapter, spec)
    versions.install(1, weights)
    _, module = versions.resolve(None)
    payoffs = []
    for _ in range(hands):
        env.reset()
        for _ in range(MAX_STEPS_PER_HAND):
            obs, legal = env.encoded
            act = versions.act_rows(module, [obs], [legal], explore=explore)
            _, reward, terminated, _, _ = env.step(int(act.actions[0]))
            if terminated:
                payoffs.append(reward)
                break
    # Hands the opponent ended before the learner acted count too, at what they paid.
    payoffs += env.skipped_payoffs
    x = np.asarray(payoffs)
    return {
        "n": int(x.size),
        "mean": float(x.mean()),
        "ci95": float(ci95(float(x.std(ddof=1)), int(x.size))),
    }


def rules_record(game: str, hands: int, seed: int = 0, role: str | None = None) -> dict[str, Any]:
    """The rules' own record: the rules in the learned seat's place against the rules, as
    `payoff_vs` measures a policy (the same deals and seats for the same `seed`): what a
    learned policy is held to. Not assumed 0: a game that is not zero-sum (or whose seats
    differ) has its own. `role` (a game with named sides, e.g. doudizhu's "landlord"): the
    mean payoff of that side's seats instead, over `hands` deals of the game's simulator."""
    from croupier.games.base import rules_seeded

    if role is not None:
        return _side_record(game, hands, seed, role)
    env = SeatEnv({"game": game, "opponent": "rules", "seed": seed})
    rules = env.adapter.rules()
    payoffs = []
    with rules_seeded(seed):  # a rules bot's own draws (UNO's): the same record every time
        for _ in range(hands):
            env.reset()
            for _ in range(MAX_STEPS_PER_HAND):
                state = env.state
                action = env.adapter.action_index(rules(state), state)
                _, reward, terminated, _, _ = env.step(action)
                if terminated:
                    payoffs.append(reward)
                    break
    payoffs += env.skipped_payoffs
    return _summary(payoffs)


def _side_record(game: str, hands: int, seed: int, role: str) -> dict[str, Any]:
    from croupier.games.base import rules_seeded
    from croupier.games.registry import load_adapter, load_simulator

    table, rules = load_simulator(game), load_adapter(game).rules()
    rng = np.random.default_rng(seed)
    payoffs = []
    with rules_seeded(seed):
        for _ in range(hands):
            table.reset(int(rng.integers(2**31)))
            roles = table.roles() or []
            for _ in range(MAX_STEPS_PER_HAND):
                if table.is_over():
                    break
                table.step(rules(table.state(table.current_player())))
            side = [p for p, r in zip(table.payoffs(), roles, strict=False) if r == role]
            if not side:
                raise ValueError(f"no seat plays {role!r} in {game} (roles: {roles})")
            payoffs.append(sum(side) / len(side))
    return _summary(payoffs)


def _summary(payoffs: list[float]) -> dict[str, Any]:
    x = np.asarray(payoffs, float)
    return {
        "n": int(x.size),
        "mean": float(x.mean()),
        "ci95": float(ci95(float(x.std(ddof=1)), int(x.size))),
    }
