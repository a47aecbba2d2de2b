"""A real multi-node Ray run: a head and a worker node started with `ray start` on this machine
(`croupier.local_cluster`), `croupier train --ray-address` attached with two learners and two
env runners placed one per node (a custom resource each node has one unit of), two
`croupier serve` processes, one on each runner's port, and the reference engine's games routed
over both servers.

Checked: Ray placed the runners on different nodes (its own node list against the node id each
runner reports in the trainer's progress line), both learners exist, every server's version
went up while it played, each runner's (so each server's) episodes were handed to the
learners and trained, and stopping the nodes leaves none of their processes behind.

Long (~5 minutes on the shared 2-core box: two Ray nodes, four actors and two servers start),
so it is kept out of `make test`; `make test-long` (CROUPIER_LONG_TESTS=1) runs it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from croupier.engine.runner import run_engine
from croupier.local_cluster import LocalRayCluster, NodeSpec, alive
from croupier.local_server import free_port
from croupier.trainer.progress import PROGRESS, last_progress
from tests.conftest import running_server_logged, wait_for

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(
        not os.environ.get("CROUPIER_LONG_TESTS"), reason="long: make test-long runs it"
    ),
]

RUNNER = "croupier_runner"
LINK_UP_S = 360.0  # the trainer attaches, builds 2 learners + 2 runners on a loaded box
PLAY_MAX_S = 240.0
VERSIONS = 3  # each server sees at least this many versions installed


def _versions(url: str) -> int:
    return int(httpx.get(url + "/healthz", timeout=10).json()["version"])


def _link_up(url: str) -> bool:
    link = httpx.get(url + "/healthz", timeout=10).json().get("trainer_link") or {}
    return bool(link.get("connected"))


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=2):
        return False
    return True


def test_two_nodes_two_learners_a_runner_per_node(tmp_path: Path):
    cluster = LocalRayCluster(
        [NodeSpec(2, {RUNNER: 1, "head_node": 1}), NodeSpec(2, {RUNNER: 1, "worker_node": 1})],
        work_dir=tmp_path,
    )
    trainer = None
    processes: dict[int, int] = {}
    try:
        cluster.start()
        head, worker = cluster.node_with("head_node"), cluster.node_with("worker_node")
        assert head != worker, "one raylet, not two"
        port = free_port()
        log = open(tmp_path / "trainer.log", "wb")  # noqa: SIM115 - closed with the process
        trainer = subprocess.Popen(
            [sys.executable, "-m", "croupier", "train", "--algo", "ppo",
             "--train-batch-size", "400", "--minibatch-size", "200", "--num-epochs", "1",
             "--listen", f"127.0.0.1:{port}", "--checkpoint-dir", str(tmp_path / "trainer"),
             "--minutes", "8", "--log-level", "info", "--no-rules-anchor",
             "--ray-address", cluster.address, "--num-learners", "2",
             "--num-env-runners", "2", "--env-runner-resources", json.dumps({RUNNER: 1})],
            stdout=log, stderr=subprocess.STDOUT, env=cluster.env(),
        )  # fmt: skip
        log.close()
        progress = tmp_path / "trainer" / PROGRESS
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(
                    running_server_logged(
                        "--trainer", f"127.0.0.1:{port + i}", "--seats", "learned,rules"
                    )  # fmt: skip
                )
                for i in (1, 2)  # runner i listens on --listen port + i
            ]
            urls = [s.url for s in servers]

            def links_up() -> bool:
                assert trainer.poll() is None, (tmp_path / "trainer.log").read_text()[-3000:]
                return all(_link_up(u) for u in urls)

            wait_for(links_up, LINK_UP_S, 2.0, "both servers linked to their runner")
            seen: list[list[int]] = [[_versions(u)] for u in urls]
            t0 = time.monotonic()
            hands = 0
            while time.monotonic() - t0 < PLAY_MAX_S:
                played = asyncio.run(
                    run_engine(
                        ",".join(urls),
                        "leduc-holdem",
                        32,
                        ["learned", "rules"],
                        None,
                        10.0,
                        batch=True,
                        seed=hands,
                    )  # fmt: skip
                )
                assert played.errors == 0, played.error_samples
                hands += played.hands
                for s, u in zip(seen, urls, strict=True):
                    s.append(_versions(u))
                if all(s[-1] - s[0] >= VERSIONS for s in seen):
                    break
            print("versions seen per server:", seen, "hands:", hands)
            for s in seen:
                assert s[-1] > 0 and s[-1] - s[0] >= VERSIONS, seen
                assert s == sorted(s), f"a server's version went down: {seen}"

            last = last_progress(progress) or {}
            runners = last["runners"]
            print("runners:", runners, "learners on:", last["learner_nodes"])
            assert {r["node_id"] for r in runners} == {head, worker}, (runners, head, worker)
            assert len(last["learner_nodes"]) == 2
            assert set(last["learner_nodes"]) <= {head, worker}
            for r in runners:  # one server each, its episodes handed to the learners
                assert r["connected_servers"] == 1, runners
                assert r["episodes_received"] > 0 and r["steps_sampled"] > 0, runners
            assert last["env_steps_trained"] and last["env_steps_trained"] > 0, last
            for s in servers:
                assert s.get("/healthz")["episodes"]["shipped"] > 0
        trainer.terminate()
        assert trainer.wait(120) == 0, (tmp_path / "trainer.log").read_text()[-3000:]
        trainer = None
        processes = cluster.processes()
        assert len(processes) > 4, processes  # 2 x ray start, GCS, 2 raylets, workers...
    finally:
        if trainer is not None and trainer.poll() is None:
            trainer.kill()
            trainer.wait(30)
        survivors = cluster.stop()
    # Ray's own node shutdown (SIGTERM to each `ray start --block`) ended every process.
    assert survivors == [], f"still running after the nodes stopped: {survivors}"
    assert alive(processes) == {}, alive(processes)
    assert _refused(cluster.address), "the head's GCS port still answers"
