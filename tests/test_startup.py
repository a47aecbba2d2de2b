"""A starting server answers at once: 503 "starting" (not "connection refused") until ready."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tests.conftest import STARTUP_TIMEOUT_S, free_port


def test_healthz_answers_starting_before_the_app_is_ready(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "croupier", "serve", "--port", str(port)]
    cmd += ["--data-dir", str(tmp_path / "data"), "--log-level", "warning"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        proc.terminate()
        proc.wait(10)
    assert seen and seen[-1][1] == 200, seen[-3:]
    starting = [s for s in seen if s[1] == 503]
    assert starting, "no 503 'starting' answer before the server was ready"
    assert starting[0][2]["status"] == "starting" and starting[0][2]["ready"] is False
    assert other is not None and other.status_code == 503
    assert other.headers["retry-after"] == "1"
    print(f"\nfirst answer after {seen[0][0]:.2f} s, ready (200) after {seen[-1][0]:.2f} s")
