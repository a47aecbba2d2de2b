"""Ray processes a SIGKILLed trainer left running are stopped by the next start, by their
recorded pids (never `ray stop`), and nothing else is.

Quick: stand-in processes named as Ray's (`exec -a ray::…`) below a stand-in trainer.
Long (`make test-long`): a real `croupier train` SIGKILLed and started again on its dir.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from croupier.trainer import ray_processes
from tests.conftest import free_port, wait_for

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")


def _alive(pid: int) -> bool:
    return ray_processes._stat(pid) is not None


def _stand_in_trainer() -> tuple[subprocess.Popen, list[int]]:
    """A process with two children named as Ray's agents are, and one that is not Ray's."""
    script = (
        "(exec -a ray::DashboardAgent sleep 300) & (exec -a ray::RuntimeEnvAgent sleep 300) & "
        "(exec sleep 301) & wait"
    )
    trainer = subprocess.Popen(["bash", "-c", script])

    def children() -> list[int] | None:
        found = ray_processes.descendants(trainer.pid)
        return [p.pid for p in found] if len(found) == 3 else None

    return trainer, wait_for(children, 10, 0.05, "the stand-in's children")


@pytest.mark.integration
def test_the_next_start_stops_only_the_recorded_ray_processes_of_a_dead_trainer(tmp_path):
    trainer, children = _stand_in_trainer()
    try:
        recorded = ray_processes.record(tmp_path, root=trainer.pid)
        names = sorted(p.cmd.split()[0] for p in recorded)
        assert names == ["ray::DashboardAgent", "ray::RuntimeEnvAgent"], recorded
        # While the trainer that recorded them runs, nothing is touched (a second trainer on
        # the same dir must not kill the first one's Ray).
        assert ray_processes.kill_leftovers(tmp_path) == []
        assert all(_alive(pid) for pid in children)

        trainer.send_signal(signal.SIGKILL)  # what systemd-less supervisors leave behind
        trainer.wait(10)
        assert all(_alive(pid) for pid in children), "the children outlive their parent"
        # Spared: a recorded pid whose start time differs (the pid reused by another
        # process), and a recorded process whose command is not Ray's.
        agent, reused = sorted(recorded, key=lambda p: p.cmd)
        (not_ray,) = set(children) - {p.pid for p in recorded}
        body = json.loads((tmp_path / ray_processes.FILE).read_text())
        for entry in body["processes"]:
            if entry["pid"] == reused.pid:
                entry["start"] -= 1
        start = ray_processes._stat(not_ray)[1]
        body["processes"].append({"pid": not_ray, "start": start, "cmd": "sleep 301"})
        (tmp_path / ray_processes.FILE).write_text(json.dumps(body))

        assert ray_processes.kill_leftovers(tmp_path) == [agent.pid]
        wait_for(lambda: not _alive(agent.pid), 10, 0.05, "the leftover gone")
        assert _alive(reused.pid) and _alive(not_ray), "killed a process not proven Ray's"
        assert not (tmp_path / ray_processes.FILE).exists()
        assert ray_processes.kill_leftovers(tmp_path) == []  # once is enough
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if trainer.poll() is None:
            trainer.kill()


def _train(checkpoint_dir: Path, metrics_port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "croupier", "train", "--algo", "ppo", "--hiddens", "16"]
    cmd += ["--listen", f"127.0.0.1:{free_port()}", "--checkpoint-dir", str(checkpoint_dir)]
    cmd += ["--metrics-port", str(metrics_port), "--log-level", "info"]
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT)


def _healthy(port: int, proc: subprocess.Popen) -> bool:
    import httpx

    assert proc.poll() is None, f"the trainer exited with {proc.returncode}"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.long
@pytest.mark.system
@pytest.mark.timeout(600)
def test_a_real_trainer_sigkilled_leaves_no_ray_process_after_the_next_start(tmp_path):
    """Two Ray start-ups (~30-60 s each on 2 loaded cores): in `make test-long`."""
    checkpoint_dir, port, log = tmp_path / "trainer", free_port(), tmp_path / "trainer.log"
    first = _train(checkpoint_dir, port, log)
    second = None
    try:
        wait_for(lambda: _healthy(port, first), 300, 1.0, "the first trainer")
        recorded = ray_processes._processes(
            json.loads((checkpoint_dir / ray_processes.FILE).read_text())
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        time.sleep(5.0)  # what dies with the trainer has died by now
        left = [p for p in recorded if ray_processes._still(p)]
        print(f"\nRay processes left by the SIGKILL: {[p.cmd[:60] for p in left]}")
        second = _train(checkpoint_dir, port, log)
        wait_for(lambda: _healthy(port, second), 300, 1.0, "the second trainer")
        assert not [p for p in left if ray_processes._still(p)], "leftovers still run"
        assert "Ray processes a killed trainer left running" in log.read_text() or not left
        second.send_signal(signal.SIGTERM)
        assert second.wait(120) == 0
        assert not (checkpoint_dir / ray_processes.FILE).exists()  # a clean exit: forgotten
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        ray_processes.kill_leftovers(checkpoint_dir)  # whatever a failed run left
