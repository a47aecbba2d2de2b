"""The trainer link under attack and under faults, on loopback sockets (issue 14, link side).

A policy server's `TrainerLink` (its thread, spool and weights versions, without the HTTP
server) talks to a `LinkEnvRunner` built in this process (no Ray session), or to fake trainers
written with `croupier.link.wire`: a trainer that answers garbage or bad configs and weights, a
backlog bigger than the trainer's frame limit, an impersonator without the token. Throughout:
the link thread lives, each error is counted and shown, and the spool loses nothing.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from croupier.config import ServerConfig
from croupier.link import auth, client, wire
from croupier.link.client import TrainerLink
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.trajectories.spool import EpisodeSpool
from tests.conftest import run_inprocess, wait_for
from tests.helpers.link import closed_by_peer, token_file
from tests.helpers.trainer import GAME, complete_update, synthetic_episode

TOKEN = "hardening-yQbDWuA2g18JeHJp29crl7K6nb39K8ME"  # random: a made-up one is refused
SPEC = ModelSpec(algo="ppo", hiddens=[16])


# --- helpers ----------------------------------------------------------------------------------


def build_runner(**options: Any) -> Any:
    from croupier.games.registry import load_adapter
    from croupier.trainer.algo import Hyper, build_config
    from croupier.trainer.env_runner import LinkEnvRunner, LinkOptions

    hyper = Hyper(train_batch_size=8, minibatch_size=8, num_epochs=1, lr=1e-3)
    token = options.pop("token", None)
    if token is not None:
        options["token_file"] = token_file(token)
    link_options = LinkOptions(host="127.0.0.1", port=0, **options)
    return LinkEnvRunner(config=build_config(load_adapter(GAME), link_options, SPEC, hyper))


def make_link(port: int, spool: EpisodeSpool, **config: Any) -> TrainerLink:
    from croupier.games.registry import load_adapter

    settings = {"ship_max_steps": 64, "ship_max_seconds": 0.05, **config}
    token = settings.pop("link_token", None)
    if token is not None:
        settings["link_token_file"] = token_file(token)
    cfg = ServerConfig(game=GAME, trainer=f"127.0.0.1:{port}", **settings)
    return TrainerLink(cfg, PolicyVersions(load_adapter(GAME), SPEC), spool)


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    """Things with a `stop()` or `close()`, ended after the test (newest first)."""
    made: list[Any] = []
    yield made
    for thing in reversed(made):
        (getattr(thing, "stop", None) or thing.close)()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "BACKOFF_MAX_S", 0.3)


def spooled(n: int, steps: int = 6, seed: int = 0) -> tuple[EpisodeSpool, list[str]]:
    spool = EpisodeSpool(None)
    episodes = [synthetic_episode(0, n=steps, seed=seed + i) for i in range(n)]
    spool.put_many(episodes)
    return spool, [e["id"] for e in episodes]


class FakeTrainer:
    """A trainer port on loopback run by the test: connection i is handed to `scripts[i]`;
    past the scripts, connections are forwarded to `then_port` (a real runner), if any.
    Every byte a peer sends is kept in `received`."""

    def __init__(
        self, scripts: list[Callable[[socket.socket], None]], then_port: int = 0, port: int = 0
    ):
        self.scripts = list(scripts)
        self.then_port = then_port
        self.received = bytearray()
        self.failures: list[str] = []  # assertion errors inside scripts
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def handshake(self, sock: socket.socket, token: str) -> auth.Channel:
        """A trainer's side of the handshake, holding `token` (a broken trainer, not an
        impostor); what it reads is not kept in `received`."""
        return auth.trainer_handshake(sock, token, time.monotonic() + 10, 4096)

    def recv(self, sock: socket.socket) -> tuple[Any, dict[str, Any]]:
        """One frame from the server (kept in `received`)."""
        sock.settimeout(10)
        header = _recv_exact(sock, wire.HEADER_BYTES)
        body = _recv_exact(sock, wire.parse_header(header))
        self.received += header + body
        return wire.unpack_body(body)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        if self.scripts:
            script = self.scripts.pop(0)
            try:
                script(sock)
            except AssertionError as e:
                self.failures.append(f"{script.__name__}: {e}")
            except OSError:
                pass
            finally:
                _shut(sock)
        elif self.then_port:
            upstream = socket.create_connection(("127.0.0.1", self.then_port), timeout=10)
            self._socks.append(upstream)
            for a, b in ((sock, upstream), (upstream, sock)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()
        else:
            _shut(sock)

    def close(self) -> None:
        self.listener.close()
        for sock in self._socks:
            _shut(sock)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        _shut(src)
        _shut(dst)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def state_message(weights: dict[str, Any], seq: Any) -> dict[str, Any]:
    return {"type": "SET_STATE", "state": {"rl_module": weights, "weights_seq_no": seq}}


# --- 2. a backlog over the trainer's frame limit ----------------------------------------------


def test_a_backlog_over_the_trainers_frame_limit_goes_out_in_pieces_and_is_all_acked(cleanup):
    """The review's 70 MiB backlog against a 64 MiB limit, scaled down: a 32 KiB limit the
    trainer announces, over 10 times that spooled, and one episode too big for any message. Before,
    everything went out in one frame the trainer refused, forever."""
    limit = 32 * 1024
    runner = build_runner(max_frame_bytes=limit)
    cleanup.append(runner)
    spool, ids = spooled(120, steps=8)
    too_big = synthetic_episode(0, n=300, seed=999)
    spool.put(too_big)
    later = [synthetic_episode(0, n=8, seed=500 + i) for i in range(10)]
    spool.put_many(later)
    ids += [e["id"] for e in later]
    assert spool.stats()["spooled_bytes"] > 10 * limit
    assert len(wire.encode_value(too_big)) > limit
    link = make_link(runner.port, spool)
    cleanup.append(link)
    link.start()

    wait_for(lambda: runner.link_stats()["episodes_received"] == len(ids), 30, 0.1,
             "the backlog to arrive")  # fmt: skip
    assert sorted(complete_update(runner)) == sorted(ids)  # every one, exactly once
    wait_for(lambda: spool.stats()["spooled"] == 0, 30, 0.1, "the backlog to be acked")
    stats, trainer = spool.stats(), runner.link_stats()
    assert stats["too_big"] == 1 and stats["dropped"] == 0 and stats["corrupt"] == 0
    assert stats["acked"] == len(ids) == 130
    assert trainer["frames_rejected"] == 0 and trainer["episodes_received"] == len(ids)
    assert link.connects == 1 and link.max_message_bytes == limit
    assert link.stats()["thread_alive"] and "over the" not in str(link.last_error)


def test_messages_are_split_by_their_real_encoded_size(cleanup):
    """The spool's size estimate is checked against the real encoding: a batch over the
    limit is split, and an episode too big (or too big for any RLlink frame) is dropped."""
    spool, ids = spooled(12, steps=8)
    link = make_link(1, spool)
    episodes = spool.take()
    one = len(wire.pack_body({"type": "EPISODES", "episodes": episodes[:1]}))
    bodies = list(link._bodies(episodes, 3 * one))
    assert [e["id"] for batch, _ in bodies for e in batch] == ids  # all, in order
    assert len(bodies) >= 4 and all(len(body) <= 3 * one for _, body in bodies)
    assert all(wire.unpack_body(body)[1]["episodes"][0]["id"] == batch[0]["id"]
               for batch, body in bodies)  # fmt: skip

    assert list(link._bodies(episodes[:1], one - 1)) == []  # too big alone: dropped, counted
    assert spool.stats()["too_big"] == 1 and spool.stats()["spooled"] == 11
    assert link.errors == 1 and "dropped" in str(link.last_error)


# --- 3. whatever the trainer sends, the link thread lives --------------------------------------


def test_a_trainer_answering_garbage_bad_configs_and_bad_weights_never_kills_the_link(cleanup):
    runner = build_runner()
    cleanup.append(runner)
    spool, ids = spooled(30)
    errors_seen: list[str | None] = []
    link: TrainerLink

    def good_config(**changes: Any) -> dict[str, Any]:
        return {**runner.plain_config(), **changes}

    def handshake(fake_sock: socket.socket, config: Any) -> None:
        errors_seen.append(link.last_error)
        assert fake.recv(fake_sock)[0].name == "PING"
        wire.send(fake_sock, {"type": "PONG"})
        assert fake.recv(fake_sock)[0].name == "GET_CONFIG"
        wire.send(fake_sock, {"type": "SET_CONFIG", **config})

    def garbage(sock: socket.socket) -> None:
        errors_seen.append(link.last_error)
        fake.recv(sock)
        sock.sendall(b"garbage!" + os.urandom(64))

    def no_config(sock: socket.socket) -> None:
        handshake(sock, {})

    def unknown_activation(sock: socket.socket) -> None:
        model = {**SPEC.to_dict(), "activation": "no-such-activation"}
        handshake(sock, {"config": good_config(model=model)})

    def bad_frame_limit(sock: socket.socket) -> None:
        handshake(sock, {"config": good_config(max_frame_bytes="lots")})

    weights = runner.module.get_state()
    wrong_shape = {k: np.zeros((3, 3), np.float32) for k in weights}
    not_finite = {k: np.full_like(v, np.nan) for k, v in weights.items()}

    def bad_weights(sock: socket.socket) -> None:
        handshake(sock, {"config": good_config()})
        assert fake.recv(sock)[0].name == "GET_STATE"
        wire.send(sock, state_message(weights, "x"))  # a bad weights_seq_no
        # Refused, counted, and the link goes on: episodes flow, later pushes are read.
        assert fake.recv(sock)[0].name == "EPISODES"
        for seq, pushed in ((2**63, weights), (-1, weights), (6, wrong_shape), (7, not_finite)):
            wire.send(sock, state_message(pushed, seq))
        wire.send(sock, state_message(weights, 8))
        wait_for(lambda: link.versions.latest == 8, 10, 0.05, "version 8 after the bad ones")
        assert link.connects == 1, "a refused push must not cost the connection"

    fake = FakeTrainer(
        [garbage, no_config, unknown_activation, bad_frame_limit, bad_weights], runner.port
    )
    cleanup.append(fake)
    link = make_link(fake.port, spool)
    cleanup.append(link)
    link.start()

    # Past the scripts the fake forwards to the real runner: the link recovers, nothing lost.
    wait_for(lambda: runner.link_stats()["episodes_received"] == len(ids), 30, 0.1,
             "the spool to arrive")  # fmt: skip
    assert sorted(complete_update(runner)) == sorted(ids)
    wait_for(lambda: spool.stats()["spooled"] == 0, 30, 0.1, "the spool to be acked")
    assert fake.failures == []
    stats = link.stats()
    assert stats["thread_alive"] and stats["connected"] and stats["connects"] == 2
    # Each fault was seen, in order (what the next connection found in last_error).
    assert errors_seen[0] is None
    assert "bad frame header" in errors_seen[1]
    assert "SET_CONFIG without a config" in errors_seen[2]
    assert "cannot build the trainer's model" in errors_seen[3]
    assert "frame limit" in errors_seen[4]
    assert link.versions.spec == SPEC  # the bad spec was never stored
    # "x", 2**63 and -1 refused, the wrong shapes too (and NaN where install refuses it).
    assert stats["versions_refused"] >= 4 and stats["errors"] >= 8
    # The real trainer (version 1: one update) is behind what the fake pushed: the server keeps
    # its newer version rather than going back (rolling back is the production channel's job).
    assert runner.weights_seq_no == 1 and link.versions.latest == 8


# --- 4. authentication: an impersonator gets nothing and deletes nothing ------------------------


def test_an_impersonating_trainer_gets_no_token_and_its_forged_acks_delete_nothing(cleanup):
    spool, ids = spooled(20)
    errors_seen: list[str | None] = []

    def forge(sock: socket.socket, pong: dict[str, Any], proof: bytes | None = None) -> None:
        errors_seen.append(link.last_error)
        fake.recv(sock)
        wire.send(sock, pong)
        # Whatever the server sends next is kept (its proof, offered to the address it was
        # told to dial); then the forgeries.
        with contextlib.suppress(OSError):
            if proof is not None:
                fake.recv(sock)
                wire.send(sock, {"type": "PONG", "proof": proof})
            wire.send(sock, {"type": "ACK", "ids": ids})
            wire.send(sock, state_message({"w": np.zeros(2, np.float32)}, 99))
            sock.settimeout(1.0)
            while True:
                fake.recv(sock)

    nonce = os.urandom(auth.NONCE_BYTES)
    hello = {"type": "PONG", "auth": auth.PROTOCOL, "nonce": nonce}

    def plain_pong(sock: socket.socket) -> None:  # as an old or token-less trainer would
        forge(sock, {"type": "PONG"})

    def guessed_proof(sock: socket.socket) -> None:
        forge(sock, hello, proof=os.urandom(32))

    def replayed_proof(sock: socket.socket) -> None:
        # A proof a real trainer made for another server's nonce (seen on the wire once).
        forge(sock, hello, proof=auth.proof(TOKEN, "trainer", os.urandom(auth.NONCE_BYTES), nonce))

    def last(sock: socket.socket) -> None:
        errors_seen.append(link.last_error)

    fake = FakeTrainer([plain_pong, guessed_proof, replayed_proof, last])
    cleanup.append(fake)
    link = make_link(fake.port, spool, link_token=TOKEN)
    cleanup.append(link)
    link.start()
    wait_for(lambda: len(errors_seen) == 4, 20, 0.1, "three impersonations")
    assert link.stats()["thread_alive"]
    link.stop()

    assert TOKEN.encode() not in fake.received, "the server sent its token to an impersonator"
    assert spool.stats()["spooled"] == 20 and spool.stats()["acked"] == 0
    assert link.versions.latest == 0 and link.connects == 0
    assert "did not authenticate" in str(errors_seen[1])
    assert "proof is wrong" in str(errors_seen[2]) and "proof is wrong" in str(errors_seen[3])
    # Nothing but the handshake ever reached a fake: no episodes, no request.
    assert fake.received.count(b"EPISODES") == 0 and fake.received.count(b"GET_CONFIG") == 0

    # The real trainer with the token: the same spool is delivered, every frame tagged.
    runner = build_runner(token=TOKEN)
    cleanup.append(runner)
    real = make_link(runner.port, spool, link_token=TOKEN)
    cleanup.append(real)
    real.start()
    wait_for(lambda: runner.link_stats()["episodes_received"] == len(ids), 20, 0.1,
             "delivery to the real trainer")  # fmt: skip
    assert sorted(complete_update(runner)) == sorted(ids)
    wait_for(lambda: spool.stats()["spooled"] == 0, 20, 0.1, "the acks")
    # Version 0 on connecting, then version 1 from the update that trained the spool.
    assert real.stats()["authenticated"] and real.versions_installed == 2


def test_a_server_with_the_wrong_token_is_refused_and_the_trainer_never_trusts_it(cleanup):
    runner = build_runner(token=TOKEN)
    cleanup.append(runner)
    spool, _ = spooled(5)
    wrong = make_link(runner.port, spool, link_token="not-" + TOKEN)
    cleanup.append(wrong)
    wrong.start()
    wait_for(lambda: wrong.errors >= 2, 10, 0.05, "two refused attempts")
    wrong.stop()
    # The trainer checks the server's proof first, finds it wrong and closes, revealing none
    # of its own: the server says what that means.
    assert "refused this server's proof" in str(wrong.last_error), wrong.last_error
    assert wrong.connects == 0 and spool.stats()["spooled"] == 5
    assert runner.link_stats()["episodes_received"] == 0


def test_every_frame_is_tagged_forged_altered_replayed_or_reordered_frames_are_refused():
    def pair() -> tuple[auth.Channel, auth.Channel]:
        a, b = socket.socketpair()
        out: dict[str, Any] = {}
        deadline = time.monotonic() + 5
        t = threading.Thread(
            target=lambda: out.setdefault("t", auth.trainer_handshake(b, TOKEN, deadline, 4096))
        )
        t.start()
        server = auth.client_handshake(a, TOKEN, deadline)
        t.join(5)
        return server, out["t"]

    server, trainer = pair()
    trainer.send({"type": "ACK", "ids": ["a"]})
    assert server.recv() == (wire.LinkExt.ACK, {"ids": ["a"]})

    def raw_frames(channel: auth.Channel, messages: list[dict[str, Any]]) -> list[bytes]:
        return [b"".join(channel.frame(wire.pack_body(m))) for m in messages]

    # Altered: one flipped bit in the body.
    frame = bytearray(raw_frames(trainer, [{"type": "ACK", "ids": ["b"]}])[0])
    frame[12] ^= 1
    trainer.sock.sendall(bytes(frame))
    with pytest.raises(wire.FrameError, match="tag"):
        server.recv()

    server, trainer = pair()
    first, second = raw_frames(trainer, [{"type": "ACK", "ids": ["1"]}, {"type": "PONG"}])
    trainer.sock.sendall(second + first)  # reordered
    with pytest.raises(wire.FrameError):
        server.recv()

    server, trainer = pair()
    (frame,) = raw_frames(trainer, [{"type": "ACK", "ids": ["1"]}])
    trainer.sock.sendall(frame + frame)  # replayed
    assert server.recv()[1] == {"ids": ["1"]}
    with pytest.raises(wire.FrameError):
        server.recv()

    server, trainer = pair()
    trainer.sock.sendall(wire.pack({"type": "ACK", "ids": ["x"]}))  # forged: no tag at all
    with pytest.raises(wire.FrameError):
        server.recv()

    server, trainer = pair()
    (frame,) = raw_frames(server, [{"type": "ACK", "ids": ["1"]}])
    trainer.sock.sendall(frame)  # reflected: the server's own frame sent back to it
    with pytest.raises(wire.FrameError):
        server.recv()


def test_rllib_compat_is_refused_for_a_remote_trainer_unless_explicitly_allowed():
    from croupier.games.registry import load_adapter

    def link(**config: Any) -> TrainerLink:
        cfg = ServerConfig(game=GAME, **config)
        return TrainerLink(cfg, PolicyVersions(load_adapter(GAME), SPEC), EpisodeSpool(None))

    with pytest.raises(ValueError, match="unpickles"):
        link(trainer="192.0.2.7:5555", rllib_compat=True)  # never connected: refused at once
    with pytest.raises(ValueError, match="cannot authenticate"):
        link(trainer="127.0.0.1:5555", rllib_compat=True, link_token_file=token_file(TOKEN))
    link(trainer="192.0.2.7:5555", rllib_compat=True, rllib_compat_allow_remote=True)
    for local in ("127.0.0.1:5555", "localhost:5555", "[::1]:5555"):
        link(trainer=local, rllib_compat=True)
    assert auth.is_loopback("127.0.0.1") and auth.is_loopback("localhost")
    assert not auth.is_loopback("0.0.0.0") and not auth.is_loopback("")  # noqa: S104
    assert not auth.is_loopback("192.0.2.7")


# --- 6. the trainer port ----------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
def test_a_byte_at_a_time_peer_is_cut_at_the_total_handshake_deadline(cleanup, token):
    runner = build_runner(token=token, handshake_timeout_s=1.0)
    cleanup.append(runner)
    with socket.create_connection(("127.0.0.1", runner.port), timeout=5) as sock:
        t0 = time.monotonic()
        closed_at = None
        for byte in b"00004000" + b"x" * 40:  # one slow byte at a time, never a whole frame
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed_at = time.monotonic() - t0
                break
            sock.settimeout(0.3)
            try:
                if sock.recv(1) == b"":
                    closed_at = time.monotonic() - t0
                    break
            except TimeoutError:
                continue
            except OSError:
                closed_at = time.monotonic() - t0
                break
        assert closed_at is not None and closed_at < 2.0, closed_at
    assert runner.link_stats()["connections_refused"] == 1


def test_without_a_token_the_first_frame_is_still_a_small_ping(cleanup):
    runner = build_runner(handshake_timeout_s=1.0)
    cleanup.append(runner)
    good = synthetic_episode(0, seed=1)
    for data in (
        wire.pack({"type": "EPISODES", "episodes": [good]}),  # no PING first
        wire.pack({"type": "PING", "pad": "x" * 10_000}),  # too big before the handshake
        b"60000000",  # a 60 MB frame announced before any handshake
    ):
        with socket.create_connection(("127.0.0.1", runner.port), timeout=5) as sock:
            sock.sendall(data)
            assert closed_by_peer(sock, 3.0)
    stats = runner.link_stats()
    assert stats["connections_refused"] == 3 and stats["episodes_received"] == 0


def test_connections_are_capped(cleanup):
    runner = build_runner(max_connections=3, handshake_timeout_s=5.0)
    cleanup.append(runner)
    held = [socket.create_connection(("127.0.0.1", runner.port), timeout=5) for _ in range(3)]
    wait_for(lambda: runner.link_stats()["connected_servers"] == 3, 5, 0.05, "three held")
    with socket.create_connection(("127.0.0.1", runner.port), timeout=5) as extra:
        assert closed_by_peer(extra, 2.0)
    assert runner.link_stats()["connections_over_cap"] == 1
    for sock in held:
        sock.close()
    # Freed slots are usable again.
    wait_for(lambda: runner.link_stats()["connected_servers"] == 0, 10, 0.05, "slots freed")
    sock = socket.create_connection(("127.0.0.1", runner.port), timeout=5)
    channel = auth.client_handshake(sock, None, time.monotonic() + 5)
    channel.send({"type": "PING"})
    assert channel.recv()[0].name == "PONG"
    sock.close()


def test_a_server_that_does_not_read_is_dropped_not_buffered_for(cleanup):
    runner = build_runner(max_queued_bytes=64 * 1024)
    cleanup.append(runner)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", runner.port))
    auth.client_handshake(sock, None, time.monotonic() + 5)
    ask = wire.pack({"type": "GET_CONFIG"})
    reply = len(wire.pack({"type": "SET_CONFIG", "config": runner.plain_config()}))
    sent = 0
    with contextlib.suppress(OSError):  # the trainer closes on us mid-way
        for _ in range(math.ceil(64 * 1024 * 1024 / reply)):  # ~64 MiB of replies asked for
            sock.sendall(ask)
            sent += 1
            if runner.link_stats()["connections_not_reading"]:
                break
    wait_for(lambda: runner.link_stats()["connections_not_reading"] == 1, 10, 0.05, "the drop")
    wait_for(lambda: runner.link_stats()["connected_servers"] == 0, 10, 0.05, "it to go")
    sock.close()
    stats = runner.link_stats()
    assert stats["connections_not_reading"] == 1 and stats["connected_servers"] == 0


def test_an_unauthenticated_non_loopback_listen_is_refused_unless_insecure():
    from croupier.trainer.env_runner import LinkOptions, check_listen

    for host in ("0.0.0.0", "", "192.0.2.7"):  # noqa: S104 - checked, never bound
        with pytest.raises(ValueError, match="without a link token"):
            check_listen(LinkOptions(host=host))
        check_listen(LinkOptions(host=host, token_file=token_file(TOKEN)))
        check_listen(LinkOptions(host=host, insecure=True))
    check_listen(LinkOptions(host="127.0.0.1"))
    check_listen(LinkOptions(host="localhost"))


# --- 3. surfaced in /healthz and /metrics ----------------------------------------------------


def test_link_errors_show_in_healthz_and_metrics(cleanup):
    def garbage(sock: socket.socket) -> None:
        fake.recv(sock)
        sock.sendall(b"garbage!" + os.urandom(64))

    fake = FakeTrainer([garbage] * 50)
    cleanup.append(fake)

    async def check(c: httpx.AsyncClient, service: Any) -> None:
        import asyncio

        for _ in range(100):
            health = (await c.get("/healthz")).json()["trainer_link"]
            if health["errors"] >= 2:
                break
            await asyncio.sleep(0.05)
        assert health["thread_alive"] is True and health["connected"] is False
        assert "bad frame header" in health["last_error"] and health["last_error_at"] > 0
        metrics = (await c.get("/metrics")).text
        assert "croupier_trainer_link_thread_alive 1.0" in metrics
        errors = [line for line in metrics.splitlines()
                  if line.startswith("croupier_trainer_link_errors")]  # fmt: skip
        assert errors and float(errors[0].split()[-1]) >= 2, errors

    run_inprocess(check, game=GAME, trainer=f"127.0.0.1:{fake.port}")


# --- all of it against a real `croupier serve` -----------------------------------------------


@pytest.mark.timeout(240)
def test_a_real_server_keeps_serving_through_an_outage_impostor_broken_trainers_and_a_backlog(
    cleanup, tmp_path
):
    """Done-when of issue 14 (link side) against a live `croupier serve`: a trainer outage
    builds a backlog over the trainer's frame limit (scaled down: 32 KiB announced); then an
    impostor without the token, a trainer answering garbage, one pushing weights the server
    refuses; then the real trainer. Games are served throughout,
    the link thread lives, and every recorded episode reaches the trainer exactly once."""
    import sqlite3

    from tests.conftest import BackgroundPlay, free_port, running_server_logged

    runner = build_runner(token=TOKEN, max_frame_bytes=32 * 1024)
    cleanup.append(runner)
    port = free_port()
    # The outage is this server's first minutes: version 0 is served and recorded (not the
    # rules before a first version), so that a backlog builds.
    args = ("--trainer", f"127.0.0.1:{port}", "--link-token-file", token_file(TOKEN),
            "--data-dir", str(tmp_path), "--no-rules-before-first-version")  # fmt: skip
    with running_server_logged(*args, "--seats", "learned,rules", timeout_s=90) as server:
        link = lambda: server.get("/healthz")["trainer_link"]  # noqa: E731
        episodes = lambda: server.get("/healthz")["episodes"]  # noqa: E731
        play = BackgroundPlay(server.url, games=8).start()
        t0 = time.monotonic()
        try:
            wait_for(lambda: episodes()["spooled_bytes"] > 10 * 32 * 1024, 60, 0.2,
                     "a backlog ten times the frame limit")  # fmt: skip
            with sqlite3.connect(tmp_path / "spool.sqlite3") as db:
                spooled_ids = [r[0] for r in db.execute("SELECT episode_id FROM episodes")]
            weights = runner.module.get_state()

            def impostor(sock: socket.socket) -> None:
                fake.recv(sock)
                wire.send(
                    sock,
                    {
                        "type": "PONG",
                        "auth": auth.PROTOCOL,
                        "nonce": os.urandom(auth.NONCE_BYTES),
                        "proof": os.urandom(32),
                    },
                )
                with contextlib.suppress(OSError):
                    wire.send(sock, {"type": "ACK", "ids": spooled_ids})  # fmt: skip
                    fake.recv(sock)

            def garbage(sock: socket.socket) -> None:
                channel = fake.handshake(sock, TOKEN)
                channel.recv()
                sock.sendall(b"garbage!" + os.urandom(200))

            def refused_weights(sock: socket.socket) -> None:
                channel = fake.handshake(sock, TOKEN)
                channel.recv()
                channel.send({"type": "SET_CONFIG", "config": runner.plain_config()})
                channel.recv()
                wrong = {k: np.zeros((2, 2), np.float32) for k in weights}
                channel.send(state_message(wrong, 5))
                channel.send(state_message(weights, "x"))
                wait_for(lambda: link()["versions_refused"] >= 2, 10, 0.1, "two refusals")

            print(f"backlog built: {time.monotonic() - t0:.1f} s")
            fake = FakeTrainer([impostor, garbage, refused_weights], runner.port, port=port)
            cleanup.append(fake)
            wait_for(lambda: link()["connected"] and not fake.scripts, 90, 0.2,
                     "the link to come up on the real trainer")  # fmt: skip
        finally:
            play.stop()
        assert play.errors == 0 and play.hands > 0
        health = server.get("/healthz")
        assert health["fallbacks"] == 0
        print(f"link up on the real trainer: {time.monotonic() - t0:.1f} s")

        def arrived() -> bool:
            spool = episodes()
            total = spool["recorded"] + spool["recovered"]
            return spool["pending"] == 0 and runner.link_stats()["episodes_received"] == total

        wait_for(arrived, 60, 0.2, "the backlog to arrive")
        # Acked once trained: the learner's update (here, by hand) settles them.
        received = set(complete_update(runner))
        wait_for(lambda: episodes()["spooled"] == 0, 60, 0.2, "the backlog to be acked")
        print(f"backlog acked: {time.monotonic() - t0:.1f} s")
        stats, final = link(), episodes()

    assert fake.failures == []
    assert TOKEN.encode() not in fake.received
    assert stats["thread_alive"] and stats["authenticated"] and stats["errors"] >= 3
    assert stats["versions_refused"] >= 2 and stats["max_message_bytes"] == 32 * 1024
    assert final["dropped"] == final["too_big"] == final["corrupt"] == 0
    trainer = runner.link_stats()
    assert trainer["frames_rejected"] == 0
    assert trainer["episodes_received"] == final["recorded"] + final["recovered"]
    assert set(spooled_ids) <= received and len(received) == trainer["episodes_received"]
