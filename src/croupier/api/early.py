"""Answer from the first moment: `croupier serve` binds its port before the slow imports.

A server takes ~4–7 s from exec to serving (measured on this 2-core machine: torch ~1.5–2 s,
RLlib ~1.5–1.8 s, RLCard's rule agents ~0.6 s; loading weights and opening the spool take
milliseconds). Until now nothing listened in that time, so a health check saw "connection
refused", the same as a dead server. Now the port is bound first and, until the app takes the
same socket over, every request gets a 503 `Problem` of type `urn:croupier:problem:starting`
(with `"ready": false` and the seconds since start) and `Retry-After: 1`: alive but not ready,
which orchestrators and load balancers understand, in the one error shape the OpenAPI document
declares for every route. Only the standard library and uvicorn (which binds the socket as it
would itself) are imported here.

One thread serves every early connection at once (non-blocking sockets, one selector), each
with a total deadline for its request head (`HEAD_DEADLINE_S`, however the bytes are paced) and
at most `MAX_PENDING` of them (past it the oldest is closed). `hand_over` never waits on a
client: the thread stops within one poll and closes whatever is still pending (a client
mid-head gets the 503 if its socket takes it, then the close; it retries). Before, one peer
sending a byte every 0.5 s held the only thread, so no other health check was answered and
the app could not take the socket over for as long as the drip lasted (41 s in a review's
probe, up to ~2 h possible).
"""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import socket
import threading
import time

import uvicorn

log = logging.getLogger(__name__)

READ_LIMIT = 8192  # a request head; the body (if any) is never read
# A whole request head, in total: a real client sends it in one segment, at once.
HEAD_DEADLINE_S = 1.0
MAX_PENDING = 64  # connections being read at once; past it the oldest is closed
POLL_S = 0.05  # how soon the thread sees `hand_over`
BACKLOG = 2048  # uvicorn's default


class _Pending:
    __slots__ = ("deadline", "head")

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.head = b""


class EarlyHealth:
    """The bound listening socket plus a thread answering 503 "starting" until `hand_over`."""

    def __init__(self, host: str, port: int, answer: bool = True):
        """`answer=False` (a TLS server: this plain-HTTP answer would break the handshake)
        binds and listens only: connections wait in the backlog until the app is up."""
        self.started = time.monotonic()
        # uvicorn's own binding (address family, SO_REUSEADDR); a port in use exits here with
        # uvicorn's "address already in use" message, as it would have later.
        self.sock = uvicorn.Config(app=None, host=host, port=port).bind_socket()
        self.sock.listen(BACKLOG)  # bind_socket leaves listen() to the event loop
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="croupier-early", daemon=True)
        if answer:
            self.sock.setblocking(False)
            self._thread.start()

    def _serve(self) -> None:
        pending: dict[socket.socket, _Pending] = {}  # oldest first
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            try:
                while not self._stop.is_set():
                    for key, _ in selector.select(POLL_S):
                        if key.fileobj is self.sock:
                            self._accept(selector, pending)
                        else:
                            self._read(selector, pending, key.fileobj)  # type: ignore[arg-type]
                    now = time.monotonic()
                    for conn in [c for c, p in pending.items() if p.deadline <= now]:
                        self._close(selector, pending, conn)
            except OSError:
                pass  # the listening socket closed under us
            finally:  # the hand-over: nothing pending is waited for
                for conn in list(pending):
                    self._reply(conn)
                    self._close(selector, pending, conn)

    def _accept(self, selector: selectors.BaseSelector, pending: dict) -> None:
        for _ in range(MAX_PENDING):  # what the backlog holds now, bounded per turn
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            if len(pending) >= MAX_PENDING:
                self._close(selector, pending, next(iter(pending)))
            pending[conn] = _Pending(time.monotonic() + HEAD_DEADLINE_S)
            selector.register(conn, selectors.EVENT_READ)

    def _read(self, selector: selectors.BaseSelector, pending: dict, conn: socket.socket) -> None:
        entry = pending.get(conn)
        if entry is None:
            return
        try:
            chunk = conn.recv(READ_LIMIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client went away
            self._close(selector, pending, conn)
            return
        entry.head += chunk
        if b"\r\n\r\n" in entry.head or len(entry.head) >= READ_LIMIT:
            if self._reply(conn):
                self.answered += 1
            self._close(selector, pending, conn)

    def _reply(self, conn: socket.socket) -> bool:
        """The 503, if the socket takes it now (a small answer: it always does, unless the
        client stopped reading)."""
        body = json.dumps(
            {
                # `croupier.api.schemas.Problem` (not imported: pydantic is slow to load)
                "type": "urn:croupier:problem:starting",
                "title": "Service Unavailable",
                "status": 503,
                "detail": "the server is starting: retry after Retry-After seconds",
                "retry_after": 1,
                "errors": None,
                "ready": False,
                "seconds": round(time.monotonic() - self.started, 2),
            }
        ).encode()
        answer = (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        try:
            return conn.send(answer) == len(answer)
        except OSError:
            return False  # the client went away, or is not reading: nothing to tell it

    def _close(self, selector: selectors.BaseSelector, pending: dict, conn: socket.socket) -> None:
        pending.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        conn.close()

    def hand_over(self) -> socket.socket:
        """Stop answering and return the socket for uvicorn; connections arriving meanwhile
        wait in the listen backlog. Waits one poll at most, never on a client: whatever is
        still being read is answered if it can be and closed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)  # the loop never blocks: POLL_S, then its cleanup
            if self._thread.is_alive():
                log.warning("the early health thread did not stop; serving anyway")
        self.sock.setblocking(True)
        return self.sock

    def close(self) -> None:
        self.hand_over().close()
