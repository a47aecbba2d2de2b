"""A game by hand (docs/adapter.md) end to end: the Kuhn poker example is served,
played by its raw-HTTP engine and trained. (The published OpenAPI documents are held current
by tests/test_contract.py.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from croupier.games.registry import load_adapter
from croupier.trainer.algo import Hyper
from examples.kuhn.play import play
from tests.conftest import running_server_logged, wait_for
from tests.helpers.trainer import RunningTrainer, trainer_options

ROOT = Path(__file__).resolve().parent.parent
GAME = "examples.kuhn.adapter:KuhnAdapter"


def test_adapter_and_rules_are_well_under_100_lines() -> None:
    lines = (ROOT / "examples/kuhn/adapter.py").read_text().splitlines()
    assert len(lines) < 70, len(lines)
    adapter = load_adapter(GAME)
    assert adapter.name == "kuhn-poker" and adapter.rules() is not None


@pytest.mark.ray
def test_kuhn_served_over_raw_http_and_trained(ray_session, tmp_path) -> None:
    hyper = Hyper(train_batch_size=200, minibatch_size=100, num_epochs=2, lr=1e-3)
    rt = RunningTrainer(trainer_options(tmp_path, game=GAME, hyper=hyper)).start()
    try:
        args = ("--game", GAME, "--trainer", f"127.0.0.1:{rt.port}")
        with running_server_logged(*args) as server:
            wait_for(lambda: rt.stats()["connected_servers"] == 1, 30, what="server connected")
            # The studio's bot beats random play (measured +0.23 per hand over 400 hands).
            baseline = play(server.url, 400, ["rules", "random"], tables=4)
            assert baseline["0:rules"]["hands"] == baseline["1:random"]["hands"] == 400
            assert baseline["0:rules"]["mean"] > 0
            stop = threading.Event()

            def engine() -> None:
                while not stop.is_set():
                    play(server.url, 100, ["learned", "rules"], tables=4)

            thread = threading.Thread(target=engine, daemon=True)
            thread.start()
            try:
                wait_for(lambda: server.latest() >= 3, 90, 0.5, "version 3 on the server")
            finally:
                stop.set()
                thread.join(60)
            assert not thread.is_alive()
            scores = play(server.url, 200, [f"frozen@{server.latest()}", "rules"], tables=4)
        stats = rt.stats()
        assert stats["episodes_received"] > 0 and stats["episodes_rejected"] == 0
        assert rt.seq() >= 3
        assert sum(s["hands"] for s in scores.values()) == 400
        print("kuhn after a short training:", scores, "trainer:", stats)
    finally:
        t0 = time.monotonic()
        rt.close()
        assert time.monotonic() - t0 < 120
