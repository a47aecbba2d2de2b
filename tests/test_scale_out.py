"""Scale-out: one engine routing games by id over two policy servers, both feeding one trainer;
episodes from both are trained on and the new weights reach both. Also the trainer's
`/metrics` (names present, values moving) and the servers' trainer-link metrics."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest

from croupier import rllib_private
from croupier.client import CroupierError, route_game
from croupier.routing import RoutedClient
from croupier.trainer.metrics import serve_trainer_metrics
from tests.conftest import BackgroundPlay, free_port, running_server_logged, wait_for
from tests.helpers.prometheus import parse, value
from tests.helpers.trainer import RunningTrainer, health, trainer_options, wait_quiet

pytestmark = pytest.mark.ray

TRAINER_METRICS = [
    "croupier_trainer_iterations_total",
    "croupier_trainer_weights_version",
    "croupier_trainer_connected_servers",
    "croupier_trainer_env_steps_per_second",
    "croupier_trainer_learner_steps_per_second",
    "croupier_trainer_learner_env_steps_trained_total",
    "croupier_trainer_steps_received_total",
    "croupier_trainer_episodes_received_total",
    "croupier_trainer_version_lag_bucket",
    "croupier_trainer_version_lag_count",
]


async def routed_game_lives_on_its_server(urls: list[str]) -> None:
    async with RoutedClient(urls) as client:
        game = await client.create_game("leduc-holdem", seats={"0": "rules", "1": "rules"})
        owner = route_game(game["game_id"], urls)
        other = next(u for u in urls if u != owner)
        with pytest.raises(CroupierError) as err:
            await client.clients[other].abort(game["game_id"])
        assert err.value.status == 404
        await client.abort(game["game_id"])  # routed: found on its owner


def test_two_servers_one_trainer_routed_engine(ray_session, tmp_path) -> None:
    rt = RunningTrainer(trainer_options(tmp_path))
    metrics_port = free_port()
    with contextlib.ExitStack() as stack:
        stack.callback(rt.close)
        rt.start()
        server = serve_trainer_metrics(rt.trainer, metrics_port)
        stack.callback(server.shutdown)
        scrape = f"http://127.0.0.1:{metrics_port}/metrics"
        args = ("--trainer", f"127.0.0.1:{rt.port}", "--seats", "learned,rules")
        servers = [stack.enter_context(running_server_logged(*args)) for _ in range(2)]
        urls = [s.url for s in servers]
        wait_for(lambda: rt.stats()["connected_servers"] == 2, 30, what="2 servers connected")
        asyncio.run(routed_game_lives_on_its_server(urls))

        before = parse(httpx.get(scrape).text)
        version0 = rt.seq()
        created0 = [health(s)["games_created"] for s in servers]
        shipped0 = [health(s)["episodes"]["shipped"] for s in servers]
        received0 = rt.stats()["episodes_received"]
        # One engine, both servers: `croupier engine --url a,b` does exactly this.
        with BackgroundPlay(",".join(urls), seats=["learned", "rules"], games=8) as play:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 90:
                time.sleep(1.0)
                # Versions moved on both, and iterations enough for per-iteration rates.
                advanced = all(s.latest() >= version0 + 3 for s in servers)
                if advanced and rt.trainer.last_progress.get("iteration", 0) >= 2:
                    break
        assert play.errors == 0 and play.hands > 50, play.summaries[-1:]

        created = [health(s)["games_created"] - c for s, c in zip(servers, created0, strict=True)]
        received = wait_quiet(rt, servers) - received0
        shipped = [
            health(s)["episodes"]["shipped"] - n for s, n in zip(servers, shipped0, strict=True)
        ]
        print("games per server:", created, "shipped:", shipped, "received:", received)
        # Rendezvous hashing splits the games roughly evenly between the two servers.
        assert all(n > 0.25 * sum(created) for n in created), created
        assert all(n > 10 for n in shipped) and received == sum(shipped)

        def in_sync() -> bool:
            seq = rt.seq()
            return seq > version0 and all(s.latest() == seq for s in servers)

        wait_for(in_sync, 30, 0.5, "both servers to hold the trainer's newest version")

        after = parse(httpx.get(scrape).text)
        names = {name for name, _ in after}
        assert not [m for m in TRAINER_METRICS if m not in names], sorted(names)
        assert value(after, "croupier_trainer_iterations_total") > value(
            before, "croupier_trainer_iterations_total"
        )
        assert value(after, "croupier_trainer_connected_servers") == 2
        assert value(after, "croupier_trainer_weights_version") == rt.seq()
        assert value(after, "croupier_trainer_episodes_received_total") >= received0 + received
        assert value(after, "croupier_trainer_version_lag_count") > value(
            before, "croupier_trainer_version_lag_count"
        )
        assert value(after, "croupier_trainer_learner_env_steps_trained_total") > 0
        assert value(after, "croupier_trainer_env_steps_per_second") > 0

        for s in servers:
            m = parse(httpx.get(s.url + "/metrics").text)
            assert value(m, "croupier_trainer_link_connected") == 1
            assert value(m, "croupier_trainer_link_versions_installed_total") > 0
            assert value(m, "croupier_episodes_shipped_total") > 0
            assert value(m, "croupier_version") == rt.seq()


def test_remote_style_runner_pulls_newer_weights(ray_session, tmp_path) -> None:
    """APPO/IMPALA with remote env runners leave new weights on RLlib's EnvRunnerStateServer
    and each runner pulls them at the top of sample(); ours must too, or its servers stay on
    version 0 (measured before the fix: 36 iterations, servers still on version 0)."""
    import numpy as np
    import ray
    from ray.rllib.core import COMPONENT_RL_MODULE
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    @ray.remote
    class StateServer:  # RLlib's EnvRunnerStateServer contract: pull_if_newer(seq)
        def __init__(self, state):
            self.state = state

        def pull_if_newer(self, seq):
            return self.state if self.state[WEIGHTS_SEQ_NO] > seq else None

    rt = RunningTrainer(trainer_options(tmp_path))
    try:
        runner = rt.runner
        weights = {k: np.full_like(v, 0.25) for k, v in runner.module.get_state().items()}
        server = StateServer.remote({COMPONENT_RL_MODULE: weights, WEIGHTS_SEQ_NO: 5})
        setattr(runner, rllib_private.STATE_SERVER_ATTR, server)  # as IMPALA does
        runner._pull_newer_state()
        assert runner.weights_seq_no == 5
        for k, v in runner.module.get_state().items():
            assert np.allclose(np.asarray(v), 0.25), k
        runner._pull_newer_state()  # nothing newer: unchanged, no error
        assert runner.weights_seq_no == 5
    finally:
        rt.close()
