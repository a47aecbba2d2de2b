"""The trainer's half of the link: sockets, handshake, one reader and one writer per server.

Unlike RLlib's stock `EnvRunnerServerForExternalInference` it

- accepts many policy servers at once (up to `max_connections`): a reader and a writer thread
  per connection, so a slow or stuck server never blocks another, and a weights push never
  waits on a reader; a server that does not read what it is sent is dropped, not buffered for;
- with a link token, lets a server in only once it proved it holds the token (a
  challenge-response both ways) and tags every frame after that (`croupier.link.auth`); with or
  without, the first frame must be a small PING within a total handshake deadline, and
  connections still handshaking have a cap of their own (`max_handshaking`, the oldest evicted
  past it), so strangers can neither take the slots of authenticated servers nor keep a new
  server out by holding connections open;
- answers GET_CONFIG with plain data (`protocol.LinkConfig`), never a pickle, and decodes frames
  without ever unpickling (`croupier.link.wire`);
- hands EPISODES to its `LinkHandler` (the trainer's EnvRunner) and acks what the handler
  settled at once; the handler acks the rest later (`ack`), once it has trained them.

What the trainer does with episodes (validation, de-duplication, the inbox) is the handler's
job, not this module's.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Protocol

from ray.rllib.env.external.rllink import RLlink

from croupier.link import auth, protocol, wire

log = logging.getLogger(__name__)

# Every counter the link keeps, in one place: `LinkEnvRunner.link_stats()` reports them and
# the trainer's /metrics exports them (`croupier_trainer_<name>`, `_total` dropped).
LINK_COUNTERS = (
    "episodes_received",
    "episodes_rejected",
    "episodes_duplicate",
    "episodes_dropped_lag",
    "episodes_dropped_backlog",
    "episodes_dropped_stale",
    "episodes_sampled",
    "episodes_trained",
    "episodes_acked",
    "steps_received",
    "steps_sampled",
    "steps_dropped_backlog",
    "steps_dropped_stale",
    "frames_rejected",
    "connections_refused",
    "connections_over_cap",
    "handshakes_evicted",
    "connections_not_reading",
    "connections_total",
)


class LinkCounters:
    """The link's counters, safe to bump from every reader thread (a `Counter`'s `+=` is a
    read-modify-write: two readers at once could lose a count)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def __getitem__(self, key: str) -> int:
        with self._lock:
            return self._counts[key]

    def snapshot(self) -> dict[str, int]:
        """Every counter of `LINK_COUNTERS` (0 when never bumped), read at one instant."""
        with self._lock:
            return {k: self._counts[k] for k in LINK_COUNTERS}


@dataclass(frozen=True)
class ServerOptions:
    """How the trainer's link listens (the runner's `LinkOptions` carries these)."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    insecure: bool = False
    max_frame_bytes: int = wire.DEFAULT_MAX_FRAME
    # Before the handshake is done: each frame's size cap, and how long (in all) a peer may take.
    # A handshake is two round trips and two HMACs (milliseconds); 5 s leaves room for a
    # loaded machine, and bounds how long a stranger holds a slot.
    max_handshake_bytes: int = 4096
    handshake_timeout_s: float = 5.0
    # Connections at once still handshaking; past it the oldest of them is closed (counted:
    # handshakes_evicted). Evicting the oldest rather than refusing the newest: to keep a real
    # server from getting in, a stranger must open this many connections within the server's
    # own handshake (milliseconds), not merely hold this many open.
    max_handshaking: int = 16
    max_connections: int = 256
    max_queued_bytes: int = 16 * 1024 * 1024


class LinkHandler(Protocol):
    """What the trainer supplies to the server."""

    def link_config(self) -> protocol.LinkConfig: ...

    def state_body(self) -> bytes:
        """The current SET_STATE frame body (encoded once per version, sent to every server)."""
        ...

    def ingest(self, records: list[Any], sender: Connection | None = None) -> list[str]:
        """Take an EPISODES message's records; returns the ids to acknowledge now. The others
        it acknowledges later, to `sender`, with `LinkServer.ack`."""
        ...


def check_listen(host: str, has_token: bool, insecure: bool) -> None:
    """An unauthenticated trainer port reachable from other machines lets anyone feed it
    episodes and download its weights: refused unless asked for with `insecure`."""
    if not has_token and not insecure and not auth.is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host!r} without a link token: give the trainer and every "
            "server one (--link-token-file, or CROUPIER_LINK_TOKEN), or pass --insecure on a "
            "network you trust"
        )


class Connection:
    """One policy server. Replies and pushes go through its own writer thread."""

    def __init__(self, sock: socket.socket, addr: Any, server: LinkServer):
        self.sock = sock
        self.addr = addr
        self.server = server
        self.name = f"{addr[0]}:{addr[1]}"
        self.authed = False
        # The whole handshake, however the peer paces its bytes, must end by then.
        self.deadline = time.monotonic() + server.options.handshake_timeout_s
        self.channel = auth.Channel(sock)
        self.open = True
        self._out: deque[tuple[bytes, bool]] = deque()  # (frame body, is a weights push)
        self._queued_bytes = 0  # of the bodies that are not weights pushes
        self._cv = threading.Condition()

    def start(self) -> None:
        """Start reading and writing; only once the server knows the connection, so a drop
        from the first bad frame always finds (and closes) it."""
        threading.Thread(target=self._read_loop, daemon=True, name=f"link-r-{self.name}").start()
        threading.Thread(target=self._write_loop, daemon=True, name=f"link-w-{self.name}").start()

    def send(self, body: bytes, is_state: bool = False) -> None:
        """Queue a frame body (the writer adds the header, and the tag once authenticated)."""
        with self._cv:
            if not self.open:
                return
            if is_state:
                # Coalesce: a server that has not taken the last push only needs the newest.
                self._out = deque(item for item in self._out if not item[1])
            else:
                self._queued_bytes += len(body)
            self._out.append((body, is_state))
            self._cv.notify()
            overflowing = self._queued_bytes > self.server.options.max_queued_bytes
        if overflowing:
            self.server.counters.add("connections_not_reading")
            self.server.drop(self, "not reading what it is sent")

    def close(self) -> None:
        with self._cv:
            self.open = False
            self._out.clear()
            self._cv.notify()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cv:
                    while self.open and not self._out:
                        self._cv.wait()
                    if not self.open:
                        return
                    body, is_state = self._out.popleft()
                    if not is_state:
                        self._queued_bytes -= len(body)
                self.channel.send_body(body)
        except (OSError, ValueError) as e:
            self.server.drop(self, f"send failed: {e}")

    def _read_loop(self) -> None:
        server = self.server
        try:
            while self.open:
                if not self.authed:
                    if not self._handshake():
                        return
                    continue
                kind, body = self.channel.recv(server.options.max_frame_bytes)
                server.handle(self, kind, body)
        except wire.FrameError as e:
            server.counters.add("frames_rejected")
            server.drop(self, f"bad frame: {e}")
        except (ConnectionError, OSError) as e:  # TimeoutError included
            server.drop(self, f"connection closed: {e}")
        except Exception as e:  # never let one peer take the trainer down
            server.counters.add("frames_rejected")
            server.drop(self, f"unexpected {type(e).__name__}: {e}")

    def _handshake(self) -> bool:
        """Small frames, a total deadline, and (with a token) proof of the token both ways,
        before anything the peer sends is acted on or anything but the handshake is sent."""
        server = self.server
        try:
            self.channel = auth.trainer_handshake(
                self.sock, server.options.token, self.deadline, server.options.max_handshake_bytes
            )
        except Exception as e:  # a bad frame, a wrong proof, a slow or vanished peer
            if isinstance(e, wire.FrameError):
                server.counters.add("frames_rejected")
            server.counters.add("connections_refused")
            server.drop(self, f"no valid handshake: {e}")
            return False
        if not server.admit(self):  # evicted while it handshook
            return False
        self.sock.settimeout(None)
        self.authed = True  # the channel is set first: pushes from now on are tagged
        return True


class LinkServer:
    def __init__(
        self, handler: LinkHandler, options: ServerOptions, counters: LinkCounters | None = None
    ):
        self.handler = handler
        self.options = options
        self.counters = counters if counters is not None else LinkCounters()
        self.listening: socket.socket | None = None
        self._conns: set[Connection] = set()
        # The connections still handshaking, oldest first (a dict keeps insertion order).
        self._handshaking: dict[Connection, None] = {}
        self._conns_lock = threading.Lock()

    @property
    def port(self) -> int | None:
        return self.listening.getsockname()[1] if self.listening is not None else None

    @property
    def connected(self) -> int:
        with self._conns_lock:
            return len(self._conns)

    def listen(self, port: int) -> int:
        """Open the port (0: any free one) and start accepting; returns the port."""
        check_listen(self.options.host, self.options.token is not None, self.options.insecure)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.options.host, port))
        sock.listen(64)
        self.listening = sock
        threading.Thread(target=self._accept_loop, args=(sock,), daemon=True).start()
        log.info("trainer link listening on %s:%d", self.options.host, self.port)
        return sock.getsockname()[1]

    def stop(self) -> None:
        if self.listening is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not, and
            # the port would stay taken.
            with contextlib.suppress(OSError):
                self.listening.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.listening.close()
            self.listening = None
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close()

    def broadcast(self, state_body: bytes) -> None:
        """Push a SET_STATE body to every authenticated server."""
        with self._conns_lock:
            conns = [c for c in self._conns if c.authed]
        for conn in conns:
            conn.send(state_body, is_state=True)

    def _accept_loop(self, sock: socket.socket) -> None:
        while True:
            try:
                client, addr = sock.accept()
            except OSError:
                return  # closed by stop()
            self.counters.add("connections_total")
            with self._conns_lock:
                full = len(self._conns) >= self.options.max_connections
            if full:
                self.counters.add("connections_over_cap")
                with contextlib.suppress(OSError):
                    client.close()
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(client, addr, self)
            with self._conns_lock:
                self._conns.add(conn)
                self._handshaking[conn] = None
                evict = None
                if len(self._handshaking) > self.options.max_handshaking:
                    evict = next(iter(self._handshaking))
            if evict is not None:
                self.counters.add("handshakes_evicted")
                self.drop(evict, "evicted: too many connections handshaking at once")
            conn.start()

    def admit(self, conn: Connection) -> bool:
        """`conn` finished its handshake: it leaves the handshaking ones. False if it was
        dropped meanwhile (evicted)."""
        with self._conns_lock:
            self._handshaking.pop(conn, None)
            return conn in self._conns

    def drop(self, conn: Connection, why: str) -> None:
        with self._conns_lock:
            known = conn in self._conns
            self._conns.discard(conn)
            self._handshaking.pop(conn, None)
        if known:
            log.info("policy server %s disconnected: %s", conn.name, why)
            conn.close()

    def handle(self, conn: Connection, kind: Any, body: dict[str, Any]) -> None:
        """One frame from an authenticated server (its reader thread)."""
        if kind is RLlink.PING:
            conn.send(wire.pack_body(protocol.pong()))
        elif kind is RLlink.GET_CONFIG:
            conn.send(wire.pack_body(protocol.set_config(self.handler.link_config())))
        elif kind is RLlink.GET_STATE:
            conn.send(self.handler.state_body(), is_state=True)
        elif kind in (RLlink.EPISODES, RLlink.EPISODES_AND_GET_STATE):
            try:
                records = protocol.read_episodes(body)
            except protocol.ProtocolError as e:
                raise wire.FrameError(str(e)) from None
            self.ack(conn, self.handler.ingest(records, conn))
            # EPISODES_AND_GET_STATE is answered by the next push, which every server gets.
        else:
            raise wire.FrameError(f"unexpected message {kind.name}")

    def ack(self, conn: Connection, ids: list[str]) -> None:
        """Tell the server these episodes are settled (it deletes them from its spool). On a
        connection that is gone the ack is lost: the server sends them again, and they are
        recognised then. Any thread may call it (the writer thread sends)."""
        if not conn.open or not ids:
            return
        conn.send(wire.pack_body(protocol.ack(ids)))
        self.counters.add("episodes_acked", len(ids))
