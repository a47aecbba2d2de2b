"""Weights files on disk: npz (never pickle), written durably, read back with every check.

A file is complete and finite before anything points at it: written to a temporary name,
fsynced, renamed, and the directory fsynced, so a crash leaves either the old file or the new
one, never a name that leads to half a file. Reading turns every way a file can be bad (cut
short, not a zip, a zip with a torn member, NaN or inf in it) into one `UnreadableWeights`,
so a caller can fall back to an older version instead of failing to start.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from croupier.files import write_atomic

WeightsState = dict[str, np.ndarray]


class UnreadableWeights(ValueError):
    """A weights file that is missing, damaged, or holds values a policy must not serve."""


def weights_path(folder: Path, version: int) -> Path:
    """The one name of version `version`'s weights file in `folder`."""
    return folder / f"v{version:08d}.npz"


def version_of(path: Path) -> int | None:
    """The version a weights file name stands for (None: not a weights file name)."""
    stem = path.name.removesuffix(".npz")
    if path.name == stem or not stem.startswith("v") or not stem[1:].isdigit():
        return None
    return int(stem[1:])


def nonfinite(weights: dict[str, Any]) -> list[str]:
    """The names of arrays holding NaN or inf (or something that is not numbers at all): a
    diverged run's weights make every logit NaN, and an argmax over NaN picks index 0,
    legal or not."""
    bad = []
    for name, value in weights.items():
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            bad.append(name)
            continue
        if array.dtype.kind not in "biuf" or (
            array.dtype.kind == "f" and not np.isfinite(array).all()
        ):
            bad.append(name)
    return bad


def write_weights(path: Path, weights: WeightsState) -> None:
    """Write `weights` as `path`, durably (see the module's docstring)."""
    tmp = path.with_name(path.name.removesuffix(".npz") + ".tmp.npz")
    write_atomic(path, lambda f: np.savez(f, **weights), tmp=tmp)


def write_json(path: Path, data: Any) -> None:
    """Write `data` as JSON at `path`, durably: what it names is on disk before it is."""
    write_atomic(path, json.dumps(data))


def read_weights(path: Path) -> WeightsState:
    """The arrays in a weights file, all finite; `UnreadableWeights` for anything else."""
    try:
        with np.load(path, allow_pickle=False) as data:
            weights = {k: data[k] for k in data.files}
    # np.load's ways to fail on damage: a file cut short (EOFError, BadZipFile), a member
    # with a bad CRC (BadZipFile) or torn compression (zlib.error), not an npz (ValueError).
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise UnreadableWeights(f"{path.name}: {type(e).__name__}: {e}") from None
    bad = nonfinite(weights)
    if bad:
        raise UnreadableWeights(f"{path.name}: non-finite values in {bad[:3]}")
    return weights
