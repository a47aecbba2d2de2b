"""A starting server answers at once: 503 "starting" (not "connection refused") until ready,
and no slow peer holds that up."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from croupier.api.schemas import Problem
from croupier.local_server import free_port, start_serve, stop
from tests.conftest import STARTUP_TIMEOUT_S, wait_for


class Drip:
    """A peer sending one byte of a request head every `every_s` seconds, never finishing it;
    reconnecting whenever it is closed (an attacker would)."""

    def __init__(self, port: int, every_s: float = 0.2):
        self.port, self.every_s = port, every_s
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    self.connections += 1
                    while not self._stop.wait(self.every_s):
                        sock.sendall(b"G")
            except OSError:
                self._stop.wait(0.05)  # not listening yet, or closed on us: again

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_healthz_answers_starting_before_the_app_is_ready(tmp_path):
    """And a peer dripping at the port from its first moment (one byte every 0.2 s,
    reconnecting whenever cut: the review's probe) delays neither those answers nor the
    serving: before, nothing was answered and the app never took the socket over while the
    drip lasted."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["--data-dir", str(tmp_path / "data"), "--log-level", "warning"]
    t0 = time.monotonic()
    proc = start_serve(args, port)
    drip = Drip(port)
    seen: list[tuple[float, int, dict]] = []
    other = None
    try:
        while time.monotonic() - t0 < STARTUP_TIMEOUT_S and proc.poll() is None:
            try:
                r = httpx.get(url + "/healthz", timeout=5)
            except httpx.TransportError:
                time.sleep(0.02)
                continue
            seen.append((time.monotonic() - t0, r.status_code, r.json()))
            if r.status_code == 200:
                break
            if other is None:  # any route, while starting: 503 + Retry-After, not a hang
                other = httpx.post(url + "/v1/games", json={"game": "leduc-holdem"}, timeout=5)
            time.sleep(0.02)
    finally:
        drip.stop()
        stop(proc, 10)
    assert seen and seen[-1][1] == 200, seen[-3:]
    starting = [s for s in seen if s[1] == 503]
    assert starting, "no 503 'starting' answer before the server was ready"
    # From the last "starting" to serving: the app's own start-up (its lifespan: 3.1 s
    # measured on a loaded 2-core box), no wait on the dripping peer.
    assert seen[-1][0] - starting[-1][0] < 10.0, (starting[-1], seen[-1])
    assert drip.connections >= 2, "the dripping peer was never cut"
    # The one error shape the document declares for every route (a `Problem`), typed.
    body = starting[0][2]
    assert Problem.model_validate(body).type == "urn:croupier:problem:starting", body
    assert body["status"] == 503 and body["ready"] is False and body["retry_after"] == 1
    assert other is not None and other.status_code == 503
    assert other.headers["retry-after"] == "1"
    print(f"\nfirst answer after {seen[0][0]:.2f} s, ready (200) after {seen[-1][0]:.2f} s, "
          f"{seen[-1][0] - starting[-1][0]:.2f} s after the last 'starting'; the drip "
          f"connected {drip.connections} times")  # fmt: skip


@pytest.mark.unit
def test_a_drip_client_neither_holds_up_health_checks_nor_the_hand_over():
    """The review's probe, scaled down: one byte every 0.2 s (it used 0.5 s) to a starting
    server's early socket. Before: every health check waited behind it, and `hand_over` (the
    app taking the socket over) waited as long as the drip lasted."""
    from croupier.api.early import HEAD_DEADLINE_S, EarlyHealth

    port = free_port()
    early = EarlyHealth("127.0.0.1", port)
    drip = Drip(port)
    try:
        wait_for(lambda: drip.connections >= 1, 5, 0.01, "the drip to connect")
        time.sleep(0.3)
        t0 = time.monotonic()
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert r.status_code == 503 and r.json()["type"] == "urn:croupier:problem:starting"
        assert time.monotonic() - t0 < 0.5
        time.sleep(HEAD_DEADLINE_S + 0.3)  # the drip's first connection is past its deadline
        assert drip.connections >= 2, "a dripping connection outlived its deadline"
        handed: list[socket.socket] = []
        t0 = time.monotonic()
        taker = threading.Thread(target=lambda: handed.append(early.hand_over()), daemon=True)
        taker.start()
        taker.join(3)
        assert handed, "hand_over waited on the dripping client"
        assert time.monotonic() - t0 < 0.5
    finally:
        drip.stop()
        early.sock.close()
