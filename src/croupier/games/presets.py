"""Per-game training defaults, chosen by measurement (docs/strength.md), stored with the game.

A preset is plain data: what a trainer should use for this game unless the user overrides it.
`croupier train --game G` starts from `preset_for(G)` (`cli/training.py` `train_options`): the
algorithm, network, batch, learning rate, entropy and discount; every flag given overrides its
field.
A game without a preset trains `DEFAULT_ALGO` with its own defaults (`Hyper.defaults`).

A studio's game ships its own preset as its adapter's `preset` attribute (a `TrainingPreset`;
docs/adapter.md): `--game pkg.module:Adapter` (or its simulator) finds it there.

A preset is also a JSON file (`save_preset`, `load_preset`): what `croupier tune` writes and
`croupier train --preset FILE` and `bench strength --preset FILE` take in place of the game's.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
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
    # Several learned seats of one side: one role-conditioned policy ("shared") or one per
    # seat ("separate").
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
    # Two epochs a batch, not four: through the external path on a small machine the learner
    # shares the cores with the games, and a candidate update is most of the trainer's CPU
    # (forward and backward over every legal move); two passes leave more of the core to
    # playing. Declared through the card toolkit, from the clone, 30 min on one core each:
    # landlord 0.777 sampled / 0.810 greedy with 2 (1.15M decisions) where 4 had 0.720 /
    # 0.788 (0.90M); peasants 0.723 / 0.763 (2.09M) where 4 had 0.602 / 0.680 (1.84M)
    # (docs/strength.md).
    "doudizhu": TrainingPreset(
        algo="ppo",
        policy="candidates",
        hiddens=[256, 256],
        score_hidden=128,
        lr=5e-4,
        train_batch_size=4096,
        minibatch_size=512,
        num_epochs=2,
        evidence="docs/strength.md#doudizhu",
    ),
    # In-process UNO vs `uno-rule-v1` (docs/strength.md): scored candidates (each legal card
    # by colour and trait, and what the hand and the opponent's draws say of its colour) won
    # +0.103 +- 0.031 per game (greedy, 4,000 games) after 1.19M env steps / 15 min, where the
    # 61-way masked head stayed at -0.04 to -0.08 at 220k-590k steps. GAE lambda 0.95 and
    # gamma 0.99 from the masked runs (the best of them, within their CI). Two epochs a batch
    # (as doudizhu's, above): UNO declared through the card toolkit, 30 min from the clone on
    # one core, +0.101 sampled / +0.144 greedy with 2 (963k env steps) where 4 had +0.102 /
    # +0.090 (822k); with the history's recency (`uno_cards`) +0.177 / +0.171 (999k).
    "uno": TrainingPreset(
        algo="ppo",
        policy="candidates",
        hiddens=[256, 256],
        score_hidden=64,
        lr=5e-4,
        train_batch_size=4000,
        minibatch_size=500,
        num_epochs=2,
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


# --- a preset as a JSON file ---------------------------------------------------------------

ALGOS = ("ppo", "appo")
POLICIES = ("masked", "candidates")
TEAM_POLICIES = ("shared", "separate")  # as `experiments/strength_anchors.py` `peasant_policies`
# Keys a preset file may hold besides the preset's fields: the game it was found for, and how
# (`croupier tune`'s search: scheduler, trials, the score it won with); neither changes training.
FILE_KEYS = ("game", "found_by")
MAX_LAYERS = 16  # as the served module (`policies/module.py` refuses more, and wider layers)


class PresetError(ValueError):
    """A preset file that cannot be used: says which file, which field and what is expected."""


def _check(preset: TrainingPreset) -> None:
    """ValueError naming the first field out of range."""
    p = preset
    if p.algo not in ALGOS:
        raise ValueError(f"algo: one of {list(ALGOS)}, got {p.algo!r}")
    if p.policy not in POLICIES:
        raise ValueError(f"policy: one of {list(POLICIES)}, got {p.policy!r}")
    if p.team_policies not in TEAM_POLICIES:
        raise ValueError(f"team_policies: one of {list(TEAM_POLICIES)}, got {p.team_policies!r}")
    if not isinstance(p.hiddens, list) or not 1 <= len(p.hiddens) <= MAX_LAYERS:
        raise ValueError(f"hiddens: a list of 1 to {MAX_LAYERS} layer sizes, got {p.hiddens!r}")
    ints = {"score_hidden": p.score_hidden, "train_batch_size": p.train_batch_size,
            "minibatch_size": p.minibatch_size, "num_epochs": p.num_epochs}  # fmt: skip
    ints.update({f"hiddens[{i}]": h for i, h in enumerate(p.hiddens)})
    for name, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: a positive integer, got {value!r}")
    if p.minibatch_size > p.train_batch_size:
        raise ValueError(f"minibatch_size ({p.minibatch_size}) larger than train_batch_size "
                         f"({p.train_batch_size})")  # fmt: skip
    ranges = {"lr": (p.lr, 0.0, 1.0), "entropy_coeff": (p.entropy_coeff, 0.0, 1.0),
              "gamma": (p.gamma, 0.0, 1.0), "lambda_": (p.lambda_, 0.0, 1.0)}  # fmt: skip
    for name, (value, low, high) in ranges.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low <= value <= high:
            raise ValueError(f"{name}: a number in [{low:g}, {high:g}], got {value!r}")
    if p.lr == 0:
        raise ValueError("lr: a number in (0, 1], got 0")


def preset_from_dict(data: Any) -> TrainingPreset:
    """A preset from plain data (a preset file's object): ValueError on an unknown key, a
    missing `algo`/`policy`, a wrong type or a value out of range."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object of preset fields, got {type(data).__name__}")
    names = {f.name for f in fields(TrainingPreset)}
    unknown = sorted(set(data) - names - set(FILE_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; a preset has {sorted(names)}")
    missing = [k for k in ("algo", "policy") if k not in data]
    if missing:
        raise ValueError(f"missing {missing}")
    values = {k: v for k, v in data.items() if k in names}
    if isinstance(values.get("hiddens"), list):
        values["hiddens"] = list(values["hiddens"])
    for name in ("lr", "entropy_coeff", "gamma", "lambda_"):  # JSON may write 1 for 1.0
        if type(values.get(name)) is int:
            values[name] = float(values[name])
    preset = TrainingPreset(**values)
    _check(preset)
    return preset


def load_preset(path: Path, game: str | None = None) -> TrainingPreset:
    """The preset in the JSON file `path` (`croupier tune`'s output); PresetError, naming the
    file and what is wrong, if it is unreadable, not JSON, not a valid preset, or found for
    another game than `game` (when both say)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise PresetError(f"preset file {path}: cannot read it ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PresetError(f"preset file {path}: not JSON ({e})") from None
    try:
        preset = preset_from_dict(data)
    except (TypeError, ValueError) as e:
        raise PresetError(f"preset file {path}: {e}") from None
    found_for = data.get("game")
    if game is not None and found_for is not None and found_for != game:
        raise PresetError(f"preset file {path} was found for {found_for!r}, not {game!r}")
    return preset


def save_preset(
    preset: TrainingPreset, path: Path, game: str | None = None, found_by: Any = None
) -> Path:
    """Write `preset` as JSON (its fields, and the game and search that found it)."""
    _check(preset)
    data: dict[str, Any] = asdict(preset)
    if game is not None:
        data["game"] = game
    if found_by is not None:
        data["found_by"] = found_by
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=float) + "\n")
    return path
