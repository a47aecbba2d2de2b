"""Ray's processes left behind by a trainer that died without shutting Ray down.

`ray.init` (a local session, no `--ray-address`) starts Ray's processes as children of the
trainer. A trainer killed with SIGKILL (or by the OOM killer) cannot stop them, and two of them
outlive it, reparented to init: `ray::DashboardAgent` and `ray::RuntimeEnvAgent`, the raylet's
children (measured: ray 2.x, the trainer SIGKILLed 10 s after its `/healthz` said 200; the GCS,
raylet, monitor and workers died with it). systemd kills a unit's whole cgroup; other
supervisors (a shell, supervisord, a container without an init) leave them running.

So the trainer writes down its Ray processes (pid, start time, command) in its checkpoint dir
when it starts, and the next trainer on that dir kills those still alive before it starts
Ray: only a process with the recorded pid *and* start time (a reused pid has another) whose
command line is Ray's, and never while the trainer that recorded them still runs. Never
`ray stop`: it stops every Ray session of the machine, other trainers' too. Linux only
(`/proc`); elsewhere nothing is recorded or killed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from croupier.files import write_atomic

log = logging.getLogger(__name__)

FILE = "ray-processes.json"
PROC = Path("/proc")
# How long a leftover gets to exit on SIGTERM before SIGKILL.
TERM_GRACE_S = 3.0


@dataclass(frozen=True)
class RayProcess:
    pid: int
    start: int  # clock ticks after boot (/proc/<pid>/stat field 22): with the pid, an identity
    cmd: str


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process; None if there is none."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")": split after it.
    try:
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):  # a zombie is dead, only not yet reaped
            return None
        return int(fields[1]), int(fields[19])
    except (ValueError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def is_ray(cmd: str) -> bool:
    """A Ray process's command line: a worker or agent (`ray::…`) or a program from Ray's
    package (gcs_server, raylet, log_monitor.py, dashboard.py: `…/ray/…`)."""
    return cmd.startswith("ray::") or "/ray/" in cmd


def descendants(root: int) -> list[RayProcess]:
    """Every live process below `root` (children, their children …)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    found: list[RayProcess] = []
    todo, seen = [root], {root}
    while todo:  # bounded: each pid is visited once
        for pid in children.get(todo.pop(), []):
            if pid not in seen and (stat := _stat(pid)) is not None:
                seen.add(pid)
                todo.append(pid)
                found.append(RayProcess(pid, stat[1], _cmdline(pid)))
    return found


def record(directory: Path, root: int | None = None) -> list[RayProcess]:
    """Write down the Ray processes below this trainer (`root`: its pid), added to those this
    same trainer wrote before (Ray starts some after `ray.init` returns). Returns them."""
    if not PROC.is_dir():
        return []
    root = os.getpid() if root is None else root
    root_stat = _stat(root)
    if root_stat is None:
        return []
    path = Path(directory) / FILE
    known: dict[int, RayProcess] = {}
    previous = _read(path)
    if previous and previous.get("trainer") == [root, root_stat[1]]:
        known = {p.pid: p for p in _processes(previous)}
    for p in descendants(root):
        if is_ray(p.cmd):
            known[p.pid] = p
    body = {
        "boot_id": _boot_id(),
        "trainer": [root, root_stat[1]],
        "processes": [asdict(p) for p in known.values()],
    }
    write_atomic(path, json.dumps(body, indent=1))
    return list(known.values())


def kill_leftovers(directory: Path) -> list[int]:
    """Stop the Ray processes a dead trainer on `directory` left running (see the module
    doc); returns their pids. The record is removed once they are gone."""
    path = Path(directory) / FILE
    body = _read(path)
    if not body or body.get("boot_id") != _boot_id():
        return []  # nothing recorded, or recorded before a reboot: nothing of it runs
    pid, start = body.get("trainer") or (None, None)
    trainer = _stat(pid) if isinstance(pid, int) else None
    if trainer is not None and trainer[1] == start:
        log.warning("the trainer that recorded %s (pid %d) still runs: not touching its Ray "
                    "processes (two trainers on one checkpoint dir?)", path, pid)  # fmt: skip
        return []
    alive = [
        p
        for p in _processes(body)
        if p.pid != os.getpid() and _still(p) and is_ray(_cmdline(p.pid))
    ]
    for p in alive:
        _signal(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while any(_still(p) for p in alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in alive:
        if _still(p):
            _signal(p.pid, signal.SIGKILL)
    if alive:
        log.warning("stopped %d Ray processes a killed trainer left running: %s", len(alive),
                    ", ".join(f"{p.pid} {p.cmd[:40]}" for p in alive))  # fmt: skip
    path.unlink(missing_ok=True)
    return [p.pid for p in alive]


def forget(directory: Path) -> None:
    """Ray was shut down properly: nothing of it is left to stop."""
    (Path(directory) / FILE).unlink(missing_ok=True)


def _still(p: RayProcess) -> bool:
    stat = _stat(p.pid)
    return stat is not None and stat[1] == p.start


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, sig)


def _read(path: Path) -> dict | None:
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _processes(body: dict) -> list[RayProcess]:
    out = []
    for p in body.get("processes") or []:
        if isinstance(p, dict) and all(isinstance(p.get(k), int) for k in ("pid", "start")):
            out.append(RayProcess(p["pid"], p["start"], str(p.get("cmd", ""))))
    return out
