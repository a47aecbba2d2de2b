"""Raw bytes on a link socket: hand-made frames, a trainer's side of the handshake, and
waiting for the peer to close; the link token in a file."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import time
from typing import Any

from croupier.link import wire


def raw_frame(body: bytes) -> bytes:
    return str(len(body)).zfill(wire.HEADER_BYTES).encode() + body


def answer_handshake(conn: socket.socket, versions: Any, adapter: Any, state: dict) -> None:
    """A trainer's side of a server's link handshake on `conn`: PONG to its ping, the model's
    config (with acks), then `state` ({"rl_module": weights, "weights_seq_no": N})."""
    for _ in range(3):
        kind, _body = wire.recv(conn)
        if kind.name == "PING":
            wire.send(conn, {"type": "PONG"})
        elif kind.name == "GET_CONFIG":
            plain = {"format": "croupier/1", "model": versions.spec.to_dict()}
            plain.update(obs_size=adapter.obs_size, num_actions=adapter.num_actions)
            wire.send(conn, {"type": "SET_CONFIG", "config": {**plain, "acks": True}})
        else:
            wire.send(conn, {"type": "SET_STATE", "state": state})


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
