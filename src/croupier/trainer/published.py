"""The weights versions a trainer has published, noted beside its checkpoint.

Each runner notes the highest version it ever sent to servers (`published-<i>`) with its
weights (`published-<i>.npz`): a trainer restarted from an older checkpoint goes on from these
weights under their own number, so a version number never names two different sets of weights,
and a server's `latest` never falls back in quality.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from croupier.files import write_atomic

log = logging.getLogger(__name__)

_SEQ_KEY = "__weights_seq_no__"  # in published-<i>.npz: the version of the weights beside it


def note_published(state_dir: Path, worker_index: int, seq: int, weights: dict[str, Any]) -> None:
    """Note version `seq` and its weights for runner `worker_index` (the caller notes only
    versions higher than any it noted). A failed write is logged, never raised: the push to
    servers goes on."""
    base = state_dir / f"published-{worker_index}"
    try:
        # The weights first: a number on disk always has its weights, or older ones.
        arrays = {k: np.asarray(v) for k, v in weights.items()}
        arrays[_SEQ_KEY] = np.asarray(seq, dtype=np.int64)
        write_atomic(
            base.with_name(base.name + ".npz"),
            lambda f: np.savez(f, **arrays),
            tmp=base.with_name(base.name + ".tmp.npz"),
        )
        write_atomic(base, str(seq), tmp=base.with_suffix(".tmp"))
    except OSError as e:
        log.warning("could not note the published version in %s: %s", base, e)


def published_version(state_dir: Path) -> int:
    """The highest weights version any runner of a trainer using `state_dir` has published."""
    highest = 0
    for path in state_dir.glob("published-*"):
        if path.suffix in (".tmp", ".npz"):
            continue
        try:
            highest = max(highest, int(path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return highest


def read_published_weights(state_dir: Path) -> tuple[int, dict[str, np.ndarray]] | None:
    """The newest published weights noted in `state_dir` (any runner's): (version, the
    inference module's state), or None if there are none that load. Never unpickles."""
    best: tuple[int, dict[str, np.ndarray]] | None = None
    for path in state_dir.glob("published-*.npz"):
        if path.name.endswith(".tmp.npz"):
            continue
        try:
            with np.load(path, allow_pickle=False) as data:
                seq = int(data[_SEQ_KEY])
                if best is None or seq > best[0]:
                    best = (seq, {k: data[k] for k in data.files if k != _SEQ_KEY})
        except (OSError, ValueError, KeyError) as e:
            log.warning("ignoring unreadable published weights %s: %s", path, e)
    return best
