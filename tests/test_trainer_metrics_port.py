"""The trainer's `--metrics-port`: bounded however its peers behave (a coroutine a connection,
a bounded number waiting, each request under a total deadline), scrapes answered ahead of slow
peers, and a warning when it listens beyond this machine."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.helpers.link import closed_by_peer


class FakeTrainer:
    """What the metrics server reads from a `Trainer`."""

    algo = None
    last_progress: dict[str, Any] = {}
    last_lag_histogram: dict[int, int] = {}

    def health(self) -> dict[str, Any]:
        return {"alive": True, "state": "training"}


def test_scrapes_are_answered_while_slow_peers_wait_and_slow_peers_are_cut(monkeypatch):
    """The review: 8 slow connections took the 8 request threads and every scrape was turned
    away. A waiting connection costs a coroutine now; a request is answered as soon as it has
    arrived, past `MAX_CONNECTIONS` the longest waiting one is closed, and each is cut at the
    deadline however it paces its bytes."""
    from croupier.local_server import free_port
    from croupier.trainer import metrics

    monkeypatch.setattr(metrics, "REQUEST_DEADLINE_S", 1.5)
    port = free_port()
    server = metrics.serve_trainer_metrics(FakeTrainer(), port)
    slow: list[socket.socket] = []
    try:
        slow = [socket.create_connection(("127.0.0.1", port), timeout=5)
                for _ in range(metrics.MAX_CONNECTIONS)]  # fmt: skip
        for sock in slow:
            sock.sendall(b"GET /metr")  # a request begun, never finished
        wait_for(lambda: server.waiting == len(slow), 5, 0.01, "every slow one waiting")
        for _ in range(5):  # scrapes are answered at once, slow peers or not
            t0 = time.monotonic()
            r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
            assert r.status_code == 200 and "croupier_trainer" in r.text
            assert time.monotonic() - t0 < 1.0
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert r.status_code == 200 and r.json()["state"] == "training"
        assert server.waiting <= metrics.MAX_CONNECTIONS
        assert closed_by_peer(slow[0], 0.5), "the longest waiting was not closed for room"
        drip = slow[-1]
        t0 = time.monotonic()
        for _ in range(40):  # one byte every 0.1 s: the deadline is for the whole request
            try:
                drip.sendall(b"x")
            except OSError:
                break
            time.sleep(0.1)
        for sock in slow:
            assert closed_by_peer(sock, 3.0), "a slow connection was never cut"
        assert time.monotonic() - t0 < 3.0
        assert server.waiting == 0 and server.served >= 6
        too_big = socket.create_connection(("127.0.0.1", port), timeout=5)
        too_big.sendall(b"GET /" + b"a" * (metrics.MAX_HEAD_BYTES + 10))
        assert closed_by_peer(too_big, 1.0), "a head past the bound was not cut"
        too_big.close()
    finally:
        for sock in slow:
            sock.close()
        server.shutdown()
        server.server_close()


def test_a_metrics_port_beyond_loopback_is_warned_about(monkeypatch, caplog):
    from croupier.trainer import metrics

    def not_bound(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not bound in a test")

    monkeypatch.setattr(metrics, "MetricsServer", not_bound)
    with caplog.at_level(logging.WARNING, logger="croupier.trainer.metrics"):
        with pytest.raises(RuntimeError):
            metrics.serve_trainer_metrics(FakeTrainer(), 9100, host="0.0.0.0")  # noqa: S104
        assert "open to whoever reaches that port" in caplog.text
        caplog.clear()
        with pytest.raises(RuntimeError):
            metrics.serve_trainer_metrics(FakeTrainer(), 9100, host="127.0.0.1")
        assert "open to whoever" not in caplog.text


def test_the_policys_entropy_and_losses_are_read_from_the_learners_report():
    from ray.rllib.core import DEFAULT_MODULE_ID

    from croupier.trainer.metrics import learner_stats

    logged = {"entropy": 0.42, "policy_loss": -0.01, "vf_loss": 0.3, "vf_explained_var": -0.25}
    stats = learner_stats({"learners": {DEFAULT_MODULE_ID: logged}})
    assert stats == {"policy_entropy": 0.42, "policy_loss": -0.01, "value_loss": 0.3,
                     "value_explained_variance": -0.25}  # fmt: skip
    unmeasured = {**logged, "vf_loss": float("nan"), "vf_explained_var": float("nan")}
    nan = learner_stats({"learners": {DEFAULT_MODULE_ID: unmeasured}})
    assert nan["value_loss"] is None and nan["value_explained_variance"] is None  # not anew
    appo = {k: v for k, v in logged.items() if k != "vf_explained_var"}  # APPO logs none
    assert (
        learner_stats({"learners": {DEFAULT_MODULE_ID: appo}})["value_explained_variance"] is None
    )
    assert learner_stats({}) == dict.fromkeys(stats)  # no update yet: every one None
