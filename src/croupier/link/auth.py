"""Authentication and integrity on the trainer link: an HMAC challenge-response both ways, then
an HMAC tag on every frame.

Both ends hold the same link token (`link/secret.py`: read from a file or the environment,
never from a config), and it never crosses the wire. A policy server opens with a fresh nonce;
the trainer answers with its own nonce only; the server proves it knows the token (an HMAC over
both nonces), and only once that proof checks out does the trainer prove itself the same way,
and only then does anything else happen. From there each frame body carries a 32-byte
HMAC-SHA256 tag under a key derived from the token and both nonces, over a per-direction label
and sequence number: a peer without the token can neither forge nor alter a frame (an ACK that
would delete spooled episodes, weights to serve), nor replay or reorder one, nor reflect one back.

Who proves first: whoever does hands the other side one (nonces, HMAC) pair it could test
guesses of the token against offline. The trainer's port is the side anyone who reaches it can
talk to, at will and as often as they like; a policy server only talks to the address it was
told to dial. So the dialling side proves first and the listening side reveals nothing to a
stranger (before version 2 of the handshake it was the other way round). What makes offline
guessing hopeless either way is the token itself: at least 16 random bytes, checked at start.

Why this rather than TLS: the link already has one shared secret and frames of its own, so this
needs no certificates to issue, rotate or expire across every policy server, and no new setting;
it costs one SHA-256 pass over each frame (2.5 ms per MiB measured on this 2-core box:
0.4 ms for a 512-step message of Leduc episodes, 7 µs for an ack). It gives no secrecy: episodes
and weights travel readable (docs/security.md says when to add a tunnel for that).

Without a token the link is plain RLlink (what RLlib's own peers speak): no authentication,
meant for loopback and trusted networks only.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import socket
import struct
from typing import Any

from ray.rllib.env.external.rllink import RLlink

from croupier.link import wire

PROTOCOL = "croupier-hmac-sha256/2"
NONCE_BYTES = 32
TAG_BYTES = 32
_SEND_WHOLE_BELOW = 1 << 16  # smaller frames go out in one sendall (one TCP segment)


class AuthError(ConnectionError):
    """The peer did not prove it holds the link token (or we could not prove it to it)."""


def _mac(key: bytes, label: bytes, *parts: bytes) -> bytes:
    mac = hmac.new(key, label, hashlib.sha256)
    for part in parts:
        mac.update(part)
    return mac.digest()


def proof(token: str, role: str, server_nonce: bytes, trainer_nonce: bytes) -> bytes:
    """What `role` ("server" or "trainer") sends to show it knows the token. Distinct labels
    per role, so one side's proof is never accepted as the other's."""
    return _mac(token.encode(), f"{PROTOCOL} proof {role}".encode(), server_nonce, trainer_nonce)


class FrameMac:
    """One direction of one authenticated connection. Both ends count frames, so a sequence
    number is never sent: a dropped, repeated or reordered frame fails its tag."""

    def __init__(self, token: str, server_nonce: bytes, trainer_nonce: bytes, direction: str):
        self._key = _mac(token.encode(), f"{PROTOCOL} session".encode(), server_nonce,
                         trainer_nonce)  # fmt: skip
        self._label = f"{PROTOCOL} {direction}".encode()
        self.seq = 0

    def tag(self, body: bytes | memoryview) -> bytes:
        tag = _mac(self._key, self._label, self.seq.to_bytes(8, "big"), body)
        self.seq += 1
        return tag

    def check(self, sealed: bytes) -> memoryview:
        """The body of a sealed frame if its tag is right; otherwise `wire.FrameError`."""
        if len(sealed) < TAG_BYTES:
            raise wire.FrameError("frame too short to carry its tag")
        view = memoryview(sealed)
        body, tag = view[:-TAG_BYTES], view[-TAG_BYTES:]
        if not hmac.compare_digest(self.tag(body), tag):
            raise wire.FrameError("frame tag does not verify (forged, altered or replayed)")
        return body


class Channel:
    """A framed connection, plain (RLlink as RLlib speaks it) or, once a handshake set its
    MACs, with every frame tagged. Sending from one thread and receiving from another is fine;
    two senders (or two receivers) must not share it."""

    def __init__(
        self,
        sock: socket.socket,
        send_mac: FrameMac | None = None,
        recv_mac: FrameMac | None = None,
    ):
        self.sock = sock
        self.send_mac = send_mac
        self.recv_mac = recv_mac

    @property
    def authenticated(self) -> bool:
        return self.send_mac is not None

    def overhead(self) -> int:
        """Bytes a frame body grows by on this channel (its tag)."""
        return TAG_BYTES if self.send_mac is not None else 0

    def frame(self, body: bytes) -> list[bytes]:
        """The pieces of the frame carrying `body` (header, body, tag), in order."""
        tag = self.send_mac.tag(body) if self.send_mac is not None else b""
        return [wire.frame_header(len(body) + len(tag)), body, tag]

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(wire.pack_body(message))

    def send_body(self, body: bytes) -> None:
        pieces = self.frame(body)
        if len(body) < _SEND_WHOLE_BELOW:
            self.sock.sendall(b"".join(pieces))
            return
        for piece in pieces:  # a big body is not copied just to add 8 + 32 bytes
            if piece:
                self.sock.sendall(piece)

    def recv(
        self, max_frame: int = wire.DEFAULT_MAX_FRAME, deadline: float | None = None
    ) -> tuple[wire.Kind, dict[str, Any]]:
        body = wire.recv_body(self.sock, max_frame, deadline)
        if self.recv_mac is not None:
            return wire.unpack_body(self.recv_mac.check(body))
        return wire.unpack_body(body)


def _nonce(body: dict[str, Any], key: str = "nonce") -> bytes:
    value = body.get(key)
    if not isinstance(value, bytes) or len(value) != NONCE_BYTES:
        raise AuthError(f"no valid {key} in the handshake")
    return value


def _offered(body: dict[str, Any], who: str, refusal: str) -> None:
    """Refuse (`refusal`) a handshake that is not ours; one of another version says so."""
    offered = body.get("auth")
    if offered == PROTOCOL:
        return
    if isinstance(offered, str) and offered.startswith("croupier-hmac"):
        raise AuthError(f"{who} speaks the handshake {offered!r}, this side {PROTOCOL!r}: "
                        "upgrade the trainer and every server together")  # fmt: skip
    raise AuthError(refusal)


def client_handshake(
    sock: socket.socket, token: str | None, deadline: float, max_frame: int = 4096
) -> Channel:
    """The policy server's side: a nonce, its proof over both nonces, then the trainer's proof
    checked. The only secret-derived thing it sends is that proof, and only to the address it
    was told to dial."""
    channel = Channel(sock)
    if token is None:
        channel.send({"type": RLlink.PING.name})
        kind, _ = channel.recv(max_frame, deadline)
        if kind is not RLlink.PONG:
            raise AuthError(f"expected PONG, trainer sent {kind.name}")
        return channel
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    channel.send({"type": RLlink.PING.name, "auth": PROTOCOL, "nonce": server_nonce})
    kind, body = channel.recv(max_frame, deadline)
    refusal = "the trainer did not authenticate (does it have the link token?)"
    if kind is not RLlink.PONG:
        raise AuthError(refusal)
    _offered(body, "the trainer", refusal)
    trainer_nonce = _nonce(body)
    channel.send({"type": RLlink.PING.name, "proof": proof(token, "server", server_nonce,
                                                            trainer_nonce)})  # fmt: skip
    try:
        kind, body = channel.recv(max_frame, deadline)
    except wire.FrameError:
        raise
    except ConnectionError as e:  # closed or reset: what a trainer does on a wrong proof
        raise AuthError(
            f"the trainer refused this server's proof ({e}): do both ends hold the same link token?"
        ) from None
    claimed = body.get("proof")
    expected = proof(token, "trainer", server_nonce, trainer_nonce)
    if (
        kind is not RLlink.PONG
        or not isinstance(claimed, bytes)
        or not hmac.compare_digest(claimed, expected)
    ):
        raise AuthError("the trainer's proof is wrong: it does not hold this link token")
    channel.send_mac = FrameMac(token, server_nonce, trainer_nonce, "server->trainer")
    channel.recv_mac = FrameMac(token, server_nonce, trainer_nonce, "trainer->server")
    return channel


def trainer_handshake(
    sock: socket.socket, token: str | None, deadline: float, max_frame: int
) -> Channel:
    """The trainer's side: the first frame must be a small PING, and with a token the peer
    must prove it holds it, all before `deadline`; the trainer's own proof goes out only after
    that (a stranger gets a random nonce and nothing else). Anything else raises (`AuthError`,
    or `wire.FrameError` / `OSError` for a bad frame or a slow peer)."""
    channel = Channel(sock)
    kind, body = channel.recv(max_frame, deadline)
    if kind is not RLlink.PING:
        raise AuthError(f"the first message must be PING, not {kind.name}")
    if token is None:
        channel.send({"type": RLlink.PONG.name})
        return channel
    _offered(body, "the peer", "the peer did not offer authentication (no link token on its side?)")
    server_nonce = _nonce(body)
    trainer_nonce = secrets.token_bytes(NONCE_BYTES)
    channel.send({"type": RLlink.PONG.name, "auth": PROTOCOL, "nonce": trainer_nonce})
    kind, body = channel.recv(max_frame, deadline)
    claimed = body.get("proof")
    expected = proof(token, "server", server_nonce, trainer_nonce)
    if (
        kind is not RLlink.PING
        or not isinstance(claimed, bytes)
        or not hmac.compare_digest(claimed, expected)
    ):
        raise AuthError("the peer's proof is wrong: it does not hold this link token")
    channel.send({"type": RLlink.PONG.name, "proof": proof(token, "trainer", server_nonce,
                                                            trainer_nonce)})  # fmt: skip
    channel.send_mac = FrameMac(token, server_nonce, trainer_nonce, "trainer->server")
    channel.recv_mac = FrameMac(token, server_nonce, trainer_nonce, "server->trainer")
    return channel


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (a name is resolved)."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not host:
        return False  # "" binds every interface
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def loopback_peer_uid(sock: socket.socket) -> int | None:
    """The user id owning the other end of a TCP connection within this machine, read from
    Linux's socket tables (/proc/net/tcp, tcp6: a socket's owner is listed there for every
    local user to see); None where it cannot be found (another OS, a remote peer).
    SO_PEERCRED would say it directly, but only for Unix sockets."""
    try:
        local, peer = sock.getsockname(), sock.getpeername()
    except OSError:
        return None
    table = "/proc/net/tcp6" if sock.family == socket.AF_INET6 else "/proc/net/tcp"
    # The peer's socket is the row whose local end is our peer and whose remote end is us.
    want = (_proc_address(peer, sock.family), _proc_address(local, sock.family))
    try:
        with open(table) as f:
            next(f)  # the header
            for line in f:
                fields = line.split()
                if len(fields) > 7 and (fields[1], fields[2]) == want:
                    return int(fields[7])
    except (OSError, ValueError, StopIteration):
        return None
    return None


def _proc_address(address: tuple[Any, ...], family: int) -> str:
    """An (ip, port) as /proc/net/tcp writes it: the address's 32-bit words in host byte
    order, in hex, then the port."""
    packed = socket.inet_pton(family, address[0])
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{address[1]:04X}"
