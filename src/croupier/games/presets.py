"""Per-game training defaults, chosen by measurement (docs/strength.md), stored with the game.

A preset is plain data: what a trainer should use for this game unless the user overrides it.
Not wired to the CLI yet (the settings are being restructured); `preset_for(name)` is what the
trainer's settings should read as their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TrainingPreset:
    algo: str  # "ppo" | "appo"
    policy: str  # "masked" (fixed action head) | "candidates" (scored candidate actions)
    hiddens: list[int] = field(default_factory=lambda: [128, 128])
    score_hidden: int = 64  # candidate scorer width (candidates only)
    history: int = 0  # last moves in the state features (games with a move history)
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
    # In-process doudizhu, landlord vs rule peasants (docs/strength.md): 128x128 state MLP,
    # 64-wide scorer, Adam 1e-3 over 1,024-decision batches beat 256x256 / 3e-4 / 4,096 by far
    # per decision and per second on 2 cores.
    "doudizhu": TrainingPreset(
        algo="ppo",
        policy="candidates",
        evidence="docs/strength.md#doudizhu",
    ),
}


def preset_for(game: str) -> TrainingPreset | None:
    """The measured defaults for a built-in game, or None (use the trainer's own)."""
    return PRESETS.get(game)
