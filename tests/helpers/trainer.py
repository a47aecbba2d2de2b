"""The trainer side for tests: an in-process `Trainer` on a thread, synthetic episodes, raw
link frames (moved from test_trainer_link.py so link and scale-out tests share them)."""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from croupier.trainer.algo import Hyper
from croupier.trainer.rules_anchor import RulesAnchor
from croupier.trainer.run import Trainer, TrainOptions
from croupier.trajectories.recorder import SeatRecorder
from tests.conftest import LoggedServer, wait_for

GAME = "leduc-holdem"


HYPER = Hyper(train_batch_size=200, minibatch_size=100, num_epochs=2, lr=1e-3)


STOP_TIMEOUT_S = 90.0


def synthetic_episode(version: int, n: int = 4, seed: int = 0) -> dict[str, Any]:
    """A valid finished Leduc episode state (as a server's recorder makes), played at `version`."""
    from croupier.games.registry import load_adapter

    adapter = load_adapter(GAME)
    rng = np.random.default_rng(seed)
    rec = SeatRecorder(game_id=f"synthetic-{seed}", seat="0", policy="learned")
    logp = float(-np.log(adapter.num_actions))
    for _ in range(n):
        rec.add_decision(
            rng.standard_normal(adapter.obs_size).astype(np.float32),
            np.ones(adapter.num_actions, np.float32),
            int(rng.integers(adapter.num_actions)),
            logp,
            np.zeros(adapter.num_actions, np.float32),
            version,
        )
    episode = rec.close(float(rng.choice([-1.0, 1.0])), adapter.terminal_observation())
    assert episode is not None
    return episode


def complete_update(runner: Any) -> list[str]:
    """What one learner update does to a `LinkEnvRunner`: take a sample, then set the next
    weights version (as RLlib does once the update that used the sample has completed), which
    acknowledges the sample's episodes. Returns their ids."""
    ids = [e.id_ for e in runner.sample()]
    runner.set_state({"rl_module": runner.module.get_state(),
                      "weights_seq_no": runner.weights_seq_no + 1})  # fmt: skip
    return ids


def settled_snapshot(
    spool: Callable[[], dict[str, Any]],
    unacked: Callable[[], int | None],
    log_path: Path,
    timeout_s: float = 180.0,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A server's spool stats and the trainer's ingest log, read at a quiet moment: every
    episode sent, the server holding exactly what the trainer holds untrained, and both the
    same 1 s later (no update, no ack in flight). With the games stopped, the trainer gets
    there once what it holds is less than a train batch. For recorded = settled + spooled."""
    from croupier.trainer.ingest_log import read_ingest_log

    def delivered() -> dict[str, Any] | None:
        stats = spool()
        return stats if stats["pending"] == 0 and stats["spooled"] == unacked() else None

    def quiet() -> tuple[dict[str, Any], list[tuple[str, str]]] | None:
        first = delivered()
        if first is None:
            return None
        entries = read_ingest_log(log_path)
        time.sleep(1.0)
        again = delivered()
        return (first, entries) if again == first and read_ingest_log(log_path) == entries else None

    return wait_for(quiet, timeout_s, 0.5, "a quiet moment: the backlog trained and acked")


class RunningTrainer:
    """A built `Trainer` whose `run()` loops in a thread. `close()` ends it and frees its port.

    A stop request ends the loop even while an iteration waits for episodes (`close()`);
    `join(feed=True)` feeds synthetic episodes so that a run of N iterations can end."""

    def __init__(self, options: TrainOptions):
        self.trainer = Trainer(options)
        self.trainer.build()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def runner(self) -> Any:
        return self.trainer.algo.env_runner

    @property
    def port(self) -> int:
        return int(self.runner.port)

    def stats(self) -> dict[str, Any]:
        return self.trainer.link_stats()

    def seq(self) -> int:
        return int(self.trainer.weights_seq_no())

    def start(self) -> RunningTrainer:
        def run() -> None:
            try:
                self.result = self.trainer.run()
            except BaseException as e:
                self.error = e

        self._thread = threading.Thread(target=run, daemon=True, name="trainer-run")
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout_s: float, feed: bool = False) -> None:
        """Wait for `run()` to return (feeding synthetic episodes if `feed`); raise its error."""
        deadline = time.monotonic() + timeout_s
        seed = 10_000
        while self.alive() and time.monotonic() < deadline:
            assert self._thread is not None
            self._thread.join(0.5)
            if feed and self.alive() and self.runner.inbox.steps < HYPER.train_batch_size:
                seed += 60
                eps = [synthetic_episode(self.seq(), seed=seed + i) for i in range(60)]
                self.runner.ingest(eps)
        assert not self.alive(), f"Trainer.run() still running after {timeout_s} s"
        if self.error is not None:
            raise AssertionError(f"Trainer.run() failed: {self.error!r}") from self.error

    def close(self) -> None:
        try:
            if self.alive():
                # A stop request must end the run even while sample() waits for episodes.
                self.trainer.request_stop()
                self.join(STOP_TIMEOUT_S)
        finally:
            if self.trainer.algo is not None:
                self.trainer.algo.stop()  # not Trainer.close(): that would end our Ray session
                self.trainer.algo = None


def trainer_options(tmp: Path, **over: Any) -> TrainOptions:
    base: dict[str, Any] = {
        "game": GAME,
        "algo": "ppo",
        "listen": "127.0.0.1:0",
        "checkpoint_dir": tmp,
        "hiddens": [64, 64],
        "hyper": HYPER,
        "checkpoint_every": 1000,
        # Synthetic episodes, not the game's: no clone of the rules to start from.
        "rules_anchor": RulesAnchor(enabled=False),
    }
    return TrainOptions(**{**base, **over})


def health(server: LoggedServer) -> dict[str, Any]:
    return server.get("/healthz")


def wait_quiet(trainer: RunningTrainer, servers: list[LoggedServer], timeout_s: float = 30) -> int:
    """Wait until no server has episodes waiting and the trainer's count is steady: return it."""

    def steady() -> int | None:
        if any(health(s)["episodes"]["pending"] for s in servers):
            return None
        before = trainer.stats()["episodes_received"]
        time.sleep(1.0)  # one ship interval (0.5 s) and then some
        after = trainer.stats()["episodes_received"]
        if after != before or any(health(s)["episodes"]["pending"] for s in servers):
            return None
        return after + 1  # truthy even for 0

    return wait_for(steady, timeout_s, 0.2, "servers and trainer to go quiet") - 1


@contextlib.contextmanager
def trainer_log() -> Iterator[Any]:
    """A temporary log file for a `croupier train` process, printed (its tail) when the test
    using it fails."""
    with tempfile.NamedTemporaryFile(prefix="croupier-train-", suffix=".log") as log:
        try:
            yield log
        except BaseException:
            log.seek(0)
            print("--- trainer log ---\n" + log.read().decode(errors="replace")[-5000:])
            raise


def trainer_health(metrics_port: int) -> dict[str, Any] | None:
    """A `croupier train` process's /healthz, or None while it does not answer."""
    try:
        return httpx.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return None
