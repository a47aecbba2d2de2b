"""Raw bytes on a link socket: hand-made frames, and waiting for the peer to close; the link
token in a file."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import time

from croupier.link import wire


def raw_frame(body: bytes) -> bytes:
    return str(len(body)).zfill(wire.HEADER_BYTES).encode() + body


def closed_by_peer(sock: socket.socket, timeout_s: float = 15.0) -> bool:
    """Read until EOF (or reset): True if the peer closed within `timeout_s`."""
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


_TOKEN_DIR: list[str] = []


def token_file(token: str) -> str:
    """`token` in an owner-only file (what `--link-token-file` and `LinkOptions.token_file`
    take: a token is never put in a config); its path. Removed when the process exits."""
    if not _TOKEN_DIR:
        _TOKEN_DIR.append(tempfile.mkdtemp(prefix="croupier-link-token-"))
        atexit.register(shutil.rmtree, _TOKEN_DIR[0], True)
    fd, path = tempfile.mkstemp(dir=_TOKEN_DIR[0])
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path
