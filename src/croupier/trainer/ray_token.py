"""Ray's cluster token, kept owner-only.

Ray 2.60 turns its token authentication on for a new local `ray.init()` and, when there is no
token yet, writes one to `~/.ray/auth_token` with the umask's mode: 0644, so any user of the
machine could read it and then talk to the trainer's Ray cluster (run code in it). Before a
local `ray.init` croupier writes that file itself, owner-only, as Ray would (32 random bytes
in hex: `ray._private.authentication`'s generator); a token file already there that others may
read is made owner-only, with a warning. Nothing is done where the operator chose otherwise:
`RAY_AUTH_MODE=disabled`, a token in `RAY_AUTH_TOKEN`, or a file named by `RAY_AUTH_TOKEN_PATH`
(its mode is the operator's; `local_cluster.py` writes its own 0600).
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

log = logging.getLogger(__name__)

TOKEN_BYTES = 32


def default_token_path() -> Path:
    return Path.home() / ".ray" / "auth_token"


def private_ray_token(create: bool = True) -> Path | None:
    """Make Ray's default token file owner-only; `create`: write one (0600) when there is none
    (a local cluster, which Ray would give a 0644 one). The path, or None where the
    environment says Ray does not read that file."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return None
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return None
    path = default_token_path()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if not create:
            return None
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process wrote one meanwhile: it is theirs to keep
            return private_ray_token(create=False)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(TOKEN_BYTES))
        log.info("wrote a Ray cluster token to %s (owner-only)", path)
        return path
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        try:
            path.chmod(0o600)
        except OSError as e:  # another user's file: say so, change nothing
            log.warning("Ray's token %s can be read by other users and is not ours: %s", path, e)
            return path
        log.warning("Ray's token %s could be read by other users (mode %o): made 0600",
                    path, stat.S_IMODE(mode))  # fmt: skip
    return path
