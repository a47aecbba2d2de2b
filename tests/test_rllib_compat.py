"""`croupier serve --rllib-compat` against RLlib's stock `EnvRunnerServerForExternalInference`.

The stock runner accepts one client at a time on `localhost:<port + worker_index>`, sends its
AlgorithmConfig pickled, pushes weights only when asked, and its `sample()` spins until episodes
arrive: so `algo.train()` is only called while an engine is playing, and from a thread with a
deadline. One Ray session for the module.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from croupier import rllib_private
from tests.conftest import (
    BackgroundPlay,
    LoggedServer,
    free_port,
    running_server_logged,
    wait_for,
)

pytestmark = pytest.mark.ray

GAME = "leduc-holdem"
# The server's default model (croupier's ModelSpec()), so only the link itself is under test.
SERVER_DEFAULT_HIDDENS = [128, 128]
TRAIN_TIMEOUT_S = 120.0


class StockTrainer:
    """A PPO Algorithm whose (local) env runner is RLlib's stock external-inference server."""

    def __init__(self, hiddens: list[int]):
        from ray.rllib.algorithms.ppo import PPOConfig
        from ray.rllib.env.external.env_runner_server_for_external_inference import (
            EnvRunnerServerForExternalInference,
        )

        from croupier.games.registry import load_adapter
        from croupier.policies.module import ModelSpec

        adapter = load_adapter(GAME)
        self.port = free_port()  # the runner binds localhost:port + worker_index (0)
        config = (
            PPOConfig()
            .environment(
                observation_space=adapter.observation_space,
                action_space=adapter.action_space,
                env_config={"port": self.port},
            )
            .env_runners(env_runner_cls=EnvRunnerServerForExternalInference, num_env_runners=0)
            .rl_module(rl_module_spec=ModelSpec(algo="ppo", hiddens=hiddens).rl_module_spec())
            .training(train_batch_size_per_learner=200, minibatch_size=100, num_epochs=1)
        )
        self.algo = config.build_algo()

    @property
    def seq(self) -> int:
        return rllib_private.stock_runner_weights_seq_no(self.algo.env_runner)

    def train(self, timeout_s: float = TRAIN_TIMEOUT_S) -> dict[str, Any]:
        """One `algo.train()`, failing (not hanging) if it does not return in time."""
        out: dict[str, Any] = {}

        def run() -> None:
            try:
                out["result"] = self.algo.train()
            except BaseException as e:
                out["error"] = e

        t = threading.Thread(target=run, daemon=True, name="stock-train")
        t.start()
        t.join(timeout_s)
        assert not t.is_alive(), f"algo.train() did not return in {timeout_s} s (no episodes?)"
        if "error" in out:
            raise AssertionError(f"algo.train() failed: {out['error']!r}") from out["error"]
        return out["result"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.algo.stop()


@pytest.fixture(scope="module")
def stock(ray_session) -> Iterator[StockTrainer]:
    trainer = StockTrainer(SERVER_DEFAULT_HIDDENS)
    try:
        yield trainer
    finally:
        trainer.close()


def _link_outcome(server: LoggedServer, timeout_s: float = 30.0) -> str:
    """Wait for the server's log to say how its first link attempt went; return the log."""

    def said() -> str | None:
        log = server.log()
        markers = ("trainer link up", "use --rllib-compat", "do not fit", "does not match")
        return log if any(m in log for m in markers) else None

    return wait_for(said, timeout_s, 0.2, "the server to report its trainer link")


def _decide_once(url: str) -> dict[str, Any]:
    from croupier.engine.rlcard_games import RLCardTable

    created = httpx.post(
        url + "/v1/games",
        json={"game": GAME, "seats": {"0": "learned", "1": "learned"}},
        timeout=30,
    ).json()
    table = RLCardTable(GAME)
    table.reset(1)
    player = table.current_player()
    resp = httpx.post(
        f"{url}/v1/games/{created['game_id']}/decide",
        json={"seat": str(player), "state": table.state_json(player)},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["action"] in table.legal_actions()
    httpx.delete(f"{url}/v1/games/{created['game_id']}", timeout=10)
    return resp.json()


def test_stock_trainer_refused_without_compat(stock):
    # Version 0 served and recorded (not the rules before a first version): what is tested
    # is that the episodes stay here.
    args = ("--trainer", f"127.0.0.1:{stock.port}", "--seats", "learned,rules",
            "--no-rules-before-first-version")  # fmt: skip
    with running_server_logged(*args) as server:
        log = _link_outcome(server)
        assert "use --rllib-compat" in log, log[-3000:]
        assert "trainer link up" not in log
        with BackgroundPlay(server.url, games=4) as play:
            time.sleep(2.0)  # finished episodes must stay on the server, not go anywhere
        assert play.hands > 0 and play.errors == 0
        h = server.get("/healthz")
        assert h["episodes"]["recorded"] > 0 and h["episodes"]["shipped"] == 0, h["episodes"]
        link = h.get("trainer_link") or {}
        assert link.get("connected") is False and link.get("connects") == 0, link
        assert server.latest() == 0
    assert stock.seq == 0


def test_compat_server_trains_with_the_stock_runner(stock):
    args = ("--trainer", f"127.0.0.1:{stock.port}", "--rllib-compat", "--seats", "learned,rules")
    # The stock runner waits 5 s after losing a client before it listens again.
    with running_server_logged(*args) as server:
        log = _link_outcome(server, 45.0)
        assert "trainer link up" in log, log[-3000:]
        assert server.get("/healthz")["trainer_link"]["connected"] is True
        with BackgroundPlay(server.url, games=8) as play:
            # Episodes must be flowing before train(): the stock sample() never times out.
            wait_for(
                lambda: server.get("/healthz")["episodes"]["shipped"] >= 100,
                60,
                0.5,
                "episodes shipped to the stock runner",
            )
            results = [stock.train() for _ in range(3)]
            assert stock.seq >= 3
            sampled = [r["env_runners"]["num_env_steps_sampled"] for r in results]
            assert all(n >= 200 for n in sampled), sampled
            # The compat server asks for the newest state after each batch it ships.
            wait_for(lambda: server.latest() == stock.seq, 30, 0.5, "the server to catch up")
            decision = _decide_once(server.url)
        assert play.errors == 0
    print(f"\nstock runner: weights_seq_no {stock.seq}, env steps per train() {sampled}")
    assert decision["policy"] == "learned" and decision["version"] == stock.seq > 0


def test_compat_server_adopts_the_stock_trainers_model(ray_session):
    """The stock trainer's network need not be the server's default: in compat mode the
    server must take the model from the (pickled) AlgorithmConfig, as it does from a
    croupier trainer's plain config."""
    trainer = StockTrainer([64, 64])
    try:
        args = ("--trainer", f"127.0.0.1:{trainer.port}", "--rllib-compat")
        with running_server_logged(*args, "--seats", "learned,rules") as server:
            log = _link_outcome(server)
            model = server.get("/v1/policies")["policies"]["learned"]["model"]
            assert "trainer link up" in log and "do not fit" not in log, log[-2000:]
            assert model["hiddens"] == [64, 64], model
            assert _decide_once(server.url)["version"] == 0
    finally:
        trainer.close()
