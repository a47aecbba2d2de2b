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
