"""Per-game training defaults, chosen by measurement (docs/strength.md), stored with the game.

A preset is plain data: what a trainer should use for this game unless the user overrides it.
`croupier train --game G` starts from `preset_for(G)` (cli.py `train_options`): the algorithm,
network, batch, learning rate, entropy and discount; every flag given overrides its field.
A game without a preset trains `DEFAULT_ALGO` with its own defaults (`Hyper.defaults`).

A studio's game ships its own preset as its adapter's `preset` attribute (a `TrainingPreset`;
docs/your-game.md): `--game pkg.module:Adapter` (or its simulator) finds it there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The algorithm a game without a preset trains, everywhere (`croupier train`, `bench
# strength`, `pretrain`, a server's model before any trainer): PPO. On leduc through the
# external path it passed +1.0 a hand against the rules at ~50k steps where APPO (V-trace,
# one gradient step per train batch in RLlib 2.60) was at -0.4 to +0.4 (docs/training.md), and
# every preset measured so far is PPO. APPO stays one flag away (`--algo appo`) for fleets
# whose episodes lag many versions behind.
DEFAULT_ALGO = "ppo"


@dataclass(frozen=True)
class TrainingPreset:
    algo: str  # "ppo" | "appo"
    policy: str  # "masked" (fixed action head) | "candidates" (scored candidate actions)
    hiddens: list[int] = field(default_factory=lambda: [128, 128])
    score_hidden: int = 64  # candidate scorer width (candidates only)
    lr: float = 1e-3
    entropy_coeff: float = 0.01
    train_batch_size: int = 1024  # decisions per update
    minibatch_size: int = 256
    num_epochs: int = 4
    gamma: float = 1.0
    lambda_: float = 0.95
    # Several learned seats of one side: one role-conditioned policy or one per seat.
    team_policies: str = "shared"
    evidence: str = ""  # where the measurement behind it is written down


PRESETS: dict[str, TrainingPreset] = {
    # Doudizhu vs the rules (docs/strength.md): the larger network learns faster per decision
    # (in-process peasants: 0.71 greedy at 377k decisions where 128x128 / 64 / Adam 1e-3 /
    # 1,024 a batch had 0.59 at 401k) and ends at least as high (60-minute in-process anchors:
    # peasants 0.723 vs 0.715, landlord 0.831 vs 0.820, greedy); the external path, which
    # makes fewer decisions than the in-process anchor, met both targets with it (landlord
    # 0.846, peasants 0.752 greedy, 60 min each). Its cost: a served forward +9% (one row) to
    # +47% (32 rows). One shared policy for both peasants beat one per seat past ~60k
    # decisions (one seed each). The features (no history, move context) are the game's:
    # `games/doudizhu.py` `SERVED_FEATURES`.
    "doudizhu": TrainingPreset(
        algo="ppo",
        policy="candidates",
        hiddens=[256, 256],
        score_hidden=128,
        lr=5e-4,
        train_batch_size=4096,
        minibatch_size=512,
        evidence="docs/strength.md#doudizhu",
    ),
    # In-process UNO vs `uno-rule-v1` (docs/strength.md): scored candidates (each legal card
    # by colour and trait, and what the hand and the opponent's draws say of its colour) won
    # +0.103 +- 0.031 per game (greedy, 4,000 games) after 1.19M env steps / 15 min, where the
    # 61-way masked head stayed at -0.04 to -0.08 at 220k-590k steps. GAE lambda 0.95 and
    # gamma 0.99 from the masked runs (the best of them, within their CI).
    "uno": TrainingPreset(
        algo="ppo",
        policy="candidates",
        hiddens=[256, 256],
        score_hidden=64,
        lr=5e-4,
        train_batch_size=4000,
        minibatch_size=500,
        num_epochs=4,
        entropy_coeff=0.01,
        gamma=0.99,
        lambda_=0.95,
        evidence="docs/strength.md#uno",
    ),
}


def preset_for(game: str) -> TrainingPreset | None:
    """The measured defaults for a built-in game, the `preset` a studio's adapter ships (its
    `--game pkg.module:Adapter`, or a simulator naming that adapter), or None."""
    if game in PRESETS:
        return PRESETS[game]
    if ":" not in game:
        return None
    from croupier.games.registry import import_object

    target: Any = import_object(game)
    adapter_path = getattr(target, "adapter", None)
    if isinstance(adapter_path, str):  # a simulator names its adapter
        return preset_for(adapter_path)
    preset = getattr(target, "preset", None)
    if preset is not None and not isinstance(preset, TrainingPreset):
        raise TypeError(f"{game}.preset must be a croupier.games.presets.TrainingPreset")
    return preset
