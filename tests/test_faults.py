"""Fault survival with real processes on loopback: a `croupier train` and a `croupier serve`
subprocess, killed with SIGKILL, and the link between them cut from the trainer's side.

One scenario, in phases (each bounded), because every trainer start costs a Ray session:

1. trainer and server up, games flowing, versions arriving, a checkpoint on disk;
2. the link is cut from the trainer's side (a loopback proxy closes both sockets): the server
   reconnects with backoff and nothing is trained twice;
3. the trainer is SIGKILLed: decisions keep flowing (no errors, normal latency), episodes pile
   up in the server's spool;
4. the server is SIGKILLed and restarted on the same data directory: it serves the last
   version at once and still holds the spooled episodes;
5. the trainer restarts from its checkpoint: the server reconnects, the backlog arrives, and
   the trainer's ingest log holds every episode the servers finished exactly once (trained,
   or dropped for lag and counted), but for the last partial batch, which is not trained yet,
   so not acknowledged, so still in the server's spool.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from croupier.engine.rlcard_games import RLCardTable
from tests.conftest import BackgroundPlay, LoggedServer, free_port, running_server_logged, wait_for
from tests.helpers.link import token_file
from tests.helpers.trainer import settled_snapshot

GAME = "leduc-holdem"
TOKEN = "fault-u6lENUvJNythv1Dbhq4L4TGiOoQ36Pa9"  # random: a made-up one is refused
TRAINER_START_S = 120


class LinkProxy:
    """A loopback TCP forwarder between servers and the trainer; `cut()` closes every link
    it carries, as a trainer-side close looks to the server."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()  # trainer down: the server sees a refused link and backs off
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
        return len(pairs)

    def close(self) -> None:
        self.cut()
        self.listener.close()


@contextlib.contextmanager
def trainer_process(
    port: int, checkpoint_dir: Path, metrics_port: int | None = None
) -> Iterator[subprocess.Popen]:
    """`croupier train` (PPO, small batches, a checkpoint every iteration) on `port`."""
    cmd = [sys.executable, "-m", "croupier", "train", "--game", GAME, "--algo", "ppo"]
    if metrics_port is not None:
        cmd += ["--metrics-port", str(metrics_port)]
    cmd += ["--listen", f"127.0.0.1:{port}", "--checkpoint-dir", str(checkpoint_dir)]
    cmd += ["--train-batch-size", "200", "--minibatch-size", "100", "--num-epochs", "1"]
    cmd += ["--hiddens", "32,32", "--checkpoint-every", "1"]
    cmd += ["--link-token-file", token_file(TOKEN)]
    cmd += ["--max-version-lag", "1000", "--log-level", "info", "--no-rules-anchor"]
    with tempfile.NamedTemporaryFile(prefix="croupier-train-", suffix=".log") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.log_path = log.name  # type: ignore[attr-defined]
            yield proc
        except BaseException:
            log.seek(0)
            print("--- trainer log ---\n" + log.read().decode(errors="replace")[-3000:])
            raise
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


def health(server: LoggedServer) -> dict[str, Any]:
    return server.get("/healthz")


def decide_latencies(url: str, n: int = 40) -> list[float]:
    """Seconds per decide for `n` learned decisions on one fresh game."""
    created = httpx.post(
        url + "/v1/games", json={"game": GAME, "seats": {"0": "learned", "1": "learned"}}
    ).json()
    table = RLCardTable(GAME)
    table.reset(5)
    state = table.state_json(table.current_player())
    seat = str(table.current_player())
    out = []
    with httpx.Client(base_url=url, timeout=10) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            resp = client.post(
                f"/v1/games/{created['game_id']}/decide", json={"seat": seat, "state": state}
            )
            out.append(time.perf_counter() - t0)
            assert resp.status_code == 200 and not resp.json()["fallback"], resp.text
    httpx.delete(f"{url}/v1/games/{created['game_id']}", timeout=10)
    return out


def play_for(url: str, seconds: float) -> BackgroundPlay:
    play = BackgroundPlay(url, games=8).start()
    time.sleep(seconds)
    play.stop()
    assert play.errors == 0 and play.hands > 0, (play.hands, play.errors)
    return play


@pytest.mark.timeout(420)
def test_trainer_kill_server_kill_and_link_cut(tmp_path):
    checkpoint_dir, data_dir = tmp_path / "trainer", tmp_path / "server"
    trainer_port = free_port()
    proxy = LinkProxy(trainer_port)
    args = ("--trainer", f"127.0.0.1:{proxy.port}", "--link-token-file", token_file(TOKEN))
    args += ("--data-dir", str(data_dir), "--seats", "learned,rules")
    recorded = 0
    try:
        # --- 1. up and training -------------------------------------------------------------
        with (
            # The server first: started beside a booting trainer it can miss its deadline.
            running_server_logged(*args, timeout_s=60) as server,
            trainer_process(trainer_port, checkpoint_dir) as trainer,
        ):
            link = lambda: health(server)["trainer_link"]  # noqa: E731
            wait_for(lambda: link()["connected"], TRAINER_START_S, 0.5, "the trainer link")
            with BackgroundPlay(server.url, games=8) as play:
                wait_for(
                    lambda: server.latest() >= 2 and (checkpoint_dir / "checkpoint").is_dir(),
                    120, 0.5, "two versions and a checkpoint",
                )  # fmt: skip

                # --- 2. the link is cut from the trainer's side ----------------------------
                connects = link()["connects"]
                assert proxy.cut() == 1
                wait_for(lambda: link()["connects"] > connects and link()["connected"], 30, 0.2,
                         "the server to reconnect")  # fmt: skip
                baseline = statistics.median(decide_latencies(server.url))

                # --- 3. the trainer is killed -----------------------------------------------
                trainer.send_signal(signal.SIGKILL)
                trainer.wait(10)
                wait_for(lambda: not link()["connected"], 10, 0.2, "the link to drop")
                version = server.latest()
                outage = statistics.median(decide_latencies(server.url))
                time.sleep(1.5)  # games go on
            assert play.errors == 0 and play.hands > 0
            print(f"\nmedian decide latency: connected {baseline * 1e3:.1f} ms, "
                  f"trainer down {outage * 1e3:.1f} ms")  # fmt: skip
            assert outage < max(3 * baseline, 0.05), (baseline, outage)
            spool = health(server)["episodes"]
            assert spool["spooled"] > 0 and spool["dropped"] == 0, spool
            assert health(server)["fallbacks"] == 0

            # --- 4. the server is killed too ----------------------------------------------
            recorded += spool["recorded"]
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(10)

        with running_server_logged(*args, timeout_s=60) as again:
            assert again.latest() == version  # the last weights, at once
            spool2 = health(again)["episodes"]
            assert spool2["recovered"] == spool2["spooled"] == spool["spooled"], (spool, spool2)
            play_for(again.url, 2)

            # --- 5. the trainer comes back from its checkpoint ---------------------------
            metrics_port = free_port()
            with trainer_process(trainer_port, checkpoint_dir, metrics_port) as trainer2:
                wait_for(lambda: health(again)["trainer_link"]["connected"], TRAINER_START_S,
                         0.5, "the restarted trainer")  # fmt: skip
                # (It listens only once restored: the link comes up after the restore.)
                resumed = wait_for(
                    lambda: re.search(
                        r"resumed from .* at version (\d+)", Path(trainer2.log_path).read_text()
                    ),
                    60, 0.5, "the trainer to resume from its checkpoint",
                )  # fmt: skip
                # Never below what the servers already saw: a checkpoint older than the last
                # push numbers on past the highest version published.
                assert int(resumed.group(1)) >= version, (resumed.group(0), version)
                trainer_health = f"http://127.0.0.1:{metrics_port}/healthz"
                # The games have stopped: the backlog is trained and acked, but for what the
                # trainer holds untrained (acknowledged means trained), which stays spooled.
                final, entries = settled_snapshot(
                    lambda: health(again)["episodes"],
                    lambda: httpx.get(trainer_health, timeout=5).json()["unacked_episodes"],
                    checkpoint_dir / "ingested-0.log",
                )
                recorded += final["recorded"]
                assert final["dropped"] == 0
                # A server never installs an older version than it holds: it never went back.
                assert again.latest() >= int(resumed.group(1))
    finally:
        proxy.close()

    outcomes = Counter(outcome for _, outcome in entries)
    ids = Counter(episode_id for episode_id, _ in entries)
    print("ingest log:", dict(outcomes), "servers recorded:", recorded)
    assert max(ids.values()) == 1, "an episode was taken twice"
    assert outcomes["rejected"] == 0 and outcomes["trained"] > 0
    # recorded = trained + counted drops + what still waits for training (in the spool).
    settled = sum(outcomes[k] for k in ("trained", "lag", "stale", "backlog"))
    assert settled + final["spooled"] == recorded, (outcomes, final, recorded)
