"""Durable file replacement: the one way croupier writes a file that something else names or
reads after a crash (weights, checkpoints' markers, ratings).

Written to a temporary name beside the target, fsynced, renamed over the target, and the
directory fsynced: a crash leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomic(
    path: Path, data: bytes | str | Callable[[BinaryIO], None], tmp: Path | None = None
) -> None:
    """Replace `path` with `data` (bytes, text as UTF-8, or a function writing to the open
    binary file) durably. `tmp`: the temporary name (default `path` + `.tmp`, same folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp if tmp is not None else path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (POSIX: the directory entry is data of its own)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without directory fds: the rename is as durable as it gets
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
