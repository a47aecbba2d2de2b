"""RLlink framing with a decoder that never unpickles.

The frame is RLlib's (`ray.rllib.env.external.rllink`): 8 ASCII digits giving the body length,
then a msgpack body whose map has a "type" (an `RLlink` message name). Numpy arrays travel in
msgpack-numpy's layout, so RLlib's own peers read ours and we read theirs. The difference is the
decoder: msgpack-numpy unpickles object arrays (`kind == b"O"`), which would let any peer run
code in this process. We accept plain numeric dtypes only, check sizes against shapes, and cap
the frame length before allocating anything. The body's encoding is
`croupier.trajectories.codec` (the spool's too).
"""

from __future__ import annotations

import socket
import time
from enum import Enum
from typing import Any

from ray.rllib.env.external.rllink import RLlink

from croupier.trajectories import codec

HEADER_BYTES = 8
DEFAULT_MAX_FRAME = 64 * 1024 * 1024


class LinkExt(Enum):
    """Croupier's messages beyond RLlink's. ACK: the trainer has ingested (or deliberately
    dropped) these episode ids, so the server may delete them from its spool."""

    ACK = "ACK"


Kind = RLlink | LinkExt


class FrameError(ConnectionError):
    """A frame that is malformed, too large or unsafe: the connection must be dropped."""


def pack(message: dict[str, Any]) -> bytes:
    """A whole frame (header + body) for `message`, which must carry a "type"."""
    body = pack_body(message)
    return frame_header(len(body)) + body


def pack_body(message: dict[str, Any]) -> bytes:
    """The msgpack body of a frame (no header): what a frame MAC covers."""
    return codec.encode_value(message)


def frame_header(length: int) -> bytes:
    """The 8-digit length header; a `ValueError` past what 8 digits can say (~95 MiB)."""
    if length >= 10**HEADER_BYTES:
        raise ValueError("message too large for an RLlink frame")
    return str(length).zfill(HEADER_BYTES).encode("ascii")


# The episode record's encoding is the link's: one codec (croupier.trajectories.codec).
encode_value = codec.encode_value


def decode_value(data: bytes | memoryview) -> Any:
    """`codec.decode_value`, a bad body raised as `FrameError` (the connection must drop)."""
    try:
        return codec.decode_value(data)
    except codec.DecodeError as e:
        raise FrameError(str(e)) from None


def unpack_body(body: bytes | memoryview) -> tuple[Kind, dict[str, Any]]:
    message = decode_value(body)
    if not isinstance(message, dict) or "type" not in message:
        raise FrameError("message is not a map with a 'type'")
    name = message.pop("type")
    for enum in (RLlink, LinkExt):
        try:
            return enum(name), message
        except (ValueError, TypeError):
            continue
    raise FrameError("unknown message type")


def parse_header(header: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> int:
    if len(header) != HEADER_BYTES or not header.isdigit():
        raise FrameError(f"bad frame header {header[:HEADER_BYTES]!r}")
    length = int(header)
    if length > max_frame:
        raise FrameError(f"frame of {length} bytes exceeds the {max_frame}-byte limit")
    return length


# --- blocking socket helpers --------------------------------------------------------------


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(pack(message))


def recv(
    sock: socket.socket, max_frame: int = DEFAULT_MAX_FRAME, deadline: float | None = None
) -> tuple[Kind, dict[str, Any]]:
    return unpack_body(recv_body(sock, max_frame, deadline))


def recv_body(
    sock: socket.socket, max_frame: int = DEFAULT_MAX_FRAME, deadline: float | None = None
) -> bytes:
    """One frame's body. `deadline` (`time.monotonic()`): a total limit for the whole frame,
    not per `recv` call, so a peer sending a byte at a time cannot stretch it."""
    length = parse_header(_recv_exact(sock, HEADER_BYTES, deadline), max_frame)
    return _recv_exact(sock, length, deadline)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    chunks = []
    remaining = n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline passed before the frame was complete")
            sock.settimeout(left)
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
