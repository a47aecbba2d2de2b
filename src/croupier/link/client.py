"""The policy server's side of the trainer link.

A background thread keeps one TCP connection to the trainer: it handshakes (PING with the shared
token, GET_CONFIG, GET_STATE), then ships finished episodes in batches (by steps or by seconds,
whichever comes first) while a reader thread installs every weights version the trainer pushes.
When the trainer is not up or goes away, it reconnects with exponential backoff; episodes wait
in the spool meanwhile (on disk), and each episode leaves the spool only when the trainer
acknowledges its id; after a reconnect every unacknowledged episode is sent again (the trainer
drops ids it has seen). Games never wait on any of this.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import socket
import threading
import time
from typing import Any

from ray.rllib.env.external.rllink import RLlink

from croupier.config import ServerConfig
from croupier.link import wire
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import MODULE_CLASSES, ModelSpec
from croupier.trajectories.spool import EpisodeSpool

log = logging.getLogger(__name__)

MAX_EPISODES_PER_MESSAGE = 2000
HANDSHAKE_TIMEOUT_S = 30.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.2, 5.0
INSTALL_LOG_EVERY_S = 10.0


class LinkRefused(ConnectionError):
    """The trainer answered, but with something this server cannot work with."""


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"trainer address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


class TrainerLink:
    def __init__(self, config: ServerConfig, versions: PolicyVersions, outbox: EpisodeSpool):
        assert config.trainer
        self.address = parse_address(config.trainer)
        self.config = config
        self.versions = versions
        self.outbox = outbox
        self.connected = False
        self.connects = 0
        self.versions_installed = 0
        self.last_error: str | None = None
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
            "connected": self.connected,
            "connects": self.connects,
            "versions_installed": self.versions_installed,
            "trainer_acks": self.trainer_acks,
            "last_error": self.last_error,
        }

    # --- connection lifecycle ------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(self.address, timeout=HANDSHAKE_TIMEOUT_S)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sock = sock
                self._session(sock)
                backoff = BACKOFF_MIN_S
            except (OSError, ConnectionError) as e:
                if self.last_error != str(e):
                    log.warning("trainer link %s:%d: %s", *self.address, e)
                self.last_error = str(e)
            finally:
                self.connected = False
                if self._sock is not None:
                    _close(self._sock)
                    self._sock = None
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _session(self, sock: socket.socket) -> None:
        ping: dict[str, Any] = {"type": RLlink.PING.name}
        if self.config.link_token:
            ping["token"] = self.config.link_token
        wire.send(sock, ping)
        self._expect(sock, RLlink.PONG)
        wire.send(sock, {"type": RLlink.GET_CONFIG.name})
        self._apply_config(self._expect(sock, RLlink.SET_CONFIG)["config"])
        wire.send(sock, {"type": RLlink.GET_STATE.name})
        # Never an older version than this server holds (a trainer restarted from an older
        # checkpoint, or a new run): rolling back is the production channel's job.
        self._install(self._expect(sock, RLlink.SET_STATE), first=True)
        sock.settimeout(None)
        # A new connection: whatever the last one sent but got no ack for is due again.
        self.outbox.rewind()
        self.connected = True
        self.connects += 1
        self.last_error = None
        log.info("trainer link up: %s:%d, version %d", *self.address, self.versions.latest)

        reader_done = threading.Event()
        reader = threading.Thread(
            target=self._read_loop, args=(sock, reader_done), daemon=True, name="trainer-link-r"
        )
        reader.start()
        self._ship_loop(sock, reader_done)

    def _expect(self, sock: socket.socket, kind: RLlink) -> dict[str, Any]:
        got, body = wire.recv(sock)
        if got is not kind:
            raise LinkRefused(f"expected {kind.name}, trainer sent {got.name}")
        return body

    def _read_loop(self, sock: socket.socket, done: threading.Event) -> None:
        try:
            while not self._stop.is_set():
                kind, body = wire.recv(sock)
                if kind is RLlink.SET_STATE:
                    self._install(body)
                elif kind is wire.LinkExt.ACK:
                    ids = body.get("ids")
                    if isinstance(ids, list):
                        self.outbox.ack([i for i in ids if isinstance(i, str)])
        except (OSError, ConnectionError) as e:
            self.last_error = f"reader: {e}"
        finally:
            done.set()

    def _ship_loop(self, sock: socket.socket, reader_done: threading.Event) -> None:
        last_ship = time.monotonic()
        while not self._stop.is_set() and not reader_done.is_set():
            due = time.monotonic() - last_ship >= self.config.ship_max_seconds
            if self.outbox.pending_steps >= self.config.ship_max_steps or (
                due and self.outbox.pending_episodes
            ):
                self._ship(sock)
                last_ship = time.monotonic()
            else:
                reader_done.wait(0.02)
        if reader_done.is_set():
            raise ConnectionError(self.last_error or "trainer closed the link")

    def _ship(self, sock: socket.socket) -> None:
        episodes = self.outbox.take(MAX_EPISODES_PER_MESSAGE)
        try:
            wire.send(sock, {"type": RLlink.EPISODES.name, "episodes": episodes})
            if self.config.rllib_compat:
                # RLlib's stock runner never pushes: ask for the newest weights each time.
                wire.send(sock, {"type": RLlink.GET_STATE.name})
        except OSError:
            self.outbox.requeue(episodes)
            raise
        self.outbox.mark_shipped(len(episodes))
        if not self.trainer_acks:
            self.outbox.ack([e["id_"] for e in episodes])

    # --- what the trainer sends ----------------------------------------------------------

    def _apply_config(self, config: Any) -> None:
        self.trainer_acks = False
        if self.config.rllib_compat:
            # RLlib's stock runner sends its AlgorithmConfig pickled. Unpickling runs code from
            # the peer, so this happens only in the explicit compat mode, for a trainer you run.
            if not isinstance(config, bytes):
                raise LinkRefused("compat mode expects RLlib's pickled config")
            algo_config = pickle.loads(config)  # noqa: S301 - explicit, documented opt-in
            obs_space = getattr(algo_config, "observation_space", None)
            if obs_space is not None and obs_space != self.versions.adapter.observation_space:
                raise LinkRefused(f"trainer observation space {obs_space} does not match")
            self._adopt(compat_model_spec(algo_config))
            return
        if not isinstance(config, dict) or config.get("format") != "croupier/1":
            raise LinkRefused(
                "trainer sent no croupier/1 config (RLlib's stock runner? use --rllib-compat)"
            )
        self.trainer_acks = config.get("acks") is True
        adapter = self.versions.adapter
        if (config.get("obs_size"), config.get("num_actions")) != (
            adapter.obs_size,
            adapter.num_actions,
        ):
            raise LinkRefused(
                f"trainer expects obs {config.get('obs_size')} / actions "
                f"{config.get('num_actions')}, this server has {adapter.obs_size} / "
                f"{adapter.num_actions}"
            )
        spec = ModelSpec.from_dict(config.get("model") or {})
        if spec.algo not in MODULE_CLASSES:  # never import a class named by the network
            raise LinkRefused(f"unknown module algorithm {spec.algo!r}")
        self._adopt(spec)

    def _adopt(self, spec: ModelSpec) -> None:
        if spec != self.versions.spec:
            log.info("adopting the trainer's model %s", spec.to_dict())
            self.versions.reset_spec(spec)

    def _install(self, body: dict[str, Any], first: bool = False) -> None:
        state = body.get("state")
        if not isinstance(state, dict):
            raise LinkRefused("SET_STATE without a state")
        weights = state.get("rl_module")
        if isinstance(weights, dict) and "default_policy" in weights:
            weights = weights["default_policy"]
        if not isinstance(weights, dict):
            raise LinkRefused("SET_STATE without module weights")
        version = int(state.get("weights_seq_no", 0))
        held = self.versions.latest
        try:
            installed = self.versions.install(version, weights)
        except (RuntimeError, ValueError, TypeError) as e:
            raise LinkRefused(f"weights do not fit this server's model: {e}") from None
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
