"""`croupier serve` as a child process on a free loopback port: the one way the demo, the
arena, the benchmarks and the tests start a server (start, wait for /healthz, stop)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from typing import IO, Any

# Generous: importing torch + RLlib on a loaded 2-core box took over 120 s at load average ~25
# (two `bench strength` runs failed there); the wait ends as soon as the server answers.
READY_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0
CROUPIER = [sys.executable, "-m", "croupier"]


class ServerExited(RuntimeError):
    """The child exited before it answered /healthz."""


def free_port() -> int:
    """A port the kernel just handed out on loopback (released again for the server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
        return json.loads(r.read())


def wait_until_up(
    url: str, proc: subprocess.Popen, timeout: float = READY_TIMEOUT_S, poll_s: float = 0.3
) -> None:
    """Return once `url`/healthz answers 200; `ServerExited` if `proc` ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerExited(f"{proc.args[2:4]} exited with {proc.returncode}")
        try:
            get_json(url + "/healthz", timeout=1.0)
            return
        except OSError:  # refused, or 503 "starting" (HTTPError is an OSError)
            time.sleep(poll_s)
    raise TimeoutError(f"{url} did not come up in {timeout:.0f} s")


def stop(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM (the server flushes its spool on the way out), then SIGKILL if it hangs."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def start_serve(
    args: Sequence[str],
    port: int,
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> subprocess.Popen:
    """`[prefix] python -m croupier serve --port PORT *args`, output to `stdout` (not waited)."""
    cmd = [*prefix, *CROUPIER, "serve", "--port", str(port), *args]
    return subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT, env=env)


def start_train(
    args: Sequence[str],
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`python -m croupier train *args`, output to `stdout` (not waited)."""
    cmd = [*CROUPIER, "train", *args]
    return subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT, env=env)


@contextlib.contextmanager
def serving(
    args: Sequence[str],
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    timeout: float = READY_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`croupier serve *args` on a free loopback port, up; yields (URL, process); stopped after."""
    port = free_port()
    proc = start_serve(args, port, stdout, env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, proc, timeout)
        yield url, proc
    finally:
        stop(proc)
