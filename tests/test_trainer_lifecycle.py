"""The trainer as a service: idle without crashing, restart without regressing a server.

In-process (one Ray session for the module): an idle trainer stays up, says so on `/healthz`
and resumes when episodes return; a restart goes on from the newest weights it published.
With real processes: `croupier train` restarted (SIGTERM and SIGKILL; five times with
CROUPIER_TRAINER_RESTARTS=5) beside two serving `croupier serve`s: no server ever goes back a
version or to the untrained model, SIGTERM leaves a checkpoint within a bound, and the backlog
of an outage is trained.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from croupier.trainer.metrics import serve_trainer_metrics
from tests.conftest import BackgroundPlay, LoggedServer, free_port, running_server_logged, wait_for
from tests.helpers.trainer import (
    HYPER,
    RunningTrainer,
    synthetic_episode,
    trainer_health,
    trainer_log,
    trainer_options,
)

GAME = "leduc-holdem"


def feed(rt: RunningTrainer, batches: int = 2, seed: int = 0) -> None:
    """Hand the runner `batches` train batches of synthetic episodes (as servers would)."""
    n = batches * HYPER.train_batch_size // 4 + 1
    rt.runner.ingest([synthetic_episode(rt.seq(), seed=seed + i) for i in range(n)])


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    resp = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5.0)
    return resp.status_code, resp.json()


# --- idle ---------------------------------------------------------------------------------------


@pytest.mark.ray
def test_an_idle_trainer_waits_reports_idle_and_resumes(ray_session, tmp_path, monkeypatch):
    import socket

    from croupier.trainer import run

    link_port = free_port()
    probes: list[int] = []
    restore = run.continue_from_published

    def probed(*args: Any) -> tuple[dict[str, Any], bool]:  # while the state is restored
        with socket.socket() as s:
            probes.append(s.connect_ex(("127.0.0.1", link_port)))
        return restore(*args)

    monkeypatch.setattr(run, "continue_from_published", probed)
    rt = RunningTrainer(
        trainer_options(tmp_path, idle_after_s=1.0, listen=f"127.0.0.1:{link_port}")
    )
    assert probes and probes[0] != 0, "the link accepted a connection before the restore"
    assert rt.port == link_port  # and opened after it
    port = free_port()
    server = serve_trainer_metrics(rt.trainer, port)
    try:
        assert healthz(port)[1]["state"] == "training"  # built: its link is open
        rt.start()
        feed(rt, seed=0)
        wait_for(lambda: rt.trainer.iteration >= 1, 60, what="a first update")
        wait_for(lambda: healthz(port)[1]["idle"], 10, what="the trainer to report idle")
        time.sleep(4.0)  # idle for several idle periods: no crash, still answering
        status, health = healthz(port)
        assert rt.alive() and status == 200, health
        assert health["state"] == "idle" and health["idle_s"] >= 4.0, health
        assert health["iteration"] == rt.trainer.iteration
        # Gone idle with a version newer than any checkpoint (every 1000 iterations here): it
        # checkpointed that version, so a restart after a long idle goes on from there.
        assert (tmp_path / "checkpoint").is_dir(), health
        assert health["last_checkpoint"]["version"] == health["version"] >= 1, health
        # Games return: it learns again.
        before = rt.trainer.iteration
        feed(rt, seed=1000)
        wait_for(lambda: rt.trainer.iteration > before, 60, what="an update after idling")
        assert healthz(port)[1]["state"] in ("training", "idle")
        # Told to wait at most 2 s (--max-idle), it checkpoints and stops by itself.
        rt.trainer.options.max_idle_s = 2.0
        rt.join(30)
        assert rt.result is not None and rt.result["stop_reason"] == "max idle"
        assert (tmp_path / "checkpoint").is_dir()
        status, health = healthz(port)
        assert status == 503 and health["state"] == "stopped"
        assert health["last_checkpoint"]["iteration"] == rt.trainer.iteration
    finally:
        server.shutdown()
        rt.close()


# --- the number goes with its weights -------------------------------------------------------------


def _policy_weights(rt: RunningTrainer) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in rt.runner.module.get_state().items()}


@pytest.mark.ray
def test_a_restart_goes_on_from_the_newest_published_weights(ray_session, tmp_path, caplog):
    """Killed after more versions were published than the checkpoint holds: the next trainer
    serves the newest published weights under their own number; without them it says so."""
    rt = RunningTrainer(trainer_options(tmp_path, iterations=2))
    try:
        rt.start().join(90, feed=True)
        at_checkpoint = rt.seq()
        shutil.copytree(tmp_path / "checkpoint", tmp_path / "checkpoint-c")
        rt.trainer.options.iterations = 4  # two more updates, published, then "killed"
        rt.start().join(90, feed=True)
        published = rt.seq()
        newest = _policy_weights(rt)
    finally:
        rt.close()
    assert published > at_checkpoint > 0
    shutil.rmtree(tmp_path / "checkpoint")
    (tmp_path / "checkpoint-c").rename(tmp_path / "checkpoint")  # as if killed before saving

    again = RunningTrainer(trainer_options(tmp_path))
    try:
        assert again.seq() == published
        assert again.trainer.restored == {
            "checkpoint_version": at_checkpoint,
            "published_version": published,
            "version": published,
            "weights": "published",
        }
        resumed = _policy_weights(again)
        assert resumed.keys() == newest.keys()
        for key, value in newest.items():
            np.testing.assert_array_equal(resumed[key], value, err_msg=key)
    finally:
        again.close()

    # Without the published weights it cannot prove them: a new number, and a loud warning.
    for path in tmp_path.glob("published-*.npz"):
        path.unlink()
    with caplog.at_level("WARNING", logger="croupier.trainer"):
        third = RunningTrainer(trainer_options(tmp_path))
    try:
        assert third.seq() == published + 1
        assert third.trainer.restored["weights"] == "checkpoint"
        assert "RESTORED OLDER WEIGHTS" in caplog.text
    finally:
        third.close()


@pytest.mark.ray
def test_a_restart_with_another_model_is_refused_by_name(ray_session, tmp_path):
    """A checkpoint written by another model (a wider feature, other --hiddens) is refused
    before the restore, naming a weight and both shapes; the checkpoint is left as it was
    and still resumes with its own settings."""
    from croupier.trainer.checkpoints import MODULE_SHAPES, StartRefused
    from croupier.trainer.run import Trainer

    rt = RunningTrainer(trainer_options(tmp_path, iterations=1))
    try:
        rt.start().join(90, feed=True)
        written = rt.seq()
    finally:
        rt.close()
    shapes = json.loads((tmp_path / "checkpoint" / MODULE_SHAPES).read_text())
    assert any(shape == [64, 64] for shape in shapes.values())

    other = Trainer(trainer_options(tmp_path, hiddens=[32, 32]))
    try:
        wanted = r"another model .* \(\d+ weights differ in shape: .*64.* there, .*32.* here"
        with pytest.raises(StartRefused, match=wanted):
            other.build()
    finally:
        if other.algo is not None:
            other.algo.stop()
    again = RunningTrainer(trainer_options(tmp_path))
    try:
        assert again.seq() == written
    finally:
        again.close()


# --- real processes: five restarts beside serving servers ---------------------------------------

TRAINER_START_S = 150
STOP_BOUND_S = 30.0
# Each trainer start costs a Ray session and an RLlib build (~20-60 s on 2 loaded cores): the
# default run restarts once (a SIGTERM, then an outage under load; tests/test_faults.py
# SIGKILLs one), which keeps `make test` in its budget; CROUPIER_TRAINER_RESTARTS=5 runs the
# full five, SIGTERM and SIGKILL in turn (~6 minutes).
RESTARTS = int(os.environ.get("CROUPIER_TRAINER_RESTARTS", "1"))
# The last outage's length (issue 15 asks about 60 s; the default run keeps it short).
OUTAGE_S = float(os.environ.get("CROUPIER_TRAINER_OUTAGE_S", "10"))
SIGNALS = (signal.SIGTERM, signal.SIGKILL)
# The trainer's hyperparameters: small batches by default (quick versions); "default" runs
# `croupier train`'s own PPO defaults, the setting the 60 s outage's trained share is stated
# for (docs/trainer-lifecycle.md).
TRAINER_HYPER = os.environ.get("CROUPIER_TRAINER_HYPER", "small")
SMALL_BATCH, SMALL_BATCHES_PER_UPDATE = 200, 8
DEFAULT_BATCH, DEFAULT_BATCHES_PER_UPDATE = 4000, 2  # trainer/algo.py Hyper.defaults("ppo")


class TrainerProcess:
    """`croupier train` (PPO, small batches) on a fixed port, with /healthz on another."""

    def __init__(self, port: int, metrics_port: int, checkpoint_dir: Path, log: Any):
        cmd = [sys.executable, "-m", "croupier", "train", "--game", GAME, "--algo", "ppo"]
        cmd += ["--listen", f"127.0.0.1:{port}", "--checkpoint-dir", str(checkpoint_dir)]
        cmd += ["--hiddens", "32,32", "--checkpoint-every", "1000", "--log-level", "info"]
        cmd += ["--no-rules-anchor"]  # the life cycle under test, not the first start
        cmd += ["--metrics-port", str(metrics_port), "--stop-grace", str(STOP_BOUND_S)]
        if TRAINER_HYPER == "small":
            cmd += ["--train-batch-size", str(SMALL_BATCH), "--minibatch-size", "100"]
            # Updates of up to 8 batches: with 200-step batches RLlib's per-update overhead
            # would otherwise make this learner slower than the games (a backlog needs a
            # faster one).
            cmd += ["--num-epochs", "1", "--max-sample-batches", str(SMALL_BATCHES_PER_UPDATE)]
        self.metrics_port = metrics_port
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def health(self) -> dict[str, Any] | None:
        return trainer_health(self.metrics_port)

    def wait_training(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            assert self.proc.poll() is None, f"trainer exited with {self.proc.returncode}"
            health = self.health()
            return health if health and health["state"] in ("training", "idle") else None

        return wait_for(ready, TRAINER_START_S, 0.5, "the trainer to start")

    def stop(self, sig: signal.Signals) -> float:
        """Send `sig`; wait for the exit; return the seconds it took."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        self.proc.wait(STOP_BOUND_S + 30)
        return time.monotonic() - t0


class VersionWatch:
    """Polls each server's `latest` (the version new games get) and records every change."""

    def __init__(self, servers: list[LoggedServer]):
        self.servers = servers
        self.seen: list[list[int]] = [[] for _ in servers]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for seen, server in zip(self.seen, self.servers, strict=True):
                with contextlib.suppress(httpx.HTTPError):
                    latest = server.latest()
                    if not seen or seen[-1] != latest:
                        seen.append(latest)
            self._stop.wait(0.05)

    def __enter__(self) -> VersionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.timeout(600)
def test_restarts_never_regress_a_server_and_an_outage_backlog_is_trained(tmp_path):
    checkpoint_dir = tmp_path / "trainer"
    port, metrics_port = free_port(), free_port()
    args = ("--trainer", f"127.0.0.1:{port}", "--seats", "learned,rules")
    with (
        running_server_logged(*args, timeout_s=60) as a,
        running_server_logged(*args, timeout_s=60) as b,
        trainer_log() as log,
        VersionWatch([a, b]) as watch,
        BackgroundPlay(a.url, games=2),
        BackgroundPlay(b.url, games=2),
    ):
        t0 = time.monotonic()
        stops: list[str] = []
        trainer = TrainerProcess(port, metrics_port, checkpoint_dir, log)
        # SIGTERM and SIGKILL alternate; the last stop is a longer outage under load.
        for restart in range(1, RESTARTS + 1):
            sig = SIGNALS[(restart - 1) % 2]
            trainer.wait_training()
            start_version = max(a.latest(), b.latest())
            wait_for(lambda v=start_version: min(a.latest(), b.latest()) > v, 60, 0.2,
                     f"a new version on both servers (restart {restart})")  # fmt: skip
            t_signal = time.time()
            took = trainer.stop(sig)
            stops.append(f"{sig.name} {took:.1f} s")
            if sig == signal.SIGTERM:
                assert trainer.proc.returncode == 0, trainer.proc.returncode
                assert took < STOP_BOUND_S, f"SIGTERM took {took:.1f} s"
                assert (checkpoint_dir / "checkpoint").stat().st_mtime >= t_signal - 1
            held = max(a.latest(), b.latest())
            if restart == RESTARTS:
                time.sleep(OUTAGE_S)  # an outage: games go on, episodes pile up in the spools
                backlog = sum(s.get("/healthz")["episodes"]["pending"] for s in (a, b))
                t_back = time.monotonic()
            trainer = TrainerProcess(port, metrics_port, checkpoint_dir, log)
            health = trainer.wait_training()
            restored = health["restored"]
            # It goes on from the newest it published, never below what servers hold.
            assert restored["version"] >= held, (restored, held)
            if sig == signal.SIGKILL:
                assert restored["weights"] == "published", restored

        # After the last restart (an outage before it): the backlog arrives and is trained.
        # The games go on: "drained" is when the trainer has received at least the backlog
        # and has no more than one update's worth waiting.
        def drained() -> bool:
            health = trainer.health() or {}
            received = (health.get("episodes") or {}).get("episodes_received") or 0
            one_update = (
                SMALL_BATCH * SMALL_BATCHES_PER_UPDATE
                if TRAINER_HYPER == "small"
                else DEFAULT_BATCH * DEFAULT_BATCHES_PER_UPDATE
            )
            return received >= backlog and health.get("waiting_steps", 1e9) <= one_update

        wait_for(drained, 120 + 2 * OUTAGE_S, 0.5, "the backlog to arrive and be trained")
        drained_s = time.monotonic() - t_back  # from the restart: its start time included
        health = trainer.health()
        trainer.stop(signal.SIGTERM)
    print(f"\nversions seen: {watch.seen}\nafter the outage: {health}")
    print(f"signal to exit: {', '.join(stops)}")
    print(f"{time.monotonic() - t0:.0f} s for {RESTARTS + 1} trainer starts; a backlog of "
          f"{backlog} episodes drained in {drained_s:.1f} s")  # fmt: skip
    for seen in watch.seen:
        # Never back, so never to the untrained version 0 once past it.
        assert seen == sorted(seen) and seen[-1] > 0, f"a server went back a version: {seen}"
    assert health is not None and health["episodes"]["episodes_received"] >= backlog, health
    assert health["trained_share"] >= 0.9, health


# --- a server never installs an older version -------------------------------------------------


def test_a_server_keeps_its_newer_version_when_the_trainer_offers_an_older_one(tmp_path, caplog):
    """A trainer that comes back with an older version (an older checkpoint, a new run) is
    connected to and sent episodes, but its older weights are not installed."""
    import socket

    from croupier.config import ServerConfig
    from croupier.games.registry import load_adapter
    from croupier.link import wire
    from croupier.link.client import TrainerLink
    from croupier.policies.learned import PolicyVersions
    from croupier.trajectories.spool import EpisodeSpool
    from tests.helpers.link import answer_handshake

    adapter = load_adapter(GAME)
    versions = PolicyVersions(adapter)
    versions.install(7, versions.weights(0))
    listener = socket.create_server(("127.0.0.1", 0))
    config = ServerConfig(trainer=f"127.0.0.1:{listener.getsockname()[1]}")
    link = TrainerLink(config, versions, EpisodeSpool(tmp_path / "spool.sqlite3"))
    older = {k: v + 1.0 for k, v in versions.weights(7).items()}

    def fake_trainer() -> None:  # answers the handshake with version 3, then pushes 9
        conn, _ = listener.accept()
        with conn:
            answer_handshake(conn, versions, adapter, {"rl_module": older, "weights_seq_no": 3})
            time.sleep(0.5)
            wire.send(conn, {"type": "SET_STATE", "state": {"rl_module": older,
                                                            "weights_seq_no": 9}})  # fmt: skip
            time.sleep(1.0)

    thread = threading.Thread(target=fake_trainer, daemon=True)
    with caplog.at_level("INFO", logger="croupier.link.client"):
        thread.start()
        link.start()
        try:
            wait_for(lambda: link.connected, 10, 0.05, "the link")
            assert versions.latest == 7  # not 3
            wait_for(lambda: versions.latest == 9, 10, 0.05, "the newer push")
        finally:
            link.stop()
            thread.join(5)
            listener.close()
    assert "the trainer is at version 3, this server holds 7: keeping 7" in caplog.text
    assert "installed weights version 9" in caplog.text


def test_max_idle_durations():
    import typer

    from croupier.cli import duration_s

    assert [duration_s(t, "--max-idle") for t in ("none", "0", "forever", "")] == [None] * 4
    assert duration_s("900", "--max-idle") == 900.0
    assert duration_s("15m", "--max-idle") == 900.0
    assert duration_s("2h", "--max-idle") == 7200.0
    for bad in ("soon", "-5", "m"):
        with pytest.raises(typer.BadParameter):
            duration_s(bad, "--max-idle")
