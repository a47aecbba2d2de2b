"""The policy server's side of the trainer link.

A background thread keeps one TCP connection to the trainer: it handshakes (PING, and with a
link token a challenge-response both ways, see `link/auth.py`; GET_CONFIG, GET_STATE), then
ships finished episodes in batches (by steps or by seconds, whichever comes first) while a
reader thread installs every weights version the trainer pushes.
When the trainer is not up or goes away, it reconnects with exponential backoff; episodes wait
in the spool meanwhile (on disk), and each episode leaves the spool only when the trainer
acknowledges its id; after a reconnect every unacknowledged episode is sent again (the trainer
drops ids it has seen). Games never wait on any of this.

No error ends the thread: anything a trainer (or an impersonator) sends, and any bug of ours,
is caught, counted, shown in `stats()` (so `/healthz` and `/metrics`) and retried after a
backoff. Each message is capped in bytes below the frame limit the trainer announces in its
config, so a backlog after an outage goes out in pieces the trainer accepts; an episode too big
for any message on its own is dropped from the spool and counted.

Why ~430 lines in one module: the connection's life (handshake, ship, read, reconnect) and its
every refusal (of configs, weights, versions) are one state machine, best read in one place;
the messages themselves are `link/protocol.py`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from ray.rllib.env.external.rllink import RLlink

from croupier.config import ServerConfig
from croupier.link import auth, protocol, wire
from croupier.link.compat import rllib_episode_state
from croupier.link.secret import TOKEN_ENV, TokenSource
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import MODULE_CLASSES, ModelSpec
from croupier.trajectories.spool import EpisodeSpool

log = logging.getLogger(__name__)

MAX_EPISODES_PER_MESSAGE = 2000
# The whole handshake (through the first weights) must finish in this long.
HANDSHAKE_TIMEOUT_S = 30.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.2, 5.0
# Frame limits a trainer may announce: below, not even one small episode fits; above, the
# 8-digit RLlink header cannot say the length.
MIN_FRAME_BYTES, MAX_FRAME_BYTES = 16 * 1024, 10**wire.HEADER_BYTES - 1
# Room left in a message for its map, the list header and per-episode msgpack framing.
_MESSAGE_SLACK_BYTES = 1024
INSTALL_LOG_EVERY_S = 10.0


def largest_episode_bytes(max_frame: int = wire.DEFAULT_MAX_FRAME) -> int:
    """The most bytes one encoded episode may have and still go out in a message of a frame
    of `max_frame` bytes (its tag and the message's framing take the rest): the spool refuses
    a bigger one rather than hold it for nothing."""
    return max_frame - auth.TAG_BYTES - _MESSAGE_SLACK_BYTES


class LinkRefused(ConnectionError):
    """The trainer answered, but with something this server cannot work with."""


class _ReaderEnded(ConnectionError):
    """The session's reader stopped (its error is already counted)."""


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"trainer address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


def check_link_config(config: ServerConfig) -> str | None:
    """Refuse, before anything connects, a link set up to trust a peer it cannot check, and
    return its token (read from where `--link-token-file` / `CROUPIER_LINK_TOKEN` keep it,
    checked: an empty or short token is refused, `secret.WeakToken`). `--rllib-compat`
    unpickles the trainer's config (code execution for whoever answers), so it is for a
    trainer on this machine, run by this server's own user, unless explicitly allowed; and
    RLlib's stock runner cannot authenticate, so it cannot go with a link token."""
    assert config.trainer
    host, _ = parse_address(config.trainer)
    source = TokenSource.find(config.link_token_file)
    token = source.read()
    if config.rllib_compat:
        if token is not None:
            raise ValueError(
                "--rllib-compat cannot authenticate (RLlib's stock runner knows no link token): "
                f"drop --link-token-file / {TOKEN_ENV} for it"
            )
        if not auth.is_loopback(host) and not config.rllib_compat_allow_remote:
            raise ValueError(
                f"--rllib-compat unpickles what the trainer at {host} sends: anyone who can "
                "answer on that address could run code here. Use it with a trainer on this "
                "machine, or pass --rllib-compat-allow-remote on a network you trust"
            )
    elif token is None and not auth.is_loopback(host):
        log.warning(
            "the trainer link to %s has no link token: whoever answers there gets this "
            "server's episodes and can push the weights it serves", host,
        )  # fmt: skip
    return token


class TrainerLink:
    def __init__(self, config: ServerConfig, versions: PolicyVersions, outbox: EpisodeSpool):
        assert config.trainer
        # Read here, in the process that opens the link; kept off the config.
        self._token = check_link_config(config)
        self.address = parse_address(config.trainer)
        self.config = config
        self.versions = versions
        self.outbox = outbox
        self.connected = False
        # Whether the connection now up proved the token both ways (what its channel says).
        self.authenticated = False
        self.connects = 0
        self.versions_installed = 0
        self.versions_refused = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self._error_lock = threading.Lock()
        # The error last written to the log since the link was last up: a repeat stays quiet,
        # and once one was written, the link coming up is written too (at the same level), so
        # a log at the default level does not end on "Connection refused" while a trainer that
        # was still distilling its clone is long connected.
        self._logged_error: str | None = None
        self._up_since = 0.0
        # The most bytes one EPISODES frame body may have: below the trainer's announced limit.
        self.max_message_bytes = wire.DEFAULT_MAX_FRAME
        # Whether the trainer acknowledges episodes (croupier's own does; RLlib's stock runner
        # does not, and then a completed send counts as delivery).
        self.trainer_acks = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="trainer-link")
        self._sock: socket.socket | None = None
        self._install_logged_at = -INSTALL_LOG_EVERY_S
        self._installs_unlogged = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        sock = self._sock
        if sock is not None:
            _close(sock)
        self._thread.join(timeout)

    def stats(self) -> dict[str, Any]:
        return {
            "trainer": self.config.trainer,
            "thread_alive": self._thread.is_alive(),
            "connected": self.connected,
            "authenticated": self.connected and self.authenticated,
            "connects": self.connects,
            "versions_installed": self.versions_installed,
            "versions_refused": self.versions_refused,
            "errors": self.errors,
            "trainer_acks": self.trainer_acks,
            "max_message_bytes": self.max_message_bytes,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }

    def _error(self, what: str) -> None:
        with self._error_lock:  # the link thread and its reader both report
            if self._logged_error != what:
                log.warning("trainer link %s:%d: %s", *self.address, what)
                self._logged_error = what
            self.errors += 1
            self.last_error = what
            self.last_error_at = time.time()

    # --- connection lifecycle ------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(self.address, timeout=HANDSHAKE_TIMEOUT_S)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sock = sock
                self._session(sock)
            except Exception as e:  # whatever a peer sends (or a bug): never end the thread
                if not self._stop.is_set() and not isinstance(e, _ReaderEnded):
                    if not isinstance(e, OSError | wire.FrameError | LinkRefused | auth.AuthError):
                        log.exception("trainer link: unexpected error")
                    self._error(_describe(e))
            finally:
                if self.connected and time.monotonic() - self._up_since > BACKOFF_MAX_S:
                    backoff = BACKOFF_MIN_S  # a session that lasted: retry quickly (a flapping
                    # trainer that drops every session at once keeps its backoff growing)
                self.connected = self.authenticated = False
                if self._sock is not None:
                    _close(self._sock)
                    self._sock = None
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _session(self, sock: socket.socket) -> None:
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        channel = auth.client_handshake(sock, self._token, deadline)
        channel.send(protocol.get_config())
        try:
            config = protocol.read_set_config(self._expect(channel, RLlink.SET_CONFIG, deadline))
        except protocol.ProtocolError as e:
            raise LinkRefused(str(e)) from None
        self._apply_config(config)
        channel.send(protocol.get_state())
        # Never an older version than this server holds (a trainer restarted from an older
        # checkpoint, or a new run): rolling back is the production channel's job.
        self._install_pushed(self._expect(channel, RLlink.SET_STATE, deadline), first=True)
        sock.settimeout(None)
        # A new connection: whatever the last one sent but got no ack for is due again.
        self.outbox.rewind()
        self.authenticated = channel.authenticated
        self.connected = True
        self._up_since = time.monotonic()
        self.connects += 1
        with self._error_lock:
            level = logging.INFO if self._logged_error is None else logging.WARNING
            self._logged_error = None
        log.log(level, "trainer link up: %s:%d, version %d", *self.address, self.versions.latest)

        reader_done = threading.Event()
        reader = threading.Thread(
            target=self._read_loop, args=(channel, reader_done), daemon=True,
            name="trainer-link-r",
        )  # fmt: skip
        reader.start()
        self._ship_loop(channel, reader_done)

    def _expect(self, channel: auth.Channel, kind: RLlink, deadline: float) -> dict[str, Any]:
        got, body = channel.recv(deadline=deadline)
        if got is not kind:
            raise LinkRefused(f"expected {kind.name}, trainer sent {got.name}")
        return body

    def _read_loop(self, channel: auth.Channel, done: threading.Event) -> None:
        try:
            while not self._stop.is_set():
                kind, body = channel.recv()
                if kind is RLlink.SET_STATE:
                    self._install_pushed(body)
                elif kind is wire.LinkExt.ACK:
                    with contextlib.suppress(protocol.ProtocolError):  # as before: ignored
                        self.outbox.ack(protocol.read_ack(body))
        except Exception as e:  # the ship loop sees `done` and ends the session
            if not self._stop.is_set():
                if not isinstance(e, OSError | wire.FrameError):
                    log.exception("trainer link reader: unexpected error")
                self._error(f"reader: {_describe(e)}")
        finally:
            done.set()

    def _install_pushed(self, body: dict[str, Any], first: bool = False) -> None:
        """Install a pushed version; one this server refuses (weights that do not fit its
        model, non-finite values, a bad version number) is counted and the link goes on with
        the version it serves: the trainer will push again, and episodes still flow."""
        try:
            self._install(body, first=first)
        except Exception as e:
            self.versions_refused += 1
            self._error(f"weights refused: {_describe(e)}")

    def _ship_loop(self, channel: auth.Channel, reader_done: threading.Event) -> None:
        last_ship = time.monotonic()
        backlog = False  # the last message was full: send the next at once
        while not self._stop.is_set() and not reader_done.is_set():
            due = backlog or time.monotonic() - last_ship >= self.config.ship_max_seconds
            if self.outbox.pending_steps >= self.config.ship_max_steps or (
                due and self.outbox.pending_episodes
            ):
                backlog = self._ship(channel)
                last_ship = time.monotonic()
            else:
                reader_done.wait(0.02)
        if reader_done.is_set():
            raise _ReaderEnded(self.last_error or "trainer closed the link")

    def _ship(self, channel: auth.Channel) -> bool:
        """Send the oldest unsent episodes, in messages no bigger than the trainer takes.
        True if a cap left some of them for the next message."""
        limit = self.max_message_bytes - channel.overhead()
        waiting = self.outbox.pending_episodes
        episodes = self.outbox.take(
            MAX_EPISODES_PER_MESSAGE, max_bytes=limit - _MESSAGE_SLACK_BYTES
        )
        try:
            for batch in self._bodies(episodes, limit):
                channel.send_body(batch[1])
                if self.config.rllib_compat:
                    # RLlib's stock runner never pushes: ask for the newest weights each time.
                    channel.send(protocol.get_state())
                self.outbox.mark_shipped(len(batch[0]))
                if not self.trainer_acks:
                    self.outbox.ack([e["id"] for e in batch[0]])
        except OSError:
            self.outbox.requeue(episodes)
            raise
        return len(episodes) < waiting

    def _bodies(
        self, episodes: list[dict[str, Any]], limit: int
    ) -> Iterator[tuple[list[dict[str, Any]], bytes]]:
        """(episodes, EPISODES body) pairs, each body at most `limit` bytes: the spool's size
        estimate is checked against the real encoding, and a message over the limit is split
        in halves; an episode over it on its own is dropped from the spool and counted."""
        if not episodes:
            return
        try:
            # RLlib's stock runner (compat mode) reads RLlib's episode state, not our record.
            payload = (
                [rllib_episode_state(e) for e in episodes] if self.config.rllib_compat else episodes
            )
            body = wire.pack_body(protocol.episodes(payload))
        except ValueError:  # past what any frame can carry
            body = None
        if body is not None and len(body) <= limit:
            yield episodes, body
            return
        if len(episodes) == 1:
            size = "too large to encode" if body is None else f"{len(body)} bytes"
            self.outbox.drop_too_big([episodes[0]["id"]])
            self._error(f"episode {episodes[0]['id']} dropped: {size}, over the {limit}-byte "
                        "message limit")  # fmt: skip
            return
        half = len(episodes) // 2
        yield from self._bodies(episodes[:half], limit)
        yield from self._bodies(episodes[half:], limit)

    # --- what the trainer sends ----------------------------------------------------------

    def _apply_config(self, config: Any) -> None:
        self.trainer_acks = False
        self.max_message_bytes = wire.DEFAULT_MAX_FRAME
        if self.config.rllib_compat:
            # RLlib's stock runner sends its AlgorithmConfig pickled. Unpickling runs code from
            # the peer, so this happens only in the explicit compat mode, for a trainer you run.
            if not isinstance(config, bytes):
                raise LinkRefused("compat mode expects RLlib's pickled config")
            if not self.config.rllib_compat_allow_remote:
                self._check_same_user()
            algo_config = pickle.loads(config)  # noqa: S301 - explicit, documented opt-in
            obs_space = getattr(algo_config, "observation_space", None)
            if obs_space is not None and obs_space != self.versions.adapter.observation_space:
                raise LinkRefused(f"trainer observation space {obs_space} does not match")
            self._adopt(compat_model_spec(algo_config))
            return
        try:
            plain = protocol.LinkConfig.from_dict(config)
        except protocol.ProtocolError as e:
            raise LinkRefused(f"trainer sent {e}") from None
        self.trainer_acks = plain.acks
        announced = plain.max_frame_bytes
        if not MIN_FRAME_BYTES <= announced <= MAX_FRAME_BYTES:
            raise LinkRefused(f"trainer announced a frame limit of {announced!r} bytes")
        self.max_message_bytes = announced
        adapter = self.versions.adapter
        if (plain.obs_size, plain.num_actions) != (adapter.obs_size, adapter.num_actions):
            raise LinkRefused(
                f"trainer expects obs {plain.obs_size} / actions {plain.num_actions}, this "
                f"server has {adapter.obs_size} / {adapter.num_actions}"
            )
        try:  # sized for this game: an absurd model is refused before anything is built
            spec = ModelSpec.from_dict(
                plain.model, adapter.obs_size, adapter.num_actions,
                getattr(adapter, "candidate_size", 0) if self.versions.candidates else 0,
            )  # fmt: skip
        except (TypeError, ValueError) as e:
            raise LinkRefused(f"trainer sent a bad model spec: {e}") from None
        if spec.algo not in MODULE_CLASSES:  # never import a class named by the network
            raise LinkRefused(f"unknown module algorithm {spec.algo!r}")
        self._adopt(spec)

    def _check_same_user(self) -> None:
        """Unpickle only what a process of this server's own user sent: on loopback, anyone
        on the machine could have bound the trainer's port while the trainer was down, and a
        pickle from another user would run code as this one. A process of the same user can
        already do anything this one can, so its pickle adds nothing. Checked per
        connection, just before unpickling; where the owner cannot be found, refused."""
        sock = self._sock
        owner = auth.loopback_peer_uid(sock) if sock is not None else None
        if owner is None:
            raise LinkRefused(
                "--rllib-compat: cannot tell which user runs the trainer this server reached, "
                "so its pickle is not read (pass --rllib-compat-allow-remote to trust it anyway)"
            )
        if owner != os.getuid():
            raise LinkRefused(
                f"--rllib-compat: the process answering at --trainer belongs to uid {owner}, not "
                f"this server's uid {os.getuid()}: its pickle is not read (another user may have "
                "taken the trainer's port)"
            )

    def _adopt(self, spec: ModelSpec) -> None:
        if spec != self.versions.spec:
            log.info("adopting the trainer's model %s", spec.to_dict())
            try:  # builds the new module before storing anything: a bad spec changes nothing
                self.versions.reset_spec(spec)
            except Exception as e:
                raise LinkRefused(f"cannot build the trainer's model {spec.to_dict()}: {e}") from e
        self.versions.spec_known = True  # the same model as the placeholder's, now confirmed

    def _install(self, body: dict[str, Any], first: bool = False) -> None:
        try:
            weights, seq = protocol.read_set_state(body)
        except protocol.ProtocolError as e:
            raise LinkRefused(str(e)) from None
        version = _version(seq)
        held = self.versions.latest
        # Version 0 is nobody's training yet: the server's own placeholder gives way to the
        # trainer's, so that episodes are recorded with the weights the learner starts from.
        replace_placeholder = first and version == held == 0
        refused = self.versions.refused_nonfinite
        try:
            installed = self.versions.install(version, weights, force=replace_placeholder)
        except (RuntimeError, ValueError, TypeError) as e:
            raise LinkRefused(f"weights do not fit this server's model: {e}") from None
        if self.versions.refused_nonfinite > refused:  # NaN/inf: counted in both places
            raise LinkRefused(f"weights refused: {self.versions.last_refused}")
        if installed:
            self.versions_installed += 1
            self._log_installed(version)
        elif first and version < held:
            log.warning(
                "the trainer is at version %d, this server holds %d: keeping %d (start the "
                "server on a fresh --weights-dir for a new training run)",
                version, held, held,
            )  # fmt: skip

    def _log_installed(self, version: int) -> None:
        """One info line per install, but at most one per INSTALL_LOG_EVERY_S (APPO pushes
        several versions a second), then a count of the ones not shown."""
        now = time.monotonic()
        self._installs_unlogged += 1
        if now - self._install_logged_at >= INSTALL_LOG_EVERY_S:
            more = self._installs_unlogged - 1
            log.info("installed weights version %d%s", version,
                     f" ({more} more since the last line)" if more else "")  # fmt: skip
            self._install_logged_at, self._installs_unlogged = now, 0


def _version(value: Any) -> int:
    """A weights_seq_no as the trainer may send it (an int, or numpy's), checked."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise LinkRefused(f"bad weights_seq_no {value!r}")
    if not 0 <= int(value) < 2**62:
        raise LinkRefused(f"weights_seq_no {int(value)} out of range")
    return int(value)


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if isinstance(e, OSError | ConnectionError) else f"{type(e).__name__}: {text}"


def compat_model_spec(algo_config: Any) -> ModelSpec:
    """The model of RLlib's stock trainer, read from its AlgorithmConfig (compat mode)."""
    module_spec = algo_config.rl_module_spec
    algo = next(
        (name for name, cls in MODULE_CLASSES.items() if module_spec.module_class is cls), None
    )
    if algo is None:
        raise LinkRefused(
            f"the trainer trains {module_spec.module_class}, not one of croupier's masked modules"
        )
    model = module_spec.model_config or {}
    if not isinstance(model, dict):
        model = {
            k: getattr(model, k) for k in ("fcnet_hiddens", "fcnet_activation", "vf_share_layers")
        }
    defaults = ModelSpec()
    return ModelSpec(
        algo=algo,
        hiddens=list(model.get("fcnet_hiddens", defaults.hiddens)),
        activation=str(model.get("fcnet_activation", defaults.activation)),
        vf_share_layers=bool(model.get("vf_share_layers", defaults.vf_share_layers)),
    )


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
