"""A Ray cluster of several nodes on this machine, each node started with `ray start --block`:
what `bench cluster` and the multi-node system test train on (docs/scale-out.md).

Why `ray start` and not `ray.cluster_utils.Cluster`: both give each node a raylet of its own
with its own resources, but `ray start` is what an operator runs on a real cluster, so the
path `croupier train --ray-address` is checked on is the documented one; `Cluster` is a test
utility whose nodes live and die with the Python process that made them.

Why `--block`, and not `ray stop`: `ray stop` ends every Ray process of every user on the
machine, found by name (ray/scripts/scripts.py, `kill_procs`), and on a shared machine that
includes other people's Ray sessions. A `ray start --block` process owns its node: on SIGTERM
Ray's own shutdown hook ends that node's processes (`Node._register_shutdown_hooks`), so this
cluster is stopped by the process ids it started, and `stop()` checks that every process the
nodes had is gone.

Every port is chosen free (two nodes on one machine must not share the fixed defaults, e.g.
the dashboard agent's 52365, nor collide with other sessions' Ray); nodes join at 127.0.0.1
(Ray 2.60 resolves a node's own address to the machine's: Ray's traffic stays on this machine,
not on the loopback interface); the temp dir is short (Unix socket paths are capped at 107
bytes); each node's object store is small (256 MB: /dev/shm is shared with other work).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from croupier.local_server import free_port

RAY = [sys.executable, "-m", "ray.scripts.scripts"]
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


@dataclass
class NodeSpec:
    """One node: its logical CPUs (a scheduling number: the nodes share this machine's cores)
    and its custom resources, e.g. {"croupier_runner": 1} to place one env runner there."""

    num_cpus: int = 2
    resources: dict[str, float] = field(default_factory=dict)


@dataclass
class Node:
    spec: NodeSpec
    proc: subprocess.Popen
    log_path: Path


class LocalRayCluster:
    """`with LocalRayCluster([NodeSpec(...), NodeSpec(...)]) as cluster:` — the first node is
    the head; `cluster.address` is what `croupier train --ray-address` takes."""

    def __init__(self, nodes: list[NodeSpec], work_dir: Path | None = None):
        if not nodes:
            raise ValueError("a cluster needs at least a head node")
        self.specs = nodes
        self.temp_dir = Path(tempfile.mkdtemp(prefix="cr-ray-", dir="/tmp"))
        self.work_dir = Path(work_dir) if work_dir else self.temp_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[Node] = []
        # Ray 2.60 turns token authentication on for `ray start` and reads the token from
        # ~/.ray/auth_token unless told otherwise: this cluster has a token of its own, and
        # every process that joins it (nodes, the trainer, `list_nodes`) gets `env()`.
        # In a folder of its own (mkdtemp: 0700): `ray start --temp-dir` makes its temp dir
        # 0777, and a token file there is one rename or symlink away from other users.
        self.token_dir = Path(tempfile.mkdtemp(prefix="cr-ray-token-", dir="/tmp"))
        self.token_path = self.token_dir / "auth_token"
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        # Every process the nodes had: {pid: start time} (see `stop`).
        self._seen: dict[int, int] = {}

    def __enter__(self) -> LocalRayCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process that joins this cluster (its token)."""
        return {
            **(os.environ if base is None else base),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.token_path),
        }

    # --- start -----------------------------------------------------------------------------

    def _node_args(self, spec: NodeSpec, head: bool) -> list[str]:
        where = (
            ["--head", "--port", str(self.port), "--include-dashboard", "false"]
            if head
            else ["--address", self.address]
        )
        return [
            "start", *where, "--block", "--disable-usage-stats",
            "--temp-dir", str(self.temp_dir),
            "--num-cpus", str(spec.num_cpus), "--num-gpus", "0",
            "--object-store-memory", str(256 * 1024 * 1024),
            "--resources", json.dumps(spec.resources),
            # Free ports, never the fixed defaults (see the module's docstring); workers
            # bind where the OS says (0/0, as ray.cluster_utils does).
            "--dashboard-agent-listen-port", str(free_port()),
            "--dashboard-agent-grpc-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
            "--min-worker-port", "0", "--max-worker-port", "0",
        ]  # fmt: skip

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the head, wait for it, then each other node, waiting until the cluster lists
        them all alive."""
        for i, spec in enumerate(self.specs):
            log_path = self.work_dir / f"ray-node-{i}.log"
            proc = subprocess.Popen(
                [*RAY, *self._node_args(spec, head=i == 0)],
                stdout=log_path.open("wb"),
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,  # a Ctrl-C in the caller's terminal is the caller's
            )
            self.nodes.append(Node(spec, proc, log_path))
            self._wait_alive(i + 1, timeout_s)

    def _wait_alive(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for i, node in enumerate(self.nodes):
                if node.proc.poll() is not None:
                    raise RuntimeError(
                        f"ray node {i} exited with {node.proc.returncode}:\n"
                        + node.log_path.read_text(errors="replace")[-3000:]
                    )
            try:
                alive = [n for n in self.list_nodes(timeout_s=30) if n["Alive"]]
            except (RuntimeError, subprocess.TimeoutExpired):
                alive = []
            if len(alive) >= count:
                self._seen.update(self.processes())
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{count} ray nodes not alive after {timeout_s:.0f} s")
            time.sleep(1.0)

    # --- ask Ray ---------------------------------------------------------------------------

    def list_nodes(self, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """`ray.nodes()` as the cluster's GCS answers it (from a short-lived driver process,
        so that the caller's own process holds no Ray session)."""
        script = (
            "import json, ray\n"
            f"ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False)\n"
            "print('NODES=' + json.dumps([{k: n[k] for k in ('NodeID', 'Alive', 'Resources',"
            " 'NodeManagerPort')} for n in ray.nodes()]))\n"
            "ray.shutdown()\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=self.env(),
        )
        for line in out.stdout.splitlines():
            if line.startswith("NODES="):
                return json.loads(line[len("NODES=") :])
        raise RuntimeError(f"ray.nodes() failed ({out.returncode}): {out.stderr[-2000:]}")

    def node_with(self, resource: str) -> str:
        """The id of the (alive) node that has custom resource `resource`."""
        found = [
            n["NodeID"] for n in self.list_nodes() if n["Alive"] and resource in n["Resources"]
        ]
        if len(found) != 1:
            raise RuntimeError(f"{len(found)} alive nodes have {resource!r}")
        return found[0]

    def processes(self) -> dict[int, int]:
        """{pid: start time} of each `ray start` and its descendants, from /proc (Linux; the
        start time tells a process from a later one that got its pid)."""
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        found: dict[int, int] = {}
        todo = [n.proc.pid for n in self.nodes if n.proc.pid in table]
        while todo:
            pid = todo.pop()
            if pid not in found:
                found[pid] = table[pid][1]
                todo += children.get(pid, [])
        return found

    # --- stop ------------------------------------------------------------------------------

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
        """End the nodes, workers first, head last (SIGTERM to each `ray start --block`: Ray
        ends that node's processes), then SIGKILL what is left of the processes they had.
        Returns the pids still alive after the SIGTERMs (empty: Ray cleaned up by itself)."""
        self._seen.update(self.processes())
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                node.proc.terminate()
                try:
                    node.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(10)
        deadline = time.monotonic() + timeout_s
        survivors = alive(self._seen)
        while survivors and time.monotonic() < deadline:
            time.sleep(0.5)
            survivors = alive(survivors)
        for pid in survivors:  # only processes this cluster started (same pid, same start)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        shutil.rmtree(self.token_dir, ignore_errors=True)
        return sorted(survivors)


def _proc_table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, start time in clock ticks)} of every live, non-zombie process."""
    table: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after it.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[19]))
    return table


def alive(processes: dict[int, int]) -> dict[int, int]:
    """Those of `processes` ({pid: start time}) still running (not reused, not zombies)."""
    table = _proc_table()
    return {pid: t for pid, t in processes.items() if pid in table and table[pid][1] == t}
