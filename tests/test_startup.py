"""A starting server answers at once: 503 "starting" (not "connection refused") until ready."""

from __future__ import annotations

import time

import httpx

from croupier.api.schemas import Problem
from croupier.local_server import free_port, start_serve, stop
from tests.conftest import STARTUP_TIMEOUT_S


def test_healthz_answers_starting_before_the_app_is_ready(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["--data-dir", str(tmp_path / "data"), "--log-level", "warning"]
    t0 = time.monotonic()
    proc = start_serve(args, port)
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
        stop(proc, 10)
    assert seen and seen[-1][1] == 200, seen[-3:]
    starting = [s for s in seen if s[1] == 503]
    assert starting, "no 503 'starting' answer before the server was ready"
    # The one error shape the document declares for every route (a `Problem`), typed.
    body = starting[0][2]
    assert Problem.model_validate(body).type == "urn:croupier:problem:starting", body
    assert body["status"] == 503 and body["ready"] is False and body["retry_after"] == 1
    assert other is not None and other.status_code == 503
    assert other.headers["retry-after"] == "1"
    print(f"\nfirst answer after {seen[0][0]:.2f} s, ready (200) after {seen[-1][0]:.2f} s")
