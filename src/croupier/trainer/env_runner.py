"""The trainer's EnvRunner: an RLlib adapter over the link server (`croupier.link.server`).

Policy servers connect to the link server and send finished episode records; this runner

- validates every record and converts it to RLlib's episode (`trainer.episodes`), counts what
  it rejects, drops duplicates (at-least-once delivery from the servers; the check and its
  record in the ingest log are one step under one lock) and episodes older than
  `max_version_lag`, and measures ingest lag;
- acknowledges an episode only once it is settled: trained (a learner update that used it has
  completed: the weights version moved `ack_after_versions` past the one it was handed to the
  learner under), or dropped by policy (lag, staleness, the memory bound: counted) or refused.
  Until then its server keeps it in its spool, so a trainer killed at any moment loses none:
  the server sends it again, and the ingest log (`trainer.ingest_log`) recognises what was
  settled before;
- pushes each new weights version to every connected server as soon as the Algorithm sets it.

`sample()` returns the episodes received since the last call, waiting until `sample_min_steps`
env steps are in or `sample_timeout_s` passed, and with no traffic as long as it takes (until
the runner is stopped). Episodes wait in the inbox (`trainer.inbox`: newest first, bounded,
staleness-checked).

The runner listens only once `start_link()` is called (`listen_at_start=False`, as the trainer
does after restoring its checkpoint), so no server is handed weights before they are restored.
Each version it publishes is noted beside the checkpoint (`trainer.published`): a trainer
restarted from an older checkpoint can go on from them.

Why ~490 lines in one module: RLlib's `EnvRunner` contract (sample, weights, state, metrics,
checkpointing) is one class, and every part of it touches the same inbox and ack ledger; the
protocol, sockets and records already live in `link/` and `trajectories/`.
"""

from __future__ import annotations

import logging
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
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MEAN,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.serialization import gym_space_to_dict

from croupier import rllib_private
from croupier.link import protocol, wire
from croupier.link.secret import TokenSource
from croupier.link.server import LinkCounters, LinkServer, ServerOptions
from croupier.link.server import check_listen as _check_listen
from croupier.policies.module import ModelSpec
from croupier.trainer.episodes import EpisodeRejected, validate_episode
from croupier.trainer.inbox import EpisodeInbox
from croupier.trainer.ingest_log import IngestLog
from croupier.trainer.published import note_published, published_version
from croupier.trajectories.record import record_id, silent_hands

log = logging.getLogger(__name__)

_RECENT_IDS = 200_000


@dataclass(frozen=True)
class LinkOptions:
    """The runner's settings, carried in `config.env_config["croupier"]` (plain data)."""

    host: str = "127.0.0.1"
    port: int = 5555
    # Where the link token is (`link.secret.TokenSource`: a file's path or an environment
    # variable's name), never the token: these options are pickled into every checkpoint and
    # handed to every env runner actor. Each runner reads the token in its own process.
    token_file: str | None = None
    token_env: str | None = None
    max_version_lag: int | None = None
    sample_min_steps: int = 500
    sample_timeout_s: float = 2.0
    # The most env steps one `sample()` returns (the newest waiting episodes); None: no cap.
    sample_max_steps: int | None = None
    # A waiting episode more than this many versions behind the newest when it would be
    # sampled is dropped (counted: episodes_dropped_stale); None: no bound.
    max_sample_lag: int | None = None
    # A sample is taken only while episodes played within this many versions wait (a backlog
    # alone waits for fresh games, `EpisodeInbox.take`); None: any will do.
    fresh_lag: int | None = None
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
    # An episode handed to the learner is acknowledged as trained once the weights version
    # is this many past the one it was handed over under (`algo.build_config` sets it).
    ack_after_versions: int = 1
    # Before the handshake is done: each frame's size cap, and how long (in all) a peer may
    # take; connections handshaking at once (past it the oldest is closed).
    max_handshake_bytes: int = 4096
    handshake_timeout_s: float = ServerOptions.handshake_timeout_s
    max_handshaking: int = ServerOptions.max_handshaking
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

    def token_source(self) -> TokenSource:
        return TokenSource(file=self.token_file, env=self.token_env)

    def server_options(self, port: int, token: str | None) -> ServerOptions:
        return ServerOptions(
            host=self.host,
            port=port,
            token=token,
            insecure=self.insecure,
            max_frame_bytes=self.max_frame_bytes,
            max_handshake_bytes=self.max_handshake_bytes,
            handshake_timeout_s=self.handshake_timeout_s,
            max_handshaking=self.max_handshaking,
            max_connections=self.max_connections,
            max_queued_bytes=self.max_queued_bytes,
        )


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

        self._started_at = time.monotonic()
        self._node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        # Every episode settled (trained, dropped for lag, staleness or the memory bound, or
        # refused) is written to the ingest log, then acked: a server deletes it from its
        # spool on the ack, and a resend whose ack was lost is recognised, even after a
        # restart. What is taken but not settled yet is in `_pending`, not in the log.
        state_dir = self.options.state_dir
        self.ingest_log = IngestLog(
            Path(state_dir) / f"ingested-{self.worker_index}.log" if state_dir else None,
            keep=_RECENT_IDS,
        )
        self.counters = LinkCounters()
        self.hands_received = 0
        self.hand_payoff_received = 0.0
        self.inbox = EpisodeInbox(
            self.counters,
            sample_max_steps=self.options.sample_max_steps,
            max_sample_lag=self.options.max_sample_lag,
            fresh_lag=self.options.fresh_lag,
            backlog_max_steps=self.options.backlog_max_steps,
            on_drop=self._dropped_by_inbox,
        )
        # The duplicate check and its record in the ingest log (or in `_pending`) are one
        # step: two connections delivering the same episode at once (a resend racing the
        # original) take it once.
        self._ingest_lock = threading.Lock()
        # Taken, not settled: id -> the connections it came on (each gets the ack; a server
        # that reconnected meanwhile sends it again on its new connection).
        self._pending: dict[str, list[Any]] = {}
        # Handed to the learner, not yet known trained: (weights version then, ids).
        self._handed: deque[tuple[int, list[str]]] = deque()
        self.lag_histogram: Counter[int] = Counter()
        self._done_for_metrics: list[SingleAgentEpisode] = []
        port = self.options.port + self.worker_index if self.options.port else 0
        # Read here, in this runner's own process (on its own node), never from the config.
        token = self.options.token_source().read()
        self.server = LinkServer(self, self.options.server_options(port, token), self.counters)
        self._stopping = threading.Event()
        self._state_body = self._encode_state()

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
        if serves and self.server.listening is None and not self._stopping.is_set():
            self.server.listen(self.server.options.port)
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
                episodes, steps = self.inbox.take(self._weights_seq_no)
                if episodes:
                    break
        with self._ingest_lock:  # acked once an update past this version has completed
            self._handed.append((self._weights_seq_no, [e.id_ for e in episodes]))
        self.counters.add("episodes_sampled", len(episodes))
        self.counters.add("steps_sampled", steps)
        rllib_private.increase_sampled_metrics(self, steps, len(episodes))
        self._done_for_metrics.extend(episodes)
        return episodes

    def _pull_newer_state(self) -> None:
        """APPO/IMPALA with remote runners do not push weights: they leave them on RLlib's
        `EnvRunnerStateServer`, which each runner asks at the top of `sample()` (as RLlib's
        own runners do). Without this a remote runner, and so its servers, kept version 0."""
        server = rllib_private.env_runner_state_server(self)
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
        """Block until `steps` env steps are waiting to be sampled (fresh ones among them, see
        `fresh_lag`), or `timeout_s` passed."""
        return self.inbox.wait_for_steps(steps, timeout_s, self._weights_seq_no)

    def get_metrics(self) -> Any:
        win = self.config.metrics_num_episodes_for_smoothing
        for eps in self._done_for_metrics:
            self.metrics.log_value(EPISODE_LEN_MEAN, len(eps), window=win)
            self.metrics.log_value(EPISODE_RETURN_MEAN, eps.get_return(), window=win)
        self._done_for_metrics.clear()
        for key, value in self.link_stats().items():
            if isinstance(value, int | float) and key not in ("worker_index", "port"):
                self.metrics.log_value(("croupier", key), value, window=1)
        return self.metrics.reduce()

    def request_stop(self) -> None:
        """Make a waiting `sample()` give up (it raises `SamplingStopped`)."""
        self._stopping.set()
        self.inbox.wake()

    def idle_s(self) -> float:
        """Seconds since the last episode arrived (since the link opened if none has)."""
        last = self.inbox.last_arrival if self.inbox.last_arrival is not None else self._started_at
        return time.monotonic() - last

    def stop(self) -> None:
        self._stopping.set()
        self.server.stop()
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
        if self.options.state_dir and self._weights_seq_no > self._published:
            self._published = self._weights_seq_no
            note_published(
                Path(self.options.state_dir), self.worker_index, self._published, weights
            )
        self.server.broadcast(self._state_body)
        self._settle_trained()

    # --- what the link exposes -----------------------------------------------------------

    @property
    def weights_seq_no(self) -> int:
        return self._weights_seq_no

    @property
    def port(self) -> int | None:
        return self.server.port

    @property
    def listening(self) -> Any:
        return self.server.listening

    def link_stats(self) -> dict[str, Any]:
        return {
            "worker_index": self.worker_index,
            # The Ray node this runner lives on: with remote runners, where its port is.
            "node_id": self._node_id,
            "port": self.port,
            "connected_servers": self.server.connected,
            "weights_seq_no": self._weights_seq_no,
            **self.counters.snapshot(),
            "waiting_steps": self.inbox.steps,
            "unacked_episodes": len(self._pending),
            "idle_s": round(self.idle_s(), 1),
            "lag_histogram": dict(sorted(self.lag_histogram.items())),
            # The learned seats' hands (those it never acted in too) and their payoffs: the
            # payoff per hand, where RLlib's episode return counts only hands it acted in.
            "hands_received": self.hands_received,
            "hand_payoff_received": self.hand_payoff_received,
        }

    def link_config(self) -> protocol.LinkConfig:
        module_class = self.spec.module_class(self.config.observation_space)
        return protocol.LinkConfig(
            game=self.options.game,
            obs_size=int(self.config.observation_space["observations"].shape[0]),
            num_actions=int(self.config.action_space.n),
            observation_space=gym_space_to_dict(self.config.observation_space),
            action_space=gym_space_to_dict(self.config.action_space),
            module_class=f"{module_class.__module__}:{module_class.__qualname__}",
            model=self.spec.to_dict(),
            weights_seq_no=self._weights_seq_no,
            acks=True,
            max_frame_bytes=int(self.options.max_frame_bytes),
        )

    def plain_config(self) -> dict[str, Any]:
        """GET_CONFIG's answer as it goes on the wire."""
        return self.link_config().to_dict()

    def state_body(self) -> bytes:
        return self._state_body

    # --- connections ---------------------------------------------------------------------

    def _encode_state(self, weights: dict[str, Any] | None = None) -> bytes:
        weights = self.module.get_state() if weights is None else weights
        return wire.pack_body(protocol.set_state(weights, self._weights_seq_no))

    def ingest(self, records: list[Any], sender: Any = None) -> list[str]:
        """Take one EPISODES message's records (from a connection's reader thread); returns
        the ids to acknowledge now (refused, dropped for lag, or settled before: logged
        before returning, so an ack lost to a crash means a resend that is recognised). The
        episodes it takes are acked to `sender` once settled (`_settle`)."""
        space = self.config.observation_space
        obs_size = space["observations"].shape[0]
        num_actions = int(self.config.action_space.n)
        # A game of scored candidates: records are padded to the space's candidate slots.
        candidate_size = int(space["candidates"].shape[1]) if "candidates" in space.spaces else None
        # Validation (the costly part) first, outside any lock.
        checked: list[tuple[SingleAgentEpisode | None, str | None]] = []
        hands: dict[str, tuple[int, float]] = {}  # by episode id: the payoff per hand's parts
        for record in records:
            try:
                checked.append(
                    (validate_episode(record, obs_size, num_actions, candidate_size), None)
                )
                hands[checked[-1][0].id_] = silent_hands(record)
            except Exception as e:  # EpisodeRejected, or RLlib choking on odd input: never crash
                self.counters.add("episodes_rejected")
                if not isinstance(e, EpisodeRejected):
                    log.debug("rejected episode: %s: %s", type(e).__name__, e)
                episode_id = record_id(record)
                if isinstance(episode_id, str) and len(episode_id) <= 128:
                    checked.append((None, episode_id))  # logged: a resend would fail again
        accepted: list[tuple[SingleAgentEpisode, int]] = []
        settled: list[tuple[str, str]] = []  # (id, outcome) settled now: logged, then acked
        ack_now: list[str] = []
        seen_now: set[str] = set()
        duplicates = dropped_lag = 0
        with self._ingest_lock:  # check and record as one step
            for episode, rejected_id in checked:
                if episode is None:
                    if rejected_id not in seen_now:
                        settled.append((rejected_id, "rejected"))
                    seen_now.add(rejected_id)
                    continue
                if episode.id_ in seen_now:
                    duplicates += 1
                    continue
                seen_now.add(episode.id_)
                if episode.id_ in self.ingest_log:  # its ack was lost: ack again
                    duplicates += 1
                    ack_now.append(episode.id_)
                    continue
                senders = self._pending.get(episode.id_)
                if senders is not None:  # taken, not settled: resent after a reconnect
                    duplicates += 1
                    if sender is not None and sender not in senders:
                        senders.append(sender)
                    continue
                played = min(episode.custom_data["versions"])
                lag = max(0, self._weights_seq_no - played)
                self.lag_histogram[lag] += 1
                max_lag = self.options.max_version_lag
                if max_lag is not None and lag > max_lag:
                    dropped_lag += 1
                    settled.append((episode.id_, "lag"))
                    continue
                accepted.append((episode, played))
                self._pending[episode.id_] = [] if sender is None else [sender]
            self.ingest_log.record(settled)
        self.counters.add("episodes_duplicate", duplicates)
        self.counters.add("episodes_dropped_lag", dropped_lag)
        with self._ingest_lock:
            for episode, _ in accepted:
                n, silent = hands.get(episode.id_, (1, 0.0))
                self.hands_received += n
                self.hand_payoff_received += float(episode.get_return()) + silent
        self.counters.add("episodes_received", len(accepted))
        self.counters.add("steps_received", sum(len(e) for e, _ in accepted))
        self.inbox.put(accepted)
        return [*ack_now, *(i for i, _ in settled)]

    def _settle_trained(self) -> None:
        """The weights moved on: what was handed to the learner `ack_after_versions` or more
        versions ago has been through a completed update. Settle it."""
        due: list[str] = []
        with self._ingest_lock:
            while (
                self._handed
                and self._weights_seq_no - self._handed[0][0] >= self.options.ack_after_versions
            ):
                due += self._handed.popleft()[1]
        if due:
            self._settle(due, "trained")
            self.counters.add("episodes_trained", len(due))

    def _dropped_by_inbox(self, episodes: list[SingleAgentEpisode], why: str) -> None:
        self._settle([e.id_ for e in episodes], why)

    def _settle(self, ids: list[str], outcome: str) -> None:
        """Log these ids as settled (on disk first), then ack each to the connections it came
        on. A connection that is gone loses its ack: its server sends the episode again and
        the log answers for it."""
        with self._ingest_lock:
            self.ingest_log.record([(i, outcome) for i in ids])
            senders = [(i, self._pending.pop(i, ())) for i in ids]
        by_conn: dict[int, tuple[Any, list[str]]] = {}
        for episode_id, conns in senders:
            for conn in conns:
                by_conn.setdefault(id(conn), (conn, []))[1].append(episode_id)
        for conn, conn_ids in by_conn.values():
            self.server.ack(conn, conn_ids)


def check_listen(options: LinkOptions) -> None:
    """Refuse an unauthenticated, non-loopback listen address (`link.server.check_listen`)."""
    _check_listen(options.host, options.token_source().given, options.insecure)
