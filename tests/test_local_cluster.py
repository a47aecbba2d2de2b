"""`croupier.local_cluster` without starting Ray: its process bookkeeping (what `stop()` may
kill) and the `ray start` lines it would run (the full cluster: tests/test_multinode.py)."""

from __future__ import annotations

import json
import os
import stat

from croupier.local_cluster import LocalRayCluster, NodeSpec, _proc_table, alive


def test_alive_tells_a_reused_pid_from_the_process_that_had_it():
    me = os.getpid()
    start = _proc_table()[me][1]
    assert alive({me: start}) == {me: start}
    assert alive({me: start + 1}) == {}  # same pid, another start time: not ours to kill
    assert _proc_table()[me][0] == os.getppid()


def test_node_lines_block_use_free_ports_and_the_clusters_own_token():
    cluster = LocalRayCluster([NodeSpec(2, {"a": 1}), NodeSpec(3, {"b": 1})])
    try:
        head = cluster._node_args(cluster.specs[0], head=True)
        worker = cluster._node_args(cluster.specs[1], head=False)
        for line in (head, worker):
            assert "--block" in line  # a process that owns its node: stopped by its pid
            assert "52365" not in line and "8265" not in line  # no fixed default port
        assert head[head.index("--port") + 1] == str(cluster.port)
        assert worker[worker.index("--address") + 1] == cluster.address
        assert "--port" not in worker and "--head" not in worker
        assert json.loads(worker[worker.index("--resources") + 1]) == {"b": 1}
        assert worker[worker.index("--num-cpus") + 1] == "3"
        env = cluster.env({})
        assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(cluster.token_path)}
        assert len(cluster.token_path.read_text()) == 64
        assert stat.S_IMODE(cluster.token_path.stat().st_mode) == 0o600
        # `ray start --temp-dir` makes its temp dir 0777: the token lives in a 0700 folder of
        # its own, outside it.
        os.chmod(cluster.temp_dir, 0o777)  # as `ray start` leaves it
        token_dir = cluster.token_path.parent
        assert cluster.temp_dir not in cluster.token_path.parents
        assert stat.S_IMODE(token_dir.stat().st_mode) == 0o700
    finally:
        assert cluster.stop() == []  # never started: nothing to end
    assert not cluster.temp_dir.exists() and not token_dir.exists()


def test_progress_line_says_where_the_remote_runners_are():
    from croupier.trainer.progress import format_progress

    line = {"iteration": 3, "version": 7, "env_steps_per_s": 10.0, "env_steps": 100,
            "lag": {"p50": 0, "p90": 1}, "episode_return_mean": None,
            "payoff_per_hand": None, "connected_servers": 2}  # fmt: skip
    assert "runners" not in format_progress(line)  # the driver's own link
    two = [{"node_id": "n1"}, {"node_id": "n2"}]
    assert format_progress({**line, "runners": two}).endswith("runners 2 on 2 nodes")
    same = [{"node_id": "n1"}, {"node_id": "n1"}]
    assert format_progress({**line, "runners": same}).endswith("runners 2 on 1 node")


def test_a_dead_remote_runner_ends_the_run_with_a_clear_error_not_a_missing_counter():
    """Ray drops a dead env runner's answer (RLlib ignores actor errors when it may restart
    them): one of two answering must end the run saying so; it was a KeyError on the first
    progress counter (`steps_sampled`), or, for PPO, a loop waiting for every runner."""
    import pytest

    from croupier.trainer.run import Trainer, TrainOptions
    from croupier.trainer.runners import EnvRunnerLost, remote_runners_ready

    stats = {"steps_sampled": 5, "lag_histogram": {}, "weights_seq_no": 1, "idle_s": 0.0}

    class Group:
        def __init__(self, answering: int) -> None:
            self.answering = answering

        def num_remote_env_runners(self) -> int:
            return 2

        def num_healthy_remote_env_runners(self) -> int:
            return self.answering

        def foreach_env_runner(self, func, **kwargs):
            return [stats] * self.answering if "timeout_seconds" not in kwargs else [True] * 2

    trainer = Trainer(TrainOptions(num_env_runners=2, algo="ppo"))
    trainer.algo = type("Algo", (), {"env_runner_group": Group(2)})()
    assert trainer.link_stats()["steps_sampled"] == 10  # both answer: their sum
    assert remote_runners_ready(trainer.algo.env_runner_group, 1, "ppo")
    trainer.algo.env_runner_group = Group(1)
    with pytest.raises(EnvRunnerLost, match="1 of 2 env runners died"):
        trainer.link_stats()
    with pytest.raises(EnvRunnerLost, match="restart the trainer"):
        remote_runners_ready(trainer.algo.env_runner_group, 1, "ppo")
