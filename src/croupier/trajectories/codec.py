"""msgpack with numeric numpy arrays, and a decoder that never unpickles.

The encoding of everything croupier stores or ships: episode records in the spool, and the
bodies of link frames (`croupier.link.wire` adds RLlib's framing around it). It lives here, with
the records, so that the spool need not import the link (a later stage) to read its own files.

Arrays travel in msgpack-numpy's layout, so RLlib's own peers read ours and we read theirs. The
difference is the decoder: msgpack-numpy unpickles object arrays (`kind == b"O"`), which would
let any peer run code in this process. We accept plain numeric dtypes only and check sizes
against shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# msgpack's own implementation, bound directly: RLlib's `try_import_msgpack()` runs
# `msgpack_numpy.patch()`, which replaces `msgpack.packb/unpackb` process-wide with versions
# that unpickle object arrays before any hook of ours could refuse them.
try:
    from msgpack._cmsgpack import Packer as _Packer
    from msgpack._cmsgpack import unpackb as _unpackb
except ImportError:  # pure-Python msgpack
    from msgpack.fallback import Packer as _Packer
    from msgpack.fallback import unpackb as _unpackb

SAFE_KINDS = frozenset("biuf")  # bool, int, unsigned, float


class DecodeError(ValueError):
    """Bytes that are not msgpack, or carry an unsafe or malformed array."""


def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in SAFE_KINDS:
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
        raise DecodeError(f"refusing an array of kind {kind!r} (object arrays would unpickle)")
    try:
        dtype = np.dtype(obj[b"type"])
        data = obj[b"data"]
        if dtype.kind not in SAFE_KINDS or dtype.hasobject or not isinstance(data, bytes):
            raise DecodeError(f"refusing array dtype {dtype}")
        if obj[b"nd"] is True:
            shape = tuple(int(d) for d in obj[b"shape"])
            if any(d < 0 for d in shape) or int(np.prod(shape)) * dtype.itemsize != len(data):
                raise DecodeError("array data does not match its shape")
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if len(data) != dtype.itemsize:
            raise DecodeError("scalar data does not match its dtype")
        return np.frombuffer(data, dtype=dtype)[0]
    except DecodeError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise DecodeError(f"malformed array: {e}") from None


def encode_value(value: Any) -> bytes:
    """msgpack bytes for plain data with numeric numpy arrays (no frame header)."""
    return _Packer(default=_encode_default, use_bin_type=True).pack(value)


def decode_value(data: bytes | memoryview) -> Any:
    """The inverse of `encode_value`; `DecodeError` for anything else."""
    try:
        return _unpackb(
            data, raw=False, object_hook=_decode_hook, strict_map_key=False, use_list=True
        )
    except DecodeError:
        raise
    except Exception as e:  # msgpack raises several types for garbage
        raise DecodeError(f"undecodable message body: {type(e).__name__}: {e}") from None
