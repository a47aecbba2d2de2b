"""Shared fixtures: a real `croupier serve` subprocess, an in-process app, sample game states."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port the kernel just handed out on loopback (released again for the server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(log: Any, n: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")[-n:]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)


def _wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float) -> bool:
    """True once /healthz answers 200; False if the process exited first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"server at {url} not healthy after {timeout_s} s")


@contextlib.contextmanager
def running_server(*args: str, timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[str]:
    """Run `python -m croupier serve --port <free> *args`; yield its base URL; stop it after.

    A port grabbed between our probe and the server's bind makes the server exit at once: that
    is retried (a few times, each bounded)."""
    for _attempt in range(3):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "croupier", "serve", "--port", str(port), *args]
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            try:
                try:
                    healthy = _wait_healthy(proc, url, timeout_s)
                except TimeoutError as e:
                    raise AssertionError(f"{e}\n--- server log ---\n{_log_tail(log)}") from None
                if not healthy:
                    tail = _log_tail(log)
                    if "address already in use" in tail.lower():
                        continue
                    raise AssertionError(f"server exited with {proc.returncode}:\n{tail}")
                yield url
                return
            finally:
                _stop(proc)
    raise AssertionError("could not bind a free loopback port for the server")


@pytest.fixture(scope="module")
def leduc_server() -> Iterator[str]:
    """A real Leduc server (seat mix learned,rules), one per test module."""
    with running_server("--game", "leduc-holdem", "--seats", "learned,rules") as url:
        yield url


@pytest.fixture
def server_factory() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """`with server_factory("--game", "uno") as url:` for tests that need a fresh server."""
    return running_server


def run_inprocess(test: Callable[[httpx.AsyncClient, Any], Awaitable[Any]], **config: Any) -> Any:
    """Build `create_app(ServerConfig(**config))`, run its lifespan (ASGITransport does not),
    and `asyncio.run` `test(client, service)` with an httpx client on the app."""
    from croupier.api.app import create_app
    from croupier.config import ServerConfig

    async def main() -> Any:
        app = create_app(ServerConfig(**config))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://croupier") as c:
                return await test(c, app.state.service)

    return asyncio.run(main())


@pytest.fixture
def inprocess() -> Callable[..., Any]:
    """`inprocess(async_fn, **ServerConfig fields)`: see `run_inprocess`."""
    return run_inprocess


def _rlcard_states(game: str, hands: int, seed: int, max_steps: int = 500) -> list[dict]:
    from croupier.engine.rlcard_games import RLCardTable

    table = RLCardTable(game)
    rng = random.Random(seed)
    states = []
    for hand in range(hands):
        table.reset(seed + hand)
        for _ in range(max_steps):
            if table.is_over():
                break
            state = table.state_json(table.current_player())
            states.append(state)
            table.step(rng.choice(state["legal_actions"]))
    return states


@pytest.fixture(scope="session")
def leduc_states() -> list[dict]:
    """Real Leduc states (RLCard's raw observation as JSON) from random-play hands."""
    states = _rlcard_states("leduc-holdem", hands=80, seed=11)
    assert len(states) > 150
    return states
