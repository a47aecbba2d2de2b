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
env steps are in or `sample_timeout_s` passed; at most `sample_max_steps` of them, the newest:
when the games play faster than the learner learns, the older surplus is dropped and counted,
so a learner update never grows with the backlog (which would make the next backlog bigger).
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
MAX_IDLE_S = 300.0


@dataclass(frozen=True)
class LinkOptions:
    """The runner's settings, carried in `config.env_config["croupier"]` (plain data)."""

    host: str = "127.0.0.1"
    port: int = 5555
    token: str | None = None
    max_version_lag: int | None = None
    sample_min_steps: int = 500
    sample_timeout_s: float = 2.0
    # The most env steps one `sample()` returns (the newest episodes); None: no cap.
    sample_max_steps: int | None = None
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
    """`sample()` was asked to stop (or waited `MAX_IDLE_S`) with no episode to return."""


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

        self._inbox: list[SingleAgentEpisode] = []
        self._inbox_steps = 0
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
        # With remote runners, the local one (index 0) only holds weights: it must not accept
        # servers whose episodes nobody would sample.
        if self.worker_index > 0 or config.num_env_runners == 0:
            self._listen()

    # --- EnvRunner API -------------------------------------------------------------------

    def assert_healthy(self) -> None:
        assert self.listening is not None or self.worker_index == 0, "not listening"

    def get_spaces(self) -> dict[str, Any]:
        spaces = (self.config.observation_space, self.config.action_space)
        return {INPUT_ENV_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    def sample(self, **kwargs: Any) -> list[SingleAgentEpisode]:
        self._pull_newer_state()
        # RLlib's learner connectors fail on an empty list, so wait for at least one episode
        # (the training loop calls `wait_for_steps` first, so this rarely waits long), in
        # slices, so that a stop request ends the wait.
        self.wait_for_steps(self.options.sample_min_steps, self.options.sample_timeout_s)
        deadline = time.monotonic() + MAX_IDLE_S
        while not self.wait_for_steps(1, 0.5):
            if self._stopping.is_set() or time.monotonic() > deadline:
                raise SamplingStopped(
                    "no episodes arrived"
                    if not self._stopping.is_set()
                    else "the runner is stopping"
                )
        with self._cv:
            episodes, self._inbox, steps, self._inbox_steps = self._inbox, [], self._inbox_steps, 0
        episodes, steps = self._newest(episodes, steps)
        self._count("steps_sampled", steps)
        SingleAgentEnvRunner._increase_sampled_metrics(self, steps, len(episodes))
        self._done_for_metrics.extend(episodes)
        return episodes

    def _newest(
        self, episodes: list[SingleAgentEpisode], steps: int
    ) -> tuple[list[SingleAgentEpisode], int]:
        """The newest episodes (arrival order) up to `sample_max_steps` env steps, one at
        least; the older rest are dropped. They were acked: the games do not wait on the
        learner, so a learner slower than them must leave some data out, and the oldest is
        the most off-policy. Without a cap PPO ran away: a bigger sample, a longer update,
        an even bigger backlog (11 updates in 3 minutes at 4k steps/s instead of ~100)."""
        cap = self.options.sample_max_steps
        if cap is None or steps <= cap:
            return episodes, steps
        start, kept = len(episodes), 0
        while start > 0 and (kept == 0 or kept + len(episodes[start - 1]) <= cap):
            start -= 1
            kept += len(episodes[start])
        self._count("episodes_dropped_backlog", start)
        self._count("steps_dropped_backlog", steps - kept)
        return episodes[start:], kept

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
        self._state_body = self._encode_state()
        self._remember_published(self._weights_seq_no)
        self._broadcast(self._state_body)

    def _remember_published(self, seq: int) -> None:
        """Note the highest version ever sent to servers beside the checkpoint: a trainer
        restarted from an older checkpoint numbers on from there (see `published_version`),
        so a version number never names two different sets of weights."""
        if not self.options.state_dir or seq <= self._published:
            return
        self._published = seq
        path = Path(self.options.state_dir) / f"published-{self.worker_index}"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(str(seq))
            os.replace(tmp, path)
        except OSError as e:
            log.warning("could not note the published version in %s: %s", path, e)

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
                    "episodes_acked",
                    "steps_received",
                    "steps_sampled",
                    "steps_dropped_backlog",
                    "frames_rejected",
                    "connections_refused",
                    "connections_over_cap",
                    "connections_not_reading",
                    "connections_total",
                )
            },
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

    def _encode_state(self) -> bytes:
        return wire.pack_body(
            {
                "type": RLlink.SET_STATE.name,
                "state": {
                    COMPONENT_RL_MODULE: self.module.get_state(),
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
        accepted: list[SingleAgentEpisode] = []
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
            lag = max(0, self._weights_seq_no - min(episode.custom_data["versions"]))
            self.lag_histogram[lag] += 1
            max_lag = self.options.max_version_lag
            if max_lag is not None and lag > max_lag:
                self._count("episodes_dropped_lag")
                taken.append((episode.id_, "lag"))
                continue
            accepted.append(episode)
            taken.append((episode.id_, "accepted"))
        # Logged first, acked second: an ack lost to a crash means a resend we recognise.
        self.ingest_log.record(taken)
        self._ack(conn, [*ack_now, *(i for i, _ in taken)])
        self._count("episodes_received", len(accepted))
        steps = sum(len(e) for e in accepted)
        self._count("steps_received", steps)
        with self._cv:
            self._inbox.extend(accepted)
            self._inbox_steps += steps
            self._cv.notify_all()

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
        if path.suffix == ".tmp":
            continue
        try:
            highest = max(highest, int(path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return highest
