"""The trainer's `--metrics-port`: bounded however its peers behave (a thread per request, at
most a few at once, each request under a total deadline), and a warning when it listens beyond
this machine."""

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


def test_silent_and_slow_peers_are_cut_and_never_take_more_than_a_few_threads(monkeypatch):
    """The review: one thread per connection, no read timeout, so every silent connection
    held a thread for ever."""
    from croupier.local_server import free_port
    from croupier.trainer import metrics

    monkeypatch.setattr(metrics, "REQUEST_DEADLINE_S", 1.0)
    monkeypatch.setattr(metrics._QuietHandler, "timeout", 1.0)
    port = free_port()
    server = metrics.serve_trainer_metrics(FakeTrainer(), port)
    try:
        silent = [socket.create_connection(("127.0.0.1", port), timeout=5)
                  for _ in range(metrics.MAX_REQUESTS_AT_ONCE)]  # fmt: skip
        wait_for(lambda: server.active == len(silent), 5, 0.01, "every silent one served")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            assert closed_by_peer(extra, 0.4), "a connection past the cap was not closed"
        drip = silent[0]
        t0 = time.monotonic()
        for _ in range(30):  # one byte every 0.1 s: the deadline is for the whole request
            try:
                drip.sendall(b"G")
            except OSError:
                break
            time.sleep(0.1)
        for sock in silent:
            assert closed_by_peer(sock, 3.0), "a silent connection was never cut"
        assert time.monotonic() - t0 < 2.5
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)  # slots free again
        assert r.status_code == 200 and r.json()["state"] == "training"
        assert server.refused_busy >= 1
    finally:
        server.shutdown()
        server.server_close()


def test_a_metrics_port_beyond_loopback_is_warned_about(monkeypatch, caplog):
    from croupier.trainer import metrics

    def not_bound(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not bound in a test")

    monkeypatch.setattr(metrics, "make_server", not_bound)
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
