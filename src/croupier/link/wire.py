"""RLlink framing with a decoder that never unpickles.

The frame is RLlib's (`ray.rllib.env.external.rllink`): 8 ASCII digits giving the body length,
then a msgpack body whose map has a "type" (an `RLlink` message name). Numpy arrays travel in
msgpack-numpy's layout, so RLlib's own peers read ours and we read theirs. The difference is the
decoder: msgpack-numpy unpickles object arrays (`kind == b"O"`), which would let any peer run
code in this process. We accept plain numeric dtypes only, check sizes against shapes, and cap
the frame length before allocating anything.
"""

from __future__ import annotations

import socket
import time
from enum import Enum
from typing import Any

import numpy as np
from ray.rllib.env.external.rllink import RLlink

# msgpack's own implementation, bound directly: RLlib's `try_import_msgpack()` runs
# `msgpack_numpy.patch()`, which replaces `msgpack.packb/unpackb` process-wide with versions
# that unpickle object arrays before any hook of ours could refuse them.
try:
    from msgpack._cmsgpack import Packer as _Packer
    from msgpack._cmsgpack import unpackb as _unpackb
except ImportError:  # pure-Python msgpack
    from msgpack.fallback import Packer as _Packer
    from msgpack.fallback import unpackb as _unpackb

HEADER_BYTES = 8
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
_SAFE_KINDS = frozenset("biuf")  # bool, int, unsigned, float


class LinkExt(Enum):
    """Croupier's messages beyond RLlink's. ACK: the trainer has ingested (or deliberately
    dropped) these episode ids, so the server may delete them from its spool."""

    ACK = "ACK"


Kind = RLlink | LinkExt


class FrameError(ConnectionError):
    """A frame that is malformed, too large or unsafe: the connection must be dropped."""


# --- numpy <-> msgpack (msgpack-numpy's layout) --------------------------------------------


def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _SAFE_KINDS:
            raise TypeError(f"refusing to send a {obj.dtype} array")
        arr = np.ascontiguousarray(obj)
        return {
            b"nd": True,
            b"type": arr.dtype.str,
            b"kind": b"",
            b"shape": list(arr.shape),
            b"data": arr.tobytes(),
        }
    if isinstance(obj, np.bool_ | np.number):
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot send {type(obj).__name__} over the link")


def _decode_hook(obj: dict[Any, Any]) -> Any:
    if b"nd" not in obj:
        return obj
    kind = obj.get(b"kind", b"")
    if kind not in (b"", ""):
        raise FrameError(f"refusing an array of kind {kind!r} (object arrays would unpickle)")
    try:
        dtype = np.dtype(obj[b"type"])
        data = obj[b"data"]
        if dtype.kind not in _SAFE_KINDS or dtype.hasobject or not isinstance(data, bytes):
            raise FrameError(f"refusing array dtype {dtype}")
        if obj[b"nd"] is True:
            shape = tuple(int(d) for d in obj[b"shape"])
            if any(d < 0 for d in shape) or int(np.prod(shape)) * dtype.itemsize != len(data):
                raise FrameError("array data does not match its shape")
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if len(data) != dtype.itemsize:
            raise FrameError("scalar data does not match its dtype")
        return np.frombuffer(data, dtype=dtype)[0]
    except FrameError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise FrameError(f"malformed array: {e}") from None


def pack(message: dict[str, Any]) -> bytes:
    """A whole frame (header + body) for `message`, which must carry a "type"."""
    body = pack_body(message)
    return frame_header(len(body)) + body


def pack_body(message: dict[str, Any]) -> bytes:
    """The msgpack body of a frame (no header): what a frame MAC covers."""
    return _Packer(default=_encode_default, use_bin_type=True).pack(message)


def frame_header(length: int) -> bytes:
    """The 8-digit length header; a `ValueError` past what 8 digits can say (~95 MiB)."""
    if length >= 10**HEADER_BYTES:
        raise ValueError("message too large for an RLlink frame")
    return str(length).zfill(HEADER_BYTES).encode("ascii")


def encode_value(value: Any) -> bytes:
    """msgpack bytes for plain data with numeric numpy arrays (no frame header)."""
    return _Packer(default=_encode_default, use_bin_type=True).pack(value)


def decode_value(data: bytes | memoryview) -> Any:
    """The inverse of `encode_value`, with the same never-unpickle decoder as the link."""
    try:
        return _unpackb(
            data, raw=False, object_hook=_decode_hook, strict_map_key=False, use_list=True
        )
    except FrameError:
        raise
    except Exception as e:  # msgpack raises several types for garbage
        raise FrameError(f"undecodable message body: {type(e).__name__}: {e}") from None


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
