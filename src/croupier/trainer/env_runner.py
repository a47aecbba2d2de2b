"""The trainer's EnvRunner: policy servers connect to it over TCP and send finished episodes.

It subclasses RLlib's `EnvRunner` and speaks RLlib's RLlink framing, but unlike RLlib's stock
`EnvRunnerServerForExternalInference` it

- accepts many policy servers at once (up to `max_connections`): a reader and a writer thread
  per connection, so a slow or stuck server never blocks another, and a weights push never
  waits on a reader; a server that does not read what it is sent is dropped, not buffered for;
- with a link token, lets a server in only once it proved it holds the token (a
  challenge-response both ways) and tags every frame after that (`croupier.link.auth`); with or
  without, the first frame must be a small PING within a total handshake deadline;
- answers GET_CONFIG with plain data (spaces, module class path, model spec), never a pickle,
  and decodes frames without ever unpickling (see `croupier.link.wire`);
- validates every episode and counts what it rejects, drops duplicates (at-least-once delivery
  from the servers) and episodes older than `max_version_lag`, and measures ingest lag;
- pushes each new weights version to every connected server as soon as the Algorithm sets it.

`sample()` returns the episodes received since the last call, waiting until `sample_min_steps`
env steps are in or `sample_timeout_s` passed, and with no traffic as long as it takes (until
the runner is stopped). Episodes wait in a queue; one `sample()` takes at most `sample_max_steps`
of them, the newest: a learner update never grows with a backlog (which would make the next
backlog bigger), and a backlog (a trainer outage's spool) is trained over the next updates with
room. What is more than `max_sample_lag` versions old by then is dropped, counted; so is what
exceeds `backlog_max_steps` in memory (see docs/trainer-lifecycle.md).

The runner listens only once `start_link()` is called (`listen_at_start=False`, as the trainer
does after restoring its checkpoint), so no server is handed weights before they are restored.
Each version it publishes is noted beside the checkpoint (`published-<i>`), with its weights
(`published-<i>.npz`): a trainer restarted from an older checkpoint can go on from them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.external.rllink import RLlink
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MEAN,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.serialization import gym_space_to_dict

from croupier.link import auth, wire
from croupier.policies.module import ModelSpec
from croupier.trainer.episodes import EpisodeRejected, validate_episode
from croupier.trainer.ingest_log import IngestLog

log = logging.getLogger(__name__)

CONFIG_FORMAT = "croupier/1"
_RECENT_IDS = 200_000
_SEQ_KEY = "__weights_seq_no__"  # in published-<i>.npz: the version of the weights beside it


@dataclass(frozen=True)
class LinkOptions:
    """The runner's settings, carried in `config.env_config["croupier"]` (plain data)."""

    host: str = "127.0.0.1"
    port: int = 5555
    token: str | None = None
    max_version_lag: int | None = None
    sample_min_steps: int = 500
    sample_timeout_s: float = 2.0
    # The most env steps one `sample()` returns (the newest waiting episodes); None: no cap.
    sample_max_steps: int | None = None
    # A waiting episode more than this many versions behind the newest when it would be
    # sampled is dropped (counted: episodes_dropped_stale); None: no bound.
    max_sample_lag: int | None = None
    # The most env steps waiting in memory; past it the oldest are dropped (counted:
    # episodes_dropped_backlog); None: no bound.
    backlog_max_steps: int | None = None
    # False: `start_link()` opens the port (after the trainer restored its state).
    listen_at_start: bool = True
    max_frame_bytes: int = wire.DEFAULT_MAX_FRAME
    game: str = ""
    model: dict[str, Any] | None = None
    # Where the ingest log lives (de-duplication across restarts); None: memory only.
    state_dir: str | None = None
    # Before the handshake is done: each frame's size cap, and how long (in all) a peer may take.
    max_handshake_bytes: int = 4096
    handshake_timeout_s: float = 10.0
    # Connections at once (authenticated or not); more are closed as they arrive.
    max_connections: int = 256
    # Bytes queued for one server beyond the newest weights push (acks, replies); past it the
    # server is not reading and is dropped.
    max_queued_bytes: int = 16 * 1024 * 1024
    # Listen on a non-loopback address without a token (anyone who can reach the port may
    # send episodes and take the weights): refused unless this is set.
    insecure: bool = False

    @classmethod
    def from_config(cls, env_config: dict[str, Any]) -> LinkOptions:
        return cls(**env_config.get("croupier", {}))


class _Connection:
    """One policy server. Replies and pushes go through its own writer thread."""

    def __init__(self, sock: socket.socket, addr: Any, runner: LinkEnvRunner):
        self.sock = sock
        self.addr = addr
        self.runner = runner
        self.name = f"{addr[0]}:{addr[1]}"
        self.authed = False
        # The whole handshake, however the peer paces its bytes, must end by then.
        self.deadline = time.monotonic() + runner.options.handshake_timeout_s
        self.channel = auth.Channel(sock)
        self.open = True
        self._out: deque[tuple[bytes, bool]] = deque()  # (frame body, is a weights push)
        self._queued_bytes = 0  # of the bodies that are not weights pushes
        self._cv = threading.Condition()

    def start(self) -> None:
        """Start reading and writing; only once the runner knows the connection, so a drop
        from the first bad frame always finds (and closes) it."""
        threading.Thread(target=self._read_loop, daemon=True, name=f"link-r-{self.name}").start()
        threading.Thread(target=self._write_loop, daemon=True, name=f"link-w-{self.name}").start()

    def send(self, body: bytes, is_state: bool = False) -> None:
        """Queue a frame body (the writer adds the header, and the tag once authenticated)."""
        with self._cv:
            if not self.open:
                return
            if is_state:
                # Coalesce: a server that has not taken the last push only needs the newest.
                self._out = deque(item for item in self._out if not item[1])
            else:
                self._queued_bytes += len(body)
            self._out.append((body, is_state))
            self._cv.notify()
            overflowing = self._queued_bytes > self.runner.options.max_queued_bytes
        if overflowing:
            self.runner._count("connections_not_reading")
            self.runner._drop(self, "not reading what it is sent")

    def close(self) -> None:
        with self._cv:
            self.open = False
            self._out.clear()
            self._cv.notify()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cv:
                    while self.open and not self._out:
                        self._cv.wait()
                    if not self.open:
                        return
                    body, is_state = self._out.popleft()
                    if not is_state:
                        self._queued_bytes -= len(body)
                self.channel.send_body(body)
        except (OSError, ValueError) as e:
            self.runner._drop(self, f"send failed: {e}")

    def _read_loop(self) -> None:
        runner = self.runner
        try:
            while self.open:
                if not self.authed:
                    if not self._handshake():
                        return
                    continue
                kind, body = self.channel.recv(runner.options.max_frame_bytes)
                runner._handle(self, kind, body)
        except wire.FrameError as e:
            runner._count("frames_rejected")
            runner._drop(self, f"bad frame: {e}")
        except (ConnectionError, OSError) as e:  # TimeoutError included
            runner._drop(self, f"connection closed: {e}")
        except Exception as e:  # never let one peer take the runner down
            runner._count("frames_rejected")
            runner._drop(self, f"unexpected {type(e).__name__}: {e}")

    def _handshake(self) -> bool:
        """Small frames, a total deadline, and (with a token) proof of the token both ways,
        before anything the peer sends is acted on or anything but the handshake is sent."""
        runner = self.runner
        try:
            self.channel = auth.trainer_handshake(
                self.sock, runner.options.token, self.deadline, runner.options.max_handshake_bytes
            )
        except Exception as e:  # a bad frame, a wrong proof, a slow or vanished peer
            if isinstance(e, wire.FrameError):
                runner._count("frames_rejected")
            runner._count("connections_refused")
            runner._drop(self, f"no valid handshake: {e}")
            return False
        self.sock.settimeout(None)
        self.authed = True  # the channel is set first: pushes from now on are tagged
        return True


class SamplingStopped(RuntimeError):
    """`sample()` was asked to stop while it had no episode to return."""


class LinkEnvRunner(EnvRunner, Checkpointable):
    def __init__(self, *, config: Any, **kwargs: Any):
        super().__init__(config=config, **kwargs)
        self.worker_index: int = kwargs.get("worker_index", 0)
        self.options = LinkOptions.from_config(config.env_config)
        self.spec = ModelSpec.from_dict(self.options.model or {})
        self.module = config.get_rl_module_spec(
            spaces=self.get_spaces(), inference_only=True
        ).build()
        self._weights_seq_no = 0
        # Never note a lower version than one already published (a checkpoint restore sets an
        # older state on this runner before the trainer numbers on past the published one).
        self._published = (
            published_version(Path(self.options.state_dir)) if self.options.state_dir else 0
        )
        self.metrics = MetricsLogger(stats_cls_lookup=config.stats_cls_lookup, root=False)

        # (episode, the oldest version that played it), oldest arrival first.
        self._inbox: deque[tuple[SingleAgentEpisode, int]] = deque()
        self._inbox_steps = 0
        self._started_at = time.monotonic()
        self._last_episode_at: float | None = None  # monotonic; None: none yet
        self._cv = threading.Condition()
        # Every episode taken (into the inbox, or dropped for lag or as invalid) is written to
        # the ingest log, then acked: a server deletes it from its spool on the ack, and a
        # resend whose ack was lost is recognised, even after a restart.
        state_dir = self.options.state_dir
        self.ingest_log = IngestLog(
            Path(state_dir) / f"ingested-{self.worker_index}.log" if state_dir else None,
            keep=_RECENT_IDS,
        )
        self.counters: Counter[str] = Counter()
        self.lag_histogram: Counter[int] = Counter()
        self._done_for_metrics: list[SingleAgentEpisode] = []
        self._conns: set[_Connection] = set()
        self._conns_lock = threading.Lock()
        self._stopping = threading.Event()
        self._state_body = self._encode_state()

        self.listening = None
        if self.options.listen_at_start:
            self.start_link()

    # --- EnvRunner API -------------------------------------------------------------------

    def assert_healthy(self) -> None:
        pass  # a runner that has not started its link yet (being restored) is healthy

    def start_link(self) -> int | None:
        """Open the port servers connect to; returns it. With remote runners the local one
        (index 0) only holds weights: it must not accept servers whose episodes nobody would
        sample. Idempotent."""
        serves = self.worker_index > 0 or self.config.num_env_runners == 0
        if serves and self.listening is None and not self._stopping.is_set():
            self._listen()
            self._started_at = time.monotonic()  # idle counts from when games could come
        return self.port

    def get_spaces(self) -> dict[str, Any]:
        spaces = (self.config.observation_space, self.config.action_space)
        return {INPUT_ENV_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    def sample(self, **kwargs: Any) -> list[SingleAgentEpisode]:
        self._pull_newer_state()
        # RLlib's learner connectors fail on an empty list, so wait for at least one episode
        # (the training loop calls `wait_for_steps` first, so this rarely waits), as long as
        # it takes: games may pause for hours. In slices, so that a stop request ends it.
        self.wait_for_steps(self.options.sample_min_steps, self.options.sample_timeout_s)
        while True:
            if self._stopping.is_set():
                raise SamplingStopped("the runner is stopping")
            if self.wait_for_steps(1, 0.5):
                with self._cv:
                    episodes, steps = self._take()
                if episodes:
                    break
        self._count("episodes_sampled", len(episodes))
        self._count("steps_sampled", steps)
        SingleAgentEnvRunner._increase_sampled_metrics(self, steps, len(episodes))
        self._done_for_metrics.extend(episodes)
        return episodes

    def _take(self) -> tuple[list[SingleAgentEpisode], int]:
        """The newest waiting episodes up to `sample_max_steps` env steps (one at least),
        skipping and dropping those more than `max_sample_lag` versions old. Holds `_cv`.

        Newest first: the learner always gets the freshest data it can (PPO learns markedly
        worse from data a few versions old, docs/off-policy.md), and what it cannot take now
        waits for an update with room, i.e. an outage's backlog is trained as soon as the
        learner is faster than the games, each update still bounded (unbounded, PPO ran
        away: a bigger sample, a longer update, a bigger backlog: 11 updates in 3 minutes
        instead of ~100). When the games outpace the learner for good, the staleness bound
        decides what is lost, and counts it."""
        max_lag = self.options.max_sample_lag
        stale = stale_steps = 0
        if max_lag is not None:
            # The oldest arrivals are (near enough) the oldest versions: drop from that end.
            while self._inbox and self._weights_seq_no - self._inbox[0][1] > max_lag:
                episode, _ = self._inbox.popleft()
                stale += 1
                stale_steps += len(episode)
        cap = self.options.sample_max_steps
        episodes: list[SingleAgentEpisode] = []
        steps = 0
        while self._inbox:
            if cap is not None and episodes and steps + len(self._inbox[-1][0]) > cap:
                break
            episode, played = self._inbox.pop()
            if max_lag is not None and self._weights_seq_no - played > max_lag:
                stale += 1
                stale_steps += len(episode)
                continue
            episodes.append(episode)
            steps += len(episode)
        self._inbox_steps -= steps + stale_steps
        if stale:
            self._count("episodes_dropped_stale", stale)
            self._count("steps_dropped_stale", stale_steps)
        return episodes, steps

    def _pull_newer_state(self) -> None:
        """APPO/IMPALA with remote runners do not push weights: they leave them on RLlib's
        `EnvRunnerStateServer`, which each runner asks at the top of `sample()` (as RLlib's
        own runners do). Without this a remote runner, and so its servers, kept version 0."""
        server = getattr(self, "_env_runner_state_server", None)
        if server is None:
            return
        try:
            state = ray.get(server.pull_if_newer.remote(self._weights_seq_no))
        except ray.exceptions.RayError as e:
            log.warning("could not pull weights from the EnvRunnerStateServer: %s", e)
            return
        if state is not None:
            self.set_state(state)

    def wait_for_steps(self, steps: int, timeout_s: float) -> bool:
        """Block until `steps` env steps are waiting to be sampled, or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._inbox_steps < steps:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
            return True

    def get_metrics(self) -> Any:
        win = self.config.metrics_num_episodes_for_smoothing
        for eps in self._done_for_metrics:
            self.metrics.log_value(EPISODE_LEN_MEAN, len(eps), window=win)
            self.metrics.log_value(EPISODE_RETURN_MEAN, eps.get_return(), window=win)
        self._done_for_metrics.clear()
        for key, value in self.link_stats().items():
            if isinstance(value, int | float):
                self.metrics.log_value(("croupier", key), value, window=1)
        return self.metrics.reduce()

    def request_stop(self) -> None:
        """Make a waiting `sample()` give up (it raises `SamplingStopped`)."""
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()

    def idle_s(self) -> float:
        """Seconds since the last episode arrived (since the link opened if none has)."""
        last = self._last_episode_at if self._last_episode_at is not None else self._started_at
        return time.monotonic() - last

    def stop(self) -> None:
        self._stopping.set()
        if self.listening is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not, and
            # the port would stay taken.
            with contextlib.suppress(OSError):
                self.listening.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.listening.close()
            self.listening = None
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            conn.close()
        self.ingest_log.close()

    # --- Checkpointable ------------------------------------------------------------------

    def get_ctor_args_and_kwargs(self) -> tuple[tuple, dict[str, Any]]:
        return (), {"config": self.config}

    def get_checkpointable_components(self) -> list[tuple[str, Any]]:
        return [(COMPONENT_RL_MODULE, self.module)]

    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if components is not None and COMPONENT_RL_MODULE not in components:
            return {}  # no connectors live here: the policy servers do the env-to-module work
        return {COMPONENT_RL_MODULE: self.module.get_state(), WEIGHTS_SEQ_NO: self._weights_seq_no}

    def set_state(self, state: dict[str, Any]) -> None:
        if COMPONENT_RL_MODULE not in state:
            return
        seq = int(state.get(WEIGHTS_SEQ_NO, 0))
        if seq == 0 or seq > self._weights_seq_no:
            module_state = state[COMPONENT_RL_MODULE]
            if isinstance(module_state, ray.ObjectRef):
                module_state = ray.get(module_state)
            if isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
                module_state = module_state[DEFAULT_MODULE_ID]
            self.module.set_state(module_state)
        if seq > 0:
            self._weights_seq_no = seq
        weights = self.module.get_state()
        self._state_body = self._encode_state(weights)
        # Noted before it is sent: whatever a server holds, the trainer can find again.
        self._remember_published(self._weights_seq_no, weights)
        self._broadcast(self._state_body)

    def _remember_published(self, seq: int, weights: dict[str, Any]) -> None:
        """Note the highest version ever sent to servers, and its weights, beside the
        checkpoint: a trainer restarted from an older checkpoint goes on from these weights
        under their own number (see `read_published_weights`), so a version number never
        names two different sets of weights, and `latest` never falls back in quality."""
        if not self.options.state_dir or seq <= self._published:
            return
        self._published = seq
        base = Path(self.options.state_dir) / f"published-{self.worker_index}"
        try:
            # The weights first: a number on disk always has its weights, or older ones.
            tmp_npz = base.with_name(base.name + ".tmp.npz")
            arrays = {k: np.asarray(v) for k, v in weights.items()}
            np.savez(tmp_npz, **arrays, **{_SEQ_KEY: np.asarray(seq, dtype=np.int64)})
            os.replace(tmp_npz, base.with_name(base.name + ".npz"))
            tmp = base.with_suffix(".tmp")
            tmp.write_text(str(seq))
            os.replace(tmp, base)
        except OSError as e:
            log.warning("could not note the published version in %s: %s", base, e)

    # --- what the link exposes -----------------------------------------------------------

    @property
    def weights_seq_no(self) -> int:
        return self._weights_seq_no

    @property
    def port(self) -> int | None:
        return self.listening.getsockname()[1] if self.listening is not None else None

    def link_stats(self) -> dict[str, Any]:
        with self._conns_lock:
            connected = len(self._conns)
        return {
            "connected_servers": connected,
            "weights_seq_no": self._weights_seq_no,
            **{
                k: self.counters[k]
                for k in (
                    "episodes_received",
                    "episodes_rejected",
                    "episodes_duplicate",
                    "episodes_dropped_lag",
                    "episodes_dropped_backlog",
                    "episodes_dropped_stale",
                    "episodes_sampled",
                    "episodes_acked",
                    "steps_received",
                    "steps_sampled",
                    "steps_dropped_backlog",
                    "steps_dropped_stale",
                    "frames_rejected",
                    "connections_refused",
                    "connections_over_cap",
                    "connections_not_reading",
                    "connections_total",
                )
            },
            "waiting_steps": self._inbox_steps,
            "idle_s": round(self.idle_s(), 1),
            "lag_histogram": dict(sorted(self.lag_histogram.items())),
        }

    def plain_config(self) -> dict[str, Any]:
        module_class = self.spec.module_class()
        return {
            "format": CONFIG_FORMAT,
            "game": self.options.game,
            "obs_size": int(self.config.observation_space["observations"].shape[0]),
            "num_actions": int(self.config.action_space.n),
            "observation_space": gym_space_to_dict(self.config.observation_space),
            "action_space": gym_space_to_dict(self.config.action_space),
            "module_class": f"{module_class.__module__}:{module_class.__qualname__}",
            "model": self.spec.to_dict(),
            "weights_seq_no": self._weights_seq_no,
            "acks": True,
            # Servers keep each message's body at most this big (a frame over it is refused).
            "max_frame_bytes": int(self.options.max_frame_bytes),
        }

    # --- connections ---------------------------------------------------------------------

    def _listen(self) -> None:
        check_listen(self.options)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        port = self.options.port + self.worker_index if self.options.port else 0
        sock.bind((self.options.host, port))
        sock.listen(64)
        self.listening = sock
        threading.Thread(target=self._accept_loop, args=(sock,), daemon=True).start()
        log.info("trainer link listening on %s:%d", self.options.host, self.port)

    def _accept_loop(self, sock: socket.socket) -> None:
        while True:
            try:
                client, addr = sock.accept()
            except OSError:
                return  # closed by stop()
            self._count("connections_total")
            with self._conns_lock:
                full = len(self._conns) >= self.options.max_connections
            if full:
                self._count("connections_over_cap")
                with contextlib.suppress(OSError):
                    client.close()
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(client, addr, self)
            with self._conns_lock:
                self._conns.add(conn)
            conn.start()

    def _drop(self, conn: _Connection, why: str) -> None:
        with self._conns_lock:
            known = conn in self._conns
            self._conns.discard(conn)
        if known:
            log.info("policy server %s disconnected: %s", conn.name, why)
            conn.close()

    def _count(self, key: str, n: int = 1) -> None:
        self.counters[key] += n

    def _broadcast(self, body: bytes) -> None:
        with self._conns_lock:
            conns = [c for c in self._conns if c.authed]
        for conn in conns:
            conn.send(body, is_state=True)

    def _encode_state(self, weights: dict[str, Any] | None = None) -> bytes:
        return wire.pack_body(
            {
                "type": RLlink.SET_STATE.name,
                "state": {
                    COMPONENT_RL_MODULE: self.module.get_state() if weights is None else weights,
                    WEIGHTS_SEQ_NO: self._weights_seq_no,
                },
            }
        )

    def _handle(self, conn: _Connection, kind: RLlink, body: dict[str, Any]) -> None:
        if kind is RLlink.PING:
            conn.send(wire.pack_body({"type": RLlink.PONG.name}))
        elif kind is RLlink.GET_CONFIG:
            body = {"type": RLlink.SET_CONFIG.name, "config": self.plain_config()}
            conn.send(wire.pack_body(body))
        elif kind is RLlink.GET_STATE:
            conn.send(self._state_body, is_state=True)
        elif kind in (RLlink.EPISODES, RLlink.EPISODES_AND_GET_STATE):
            self._ingest(body.get("episodes"), conn)
            # EPISODES_AND_GET_STATE is answered by the next push, which every server gets.
        else:
            raise wire.FrameError(f"unexpected message {kind.name}")

    def _ingest(self, states: Any, conn: _Connection | None = None) -> None:
        if not isinstance(states, list):
            raise wire.FrameError("EPISODES needs a list of episodes")
        obs_size = self.config.observation_space["observations"].shape[0]
        num_actions = int(self.config.action_space.n)
        accepted: list[tuple[SingleAgentEpisode, int]] = []
        taken: list[tuple[str, str]] = []  # (id, outcome) settled now: logged, then acked
        ack_now: list[str] = []
        seen_now: set[str] = set()
        for state in states:
            try:
                episode = validate_episode(state, obs_size, num_actions)
            except Exception as e:  # EpisodeRejected, or from_state on odd input: never crash
                self._count("episodes_rejected")
                if not isinstance(e, EpisodeRejected):
                    log.debug("rejected episode: %s: %s", type(e).__name__, e)
                episode_id = state.get("id_") if isinstance(state, dict) else None
                if isinstance(episode_id, str) and len(episode_id) <= 128:
                    if episode_id not in seen_now:
                        taken.append((episode_id, "rejected"))  # a resend would fail again
                    seen_now.add(episode_id)
                continue
            if episode.id_ in seen_now:
                self._count("episodes_duplicate")
                continue
            seen_now.add(episode.id_)
            if episode.id_ in self.ingest_log:  # its ack was lost: ack again
                self._count("episodes_duplicate")
                ack_now.append(episode.id_)
                continue
            played = min(episode.custom_data["versions"])
            lag = max(0, self._weights_seq_no - played)
            self.lag_histogram[lag] += 1
            max_lag = self.options.max_version_lag
            if max_lag is not None and lag > max_lag:
                self._count("episodes_dropped_lag")
                taken.append((episode.id_, "lag"))
                continue
            accepted.append((episode, played))
            taken.append((episode.id_, "accepted"))
        # Logged first, acked second: an ack lost to a crash means a resend we recognise.
        self.ingest_log.record(taken)
        self._ack(conn, [*ack_now, *(i for i, _ in taken)])
        self._count("episodes_received", len(accepted))
        steps = sum(len(e) for e, _ in accepted)
        self._count("steps_received", steps)
        with self._cv:
            if accepted:
                self._last_episode_at = time.monotonic()
            self._inbox.extend(accepted)
            self._inbox_steps += steps
            self._bound_backlog()
            self._cv.notify_all()

    def _bound_backlog(self) -> None:
        """Drop the oldest waiting episodes past `backlog_max_steps` (a memory bound: each
        waiting episode is a Python object of a few KB). Holds `_cv`."""
        bound = self.options.backlog_max_steps
        if bound is None or self._inbox_steps <= bound:
            return
        dropped = dropped_steps = 0
        while self._inbox and self._inbox_steps - dropped_steps > bound:
            episode, _ = self._inbox.popleft()
            dropped += 1
            dropped_steps += len(episode)
        self._inbox_steps -= dropped_steps
        self._count("episodes_dropped_backlog", dropped)
        self._count("steps_dropped_backlog", dropped_steps)

    def _ack(self, conn: _Connection | None, ids: list[str]) -> None:
        """Tell the server these episodes are taken (it deletes them from its spool). On a
        connection that is gone the ack is lost: the server sends them again, and they are
        recognised then."""
        if conn is None or not conn.open or not ids:
            return
        conn.send(wire.pack_body({"type": wire.LinkExt.ACK.value, "ids": ids}))
        self._count("episodes_acked", len(ids))


def check_listen(options: LinkOptions) -> None:
    """An unauthenticated trainer port reachable from other machines lets anyone feed it
    episodes and download its weights: refused unless asked for with `insecure`."""
    if options.token is None and not options.insecure and not auth.is_loopback(options.host):
        raise ValueError(
            f"refusing to listen on {options.host!r} without a link token: set --link-token "
            "(or CROUPIER_LINK_TOKEN) on the trainer and every server, or pass --insecure on "
            "a network you trust"
        )


def published_version(state_dir: Path) -> int:
    """The highest weights version any runner of a trainer using `state_dir` has published."""
    highest = 0
    for path in state_dir.glob("published-*"):
        if path.suffix in (".tmp", ".npz"):
            continue
        try:
            highest = max(highest, int(path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return highest


def read_published_weights(state_dir: Path) -> tuple[int, dict[str, np.ndarray]] | None:
    """The newest published weights noted in `state_dir` (any runner's): (version, the
    inference module's state), or None if there are none that load. Never unpickles."""
    best: tuple[int, dict[str, np.ndarray]] | None = None
    for path in state_dir.glob("published-*.npz"):
        if path.name.endswith(".tmp.npz"):
            continue
        try:
            with np.load(path, allow_pickle=False) as data:
                seq = int(data[_SEQ_KEY])
                if best is None or seq > best[0]:
                    best = (seq, {k: data[k] for k in data.files if k != _SEQ_KEY})
        except (OSError, ValueError, KeyError) as e:
            log.warning("ignoring unreadable published weights %s: %s", path, e)
    return best
