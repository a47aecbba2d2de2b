"""Raw bytes on a link socket: hand-made frames, and waiting for the peer to close."""

from __future__ import annotations

import socket
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
