"""Where a training run starts from, and how it is saved: the checkpoint written beside and
swapped in (a swap a crash split is finished on the next start), the shapes of its weights
beside it (a restart with another model refused by name), a pretrain's module as a start, and
the versions published after the last checkpoint (gone on from, under their own numbers).

The trainer's life in order is `trainer/run.py`; these are its steps on the learner's state.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from croupier.files import owner_only
from croupier.trainer.rules_anchor import sync_target_networks

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"
# Beside each checkpoint: the shape of every weight of the learner's module, so that a restart
# with another model (a feature added by a newer croupier, another --hiddens) is refused by
# name instead of by torch's size-mismatch traceback from inside RLlib's restore.
MODULE_SHAPES = "croupier-module-shapes.json"


class StartRefused(ValueError):
    """What the checkpoint dir (or `--init-weights`) holds does not fit the model this run
    builds: said in one line, before anything is trained or served."""


def recover_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The checkpoint to resume from, if any. `save_checkpoint` swaps with two renames
    (checkpoint -> .old, .tmp -> checkpoint); a kill between them leaves no `checkpoint` but a
    complete `.tmp` (and the previous one as `.old`): finish the swap."""
    target = checkpoint_dir / CHECKPOINT
    if target.exists():
        return target
    old, tmp = target.with_name(CHECKPOINT + ".old"), target.with_name(CHECKPOINT + ".tmp")
    if not old.exists():
        return None  # never checkpointed (a lone .tmp is a save that did not finish)
    (tmp if tmp.exists() else old).rename(target)
    log.warning("finished an interrupted checkpoint swap in %s", checkpoint_dir)
    return target


def save_checkpoint(
    algo: Any, checkpoint_dir: Path, before_swap: Callable[[], None] | None = None
) -> Path:
    """Save atomically: write beside, then swap, so a crash never leaves half a checkpoint.
    `before_swap` writes what must be on disk before the new checkpoint is (the anchor's
    clock)."""
    target = Path(checkpoint_dir).resolve() / CHECKPOINT
    tmp = target.with_name(CHECKPOINT + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(str(tmp))
    (tmp / MODULE_SHAPES).write_text(json.dumps(module_shapes(algo)))
    owner_only(tmp)  # RLlib writes with the umask's modes (0644): 0600, folders 0700
    if before_swap is not None:
        before_swap()
    old = target.with_name(CHECKPOINT + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def module_shapes(algo: Any) -> dict[str, list[int]]:
    """Each weight of the learner's module(s) by name, and its shape."""
    weights = algo.learner_group.get_weights()
    return {
        f"{module_id}/{name}": [int(n) for n in np.shape(value)]
        for module_id, params in weights.items()
        for name, value in params.items()
    }


def check_shapes(algo: Any, checkpoint: Path) -> None:
    """Refuse a checkpoint whose weights do not fit this run's module (a checkpoint
    written before its shapes were recorded is left to RLlib's restore)."""
    path = checkpoint / MODULE_SHAPES
    if not path.exists():
        return
    saved = json.loads(path.read_text())
    here = module_shapes(algo)
    differ = [k for k in sorted(saved) if k in here and saved[k] != here[k]]
    if not differ:
        return
    first = ", ".join(f"{k} {saved[k]} there, {here[k]} here" for k in differ[:2])
    raise StartRefused(
        f"the checkpoint in {checkpoint.parent} holds another model than this run builds "
        f"({len(differ)} weights differ in shape: {first}): the game's features or the "
        "network changed since it was written (a newer croupier may add feature columns: "
        "CHANGELOG.md). Start in a fresh --checkpoint-dir (it starts from the rules' "
        "clone), or run with the settings and croupier version that wrote it."
    )


def _set_learner(algo: Any, weights: Any, version: int) -> None:
    """The learner's module weights (policy and value heads) and their version number."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    group = algo.learner_group
    group.set_state(
        {
            COMPONENT_LEARNER: {
                COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: weights},
                WEIGHTS_SEQ_NO: version,
            }
        }
    )
    group.foreach_learner(sync_target_networks)


def start_from_pretrain(algo: Any, init_dir: Path, spec: Any) -> Any:
    """Load a pretrain's full module (policy and value heads) into the learner(s) and keep
    its version number (the trainer then hands it to the runners, which push it to servers).
    Returns its weights."""
    from croupier.trainer.pretrain import read_init_weights

    init_spec, weights, version = read_init_weights(init_dir)
    if init_spec.to_dict() != spec.to_dict():
        raise StartRefused(
            f"{init_dir} holds a {init_spec.to_dict()} model; this run trains "
            f"{spec.to_dict()} (pretrain with the same --algo and --hiddens)"
        )
    _set_learner(algo, weights, version)
    log.info("starting from %s (version %d)", init_dir, version)
    return weights


def continue_from_published(
    algo: Any, checkpoint_dir: Path, published: int
) -> tuple[dict[str, Any], bool]:
    """A trainer killed after its last checkpoint (or before its first) had pushed newer
    versions than the checkpoint holds. Go on from the newest published weights, under
    their own number (the policy from them, the value function and optimizer from the
    checkpoint), so that a number always names the same weights and `latest` never
    falls back in quality. If they cannot be read, go on from the checkpoint numbered
    past them, and say so loudly. Returns what was restored (versions, whose weights) and
    whether the learner's state was changed."""
    from ray.rllib.core import COMPONENT_LEARNER
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    from croupier.trainer.published import read_published_weights

    group = algo.learner_group
    restored_state = group.get_state(components=COMPONENT_LEARNER)
    seq = int(restored_state.get(COMPONENT_LEARNER, {}).get(WEIGHTS_SEQ_NO, 0))
    restored: dict[str, Any] = {"checkpoint_version": seq, "published_version": published}
    if published <= seq:
        restored["version"], restored["weights"] = seq, "checkpoint"
        return restored, False
    found = read_published_weights(Path(checkpoint_dir))
    if found is not None and found[0] == published:
        _set_learner(algo, found[1], published)
        restored["version"], restored["weights"] = published, "published"
        log.info("checkpoint at version %d; version %d was published after it: going on "
                 "from its weights", seq, published)  # fmt: skip
        return restored, True
    group.set_state({COMPONENT_LEARNER: {WEIGHTS_SEQ_NO: published + 1}})
    restored["version"], restored["weights"] = published + 1, "checkpoint"
    log.warning(
        "RESTORED OLDER WEIGHTS: the checkpoint holds version %d, servers were given up to "
        "version %d, whose weights are not in %s. Going on from the checkpoint's weights as "
        "version %d: servers will install them, a step back in quality until training "
        "catches up (roll back with the production channel if that matters).",
        seq, published, checkpoint_dir, published + 1,
    )  # fmt: skip
    return restored, True
