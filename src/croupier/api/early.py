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
"""

from __future__ import annotations

import json
import socket
import threading
import time

import uvicorn

READ_LIMIT = 8192  # a request head; the body (if any) is never read
READ_TIMEOUT_S = 1.0
POLL_S = 0.05
BACKLOG = 2048  # uvicorn's default


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
        self.sock.settimeout(POLL_S)
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="croupier-early", daemon=True)
        if answer:
            self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, BlockingIOError):
                continue
            except OSError:
                return  # closed under us
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(READ_TIMEOUT_S)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < READ_LIMIT:
                chunk = conn.recv(READ_LIMIT)
                if not chunk:
                    return
                head += chunk
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
            conn.sendall(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                b"Retry-After: 1\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            self.answered += 1
        except OSError:
            pass  # the client went away: nothing to tell it

    def hand_over(self) -> socket.socket:
        """Stop answering (a request being answered is finished first) and return the socket
        for uvicorn; connections arriving meanwhile wait in the listen backlog."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sock.settimeout(None)
        return self.sock

    def close(self) -> None:
        self.hand_over().close()
