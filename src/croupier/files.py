"""Durable file replacement: the one way croupier writes a file that something else names or
reads after a crash (weights, checkpoints' markers, ratings).

Written to a temporary name beside the target, fsynced, renamed over the target, and the
directory fsynced: a crash leaves the old file or the new one, never half of one.

And owner-only folders (`private_dir`, `owner_only`): where the trainer keeps what only its own
user should read (checkpoints: weights, optimizer state, the run's settings).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)


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


def private_dir(path: Path) -> Path:
    """`path` as a folder only its owner can open (0700): made so, or narrowed if it exists
    with more (said in the log). Its parents are left as they are."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode != 0o700:
        path.chmod(0o700)
        log.info("%s was mode %o: narrowed to 700 (only its owner may read it)", path, mode)
    return path


def owner_only(root: Path) -> None:
    """Every folder under `root` (itself included) 0700 and every file 0600: what RLlib writes
    a checkpoint with is the process umask's (usually 0644, readable by every user). Links are
    left alone (chmod would follow them out of `root`)."""
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o700)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)
