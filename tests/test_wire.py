"""RLlink framing (`croupier.link.wire`): round trips, refusals, and RLlib interop. No Ray."""

from __future__ import annotations

import importlib
import pickle
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import msgpack
import numpy as np
import pytest
from ray.rllib.env.external.rllink import RLlink, get_rllink_message, send_rllink_message

from croupier.link import wire
from tests.conftest import UNPICKLED, PickleBomb
from tests.helpers.link import raw_frame

# msgpack_numpy.patch() (run by RLlib's rllink and msgpack checkpoints) rebinds these.
_MSGPACK_NAMES = ("Packer", "Unpacker", "load", "loads", "dump", "dumps", "pack", "packb")
_MSGPACK_NAMES += ("unpack", "unpackb")


@pytest.fixture(autouse=True)
def restore_msgpack() -> Iterator[None]:
    """Undo any msgpack_numpy patch a test (or RLlib) applies, so tests stay independent."""
    from ray.rllib.env.external import rllink

    saved = {n: getattr(msgpack, n) for n in _MSGPACK_NAMES if hasattr(msgpack, n)}
    yield
    for name, value in saved.items():
        setattr(msgpack, name, value)
    rllink.msgpack = None  # RLlib caches "msgpack is patched": make it patch again when used


@pytest.fixture
def pristine_msgpack() -> None:
    """msgpack as shipped, even if an earlier test module let RLlib patch it."""
    importlib.reload(msgpack)


@pytest.fixture
def patched_msgpack() -> None:
    """msgpack as it is in any process where RLlib's rllink (or a msgpack checkpoint) ran."""
    _patch_as_rllib()


@pytest.fixture
def sockpair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    yield a, b
    a.close()
    b.close()


# --- a payload whose unpickling would be visible ---------------------------------------------


def _object_array_body(flag: Path) -> bytes:
    payload = {
        "type": "EPISODES",
        "episodes": [
            {
                "x": {
                    b"nd": True,
                    b"kind": b"O",
                    b"type": "|O",
                    b"shape": [1],
                    b"data": pickle.dumps(np.array([PickleBomb(str(flag))], dtype=object)),
                }
            }
        ],
    }
    return msgpack.packb(payload, use_bin_type=True)


def _assert_refused_unpickled(flag: Path, sockpair: tuple[socket.socket, socket.socket]) -> None:
    body = _object_array_body(flag)
    UNPICKLED.clear()
    with pytest.raises(wire.FrameError):
        wire.unpack_body(body)
    a, b = sockpair
    a.sendall(raw_frame(body))
    with pytest.raises(wire.FrameError):
        wire.recv(b)
    assert not flag.exists() and UNPICKLED == [], "the peer's pickle was loaded"


# --- round trips ------------------------------------------------------------------------------


def test_round_trip_nested_arrays_and_scalars(sockpair):
    rng = np.random.default_rng(0)
    msg = {
        "type": RLlink.EPISODES.name,
        "episodes": [
            {
                "obs": rng.standard_normal((5, 36)).astype(np.float32),
                "actions": rng.integers(0, 4, size=7).astype(np.int64),
                "empty": np.zeros((0, 3), np.float32),
                "mask": np.array([[True, False]]),
                "u8": np.arange(6, dtype=np.uint8).reshape(2, 3),
                "f64": np.float64(2.5),
                "i32": np.int32(-7),
                "nested": {"deep": [np.float32(1.5), np.arange(3, dtype=np.int64), "s"]},
                "t": (1, 2),
                "none": None,
                "bytes": b"\x00\xff",
            }
        ],
        "n": 3,
    }
    frame = wire.pack(msg)
    assert frame[:8].isdigit() and int(frame[:8]) == len(frame) - 8
    a, b = sockpair
    wire.send(a, msg)
    kind, body = wire.recv(b)
    assert kind is RLlink.EPISODES and "type" not in body and body["n"] == 3
    ep, src = body["episodes"][0], msg["episodes"][0]
    for key in ("obs", "actions", "empty", "mask", "u8"):
        assert isinstance(ep[key], np.ndarray)
        assert ep[key].dtype == src[key].dtype and ep[key].shape == src[key].shape, key
        np.testing.assert_array_equal(ep[key], src[key])
    ep["obs"][0, 0] = 1.0  # decoded arrays are writable copies
    assert ep["f64"] == 2.5  # np.float64 is a Python float: msgpack sends it natively
    assert ep["i32"] == -7 and ep["i32"].dtype == np.int32
    deep = ep["nested"]["deep"]
    assert deep[0] == np.float32(1.5) and deep[0].dtype == np.float32
    np.testing.assert_array_equal(deep[1], np.arange(3)) and deep[2] == "s"
    assert ep["t"] == [1, 2] and ep["none"] is None and ep["bytes"] == b"\x00\xff"


def test_pack_refuses_object_arrays():
    with pytest.raises(TypeError):
        wire.pack({"type": "PING", "x": np.array([object()], dtype=object)})


# --- refusals ---------------------------------------------------------------------------------


def test_object_array_refused_and_never_unpickled(pristine_msgpack, tmp_path, sockpair):
    _assert_refused_unpickled(tmp_path / "unpickled", sockpair)


def test_object_array_refused_after_rllib_patched_msgpack(patched_msgpack, tmp_path, sockpair):
    """RLlib's rllink (and msgpack checkpoints) call msgpack_numpy.patch(), which rebinds
    msgpack.unpackb process-wide to a version that unpickles kind 'O' arrays *before* any
    object_hook runs. The safe decoder must not depend on nobody having done that."""
    _assert_refused_unpickled(tmp_path / "unpickled", sockpair)


@pytest.mark.parametrize(
    "header",
    [b"abcdefgh", b"0000001x", b"-0000001", b" 0000010", b"\x00" * 8, b"1234567"],
)
def test_bad_headers(header):
    with pytest.raises(wire.FrameError):
        wire.parse_header(header)


def test_header_over_max_frame(sockpair):
    assert wire.parse_header(b"00001000", max_frame=1000) == 1000
    with pytest.raises(wire.FrameError):
        wire.parse_header(b"00001001", max_frame=1000)
    with pytest.raises(wire.FrameError):
        wire.parse_header(b"99999999")  # > the 64 MiB default
    a, b = sockpair
    a.sendall(b"99999999" + b"x" * 100)  # refused before reading (or allocating) the body
    with pytest.raises(wire.FrameError):
        wire.recv(b)


@pytest.mark.parametrize(
    "payload",
    [
        [1, 2, 3],
        "PING",
        42,
        {"no_type": 1},
        {"type": "NOT_A_MESSAGE"},
        {"type": 7},
        {"type": None},
    ],
)
def test_bodies_that_are_not_messages(payload):
    with pytest.raises(wire.FrameError):
        wire.unpack_body(msgpack.packb(payload, use_bin_type=True))


@pytest.mark.parametrize("body", [b"", b"\xc1", b"\x92\x01", b"\xdb\xff\xff\xff\xff"])
def test_undecodable_bodies(body):
    with pytest.raises(wire.FrameError):
        wire.unpack_body(body)


def _nd(over: dict | None = None) -> dict:
    arr = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2, 3], b"data": bytes(24)}
    arr.update(over or {})
    return {k: v for k, v in arr.items() if v is not None}


@pytest.mark.parametrize(
    "arr",
    [
        _nd({b"shape": [2, 4]}),  # data too short for the shape
        _nd({b"shape": [5]}),
        _nd({b"data": bytes(23)}),
        _nd({b"shape": [-2, -3]}),  # negative dims whose product matches
        _nd({b"shape": None}),
        _nd({b"shape": ["a"]}),
        _nd({b"type": "|O"}),
        _nd({b"type": "<U3", b"data": bytes(72)}),
        _nd({b"type": "<c8", b"data": bytes(48)}),  # complex: not a safe kind
        _nd({b"type": "not-a-dtype"}),
        _nd({b"type": None}),
        _nd({b"data": "text, not bytes"}),
        _nd({b"kind": b"V"}),
        {b"nd": False, b"type": "<f8", b"data": bytes(4)},  # scalar of the wrong size
    ],
)
def test_malformed_arrays(arr):
    body = msgpack.packb({"type": "EPISODES", "episodes": [arr]}, use_bin_type=True)
    with pytest.raises(wire.FrameError):
        wire.unpack_body(body)


def test_well_formed_array_accepted():
    body = msgpack.packb({"type": "EPISODES", "episodes": [_nd()]}, use_bin_type=True)
    kind, msg = wire.unpack_body(body)
    assert kind is RLlink.EPISODES
    assert msg["episodes"][0].shape == (2, 3) and msg["episodes"][0].dtype == np.float32


def test_peer_closing_mid_frame(sockpair):
    a, b = sockpair
    a.sendall(b"00000100" + b"\x81")
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionError):
        wire.recv(b)


# --- RLlib interop ----------------------------------------------------------------------------


def _rllib_message() -> dict:
    rng = np.random.default_rng(1)
    return {
        "type": RLlink.SET_STATE.name,
        "state": {
            "rl_module": {
                "default_policy": {
                    "w": rng.standard_normal((4, 3)).astype(np.float32),
                    "b": np.arange(3, dtype=np.int64),
                }
            },
            "weights_seq_no": 12,
        },
    }


def _patch_as_rllib() -> None:
    from ray.rllib.utils.checkpoints import try_import_msgpack

    try_import_msgpack(error=True)


def test_rllib_frames_decode_with_our_recv(sockpair):
    a, b = sockpair
    sent = _rllib_message()
    _patch_as_rllib()  # RLlib's sender needs msgpack_numpy to pack arrays
    send_rllink_message(a, dict(sent))
    send_rllink_message(a, {"type": RLlink.PONG.name})
    importlib.reload(msgpack)  # decode as a croupier process does: msgpack unpatched
    kind, body = wire.recv(b)
    assert_same_state(kind, body, sent)
    assert wire.recv(b) == (RLlink.PONG, {})


def assert_same_state(kind: RLlink, body: dict, sent: dict) -> None:
    """The SET_STATE `_rllib_message()` built arrived whole: same seq no, dtypes and values."""
    assert kind is RLlink.SET_STATE and body["state"]["weights_seq_no"] == 12
    got = body["state"]["rl_module"]["default_policy"]
    want = sent["state"]["rl_module"]["default_policy"]
    for key in ("w", "b"):
        assert got[key].dtype == want[key].dtype
        np.testing.assert_array_equal(got[key], want[key])


def test_our_frames_decode_with_rllib(pristine_msgpack, sockpair):
    a, b = sockpair
    sent = _rllib_message()
    wire.send(a, sent)
    wire.send(a, {"type": RLlink.PING.name})
    _patch_as_rllib()  # as it is in RLlib's process
    done: dict = {}

    def read() -> None:
        done["msg"] = get_rllink_message(b)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    kind, body = done["msg"]
    assert_same_state(kind, body, sent)
    assert get_rllink_message(b) == (RLlink.PING, {})
