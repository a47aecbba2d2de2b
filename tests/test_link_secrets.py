"""The link token: what a usable one is, where it lives (never in a config or a checkpoint),
who proves holding it first, what strangers can do to the trainer's port before proving
anything, and `--rllib-compat`'s pickle only from this server's own user.

Each test plays a probe of a security review, scaled down; each failed on the code before it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from croupier.link import auth, secret, wire
from croupier.link.secret import TokenSource, WeakToken, check_token
from tests.conftest import free_port, run_inprocess, wait_for
from tests.helpers.link import token_file
from tests.helpers.trainer import GAME

TOKEN = "secrets-wyN6bK8Na7xyA73tUz5dnM3GPTSVNzmZ"  # random: a made-up one is refused


def build_runner(**options: Any) -> Any:
    from croupier.games.registry import load_adapter
    from croupier.policies.module import ModelSpec
    from croupier.trainer.algo import Hyper, build_config
    from croupier.trainer.env_runner import LinkEnvRunner, LinkOptions

    hyper = Hyper(train_batch_size=8, minibatch_size=8, num_epochs=1, lr=1e-3)
    link_options = LinkOptions(host="127.0.0.1", port=0, **options)
    spec = ModelSpec(algo="ppo", hiddens=[16])
    return LinkEnvRunner(config=build_config(load_adapter(GAME), link_options, spec, hyper))


def server_link(port: int, **config: Any) -> Any:
    from croupier.config import ServerConfig
    from croupier.games.registry import load_adapter
    from croupier.link.client import TrainerLink
    from croupier.policies.learned import PolicyVersions
    from croupier.policies.module import ModelSpec
    from croupier.trajectories.spool import EpisodeSpool

    cfg = ServerConfig(game=GAME, trainer=f"127.0.0.1:{port}", **config)
    versions = PolicyVersions(load_adapter(GAME), ModelSpec(algo="ppo", hiddens=[16]))
    return TrainerLink(cfg, versions, EpisodeSpool(None))


# --- medium 3: empty and short tokens ----------------------------------------------------------


def test_empty_short_and_regular_tokens_are_refused_saying_how_to_make_one(tmp_path):
    for weak in ("", "short", "0123456789abcdef0123456789abcde", "ab" * 20):
        with pytest.raises(WeakToken, match="secrets.token_urlsafe"):
            check_token(weak)
    check_token("tA7trLKtpwq0mmBlvo97SY")  # 22 base64url characters: 132 bits
    check_token("876cedcbfaf701b5dbef02dbeee39da7")  # 32 hex digits: 128 bits
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(WeakToken, match="is empty"):
        TokenSource(file=str(empty)).read()
    with pytest.raises(ValueError, match="cannot read"):
        TokenSource(file=str(tmp_path / "missing")).read()
    assert TokenSource(file=token_file(TOKEN)).read() == TOKEN  # the newline is not the token


# Made by people (the review's and the like): long enough, yet a guesser's first tries.
GUESSABLE = (
    "correct-horse-battery-staple",
    "CorrectHorseBatteryStaple",
    "correct-horse-battery-staple-river-mountain",
    "croupier-link-token-0123456789",
    "MySuperSecretLinkToken2026!",
    "change-me-please-i-am-a-link-token",
    "thisismylinktokenforthetrainer",
    "password1234567890abcdefgh",
    "Summer2026!Summer2026!Summer",
)
# Made by `secrets` (token_urlsafe(16), (32), token_hex(16)) and uuid4: one each, fixed so
# the test cannot fail by chance (docs/security.md: how rarely a random token is refused).
RANDOM = (
    "QlnRe0t1Hh6Yw7bGnlh0mA",
    "Cx_cJmE9qrpvS1KZ0Q2JX6YBnhJtk4aY6vrZ5lFQ8kI",
    "9f3c2a7d81e04b6c5a0f9e8d7c6b5a41",
    "5d1b6c1e-7f33-4a8e-9c2d-0b6f4e3a2c19",
)


def test_words_sequences_and_repeats_are_refused_however_long():
    """The review: guessable link tokens passed the length check, and since the server proves
    itself first a fake trainer can collect a proof and guess offline."""
    for weak in GUESSABLE:
        with pytest.raises(WeakToken, match="words, years, sequences or repeats") as refused:
            check_token(weak)
        assert "secrets.token_urlsafe(32)" in str(refused.value)
    for token in RANDOM:
        assert check_token(token) == token


def test_an_empty_token_is_refused_when_a_servers_link_is_built(monkeypatch):
    """The review's `""` server accepted any `""` trainer, and /healthz said
    `authenticated: false` while the link thought it authenticated: now it never starts."""
    monkeypatch.setenv(secret.TOKEN_ENV, "")
    with pytest.raises(ValueError, match="is empty"):
        server_link(free_port())
    monkeypatch.setenv(secret.TOKEN_ENV, "0123456789abcdef")  # 64 bits
    with pytest.raises(ValueError, match="hex digits"):
        server_link(free_port())


def test_both_commands_refuse_an_empty_or_short_token_at_start(monkeypatch, tmp_path):
    from croupier.cli import app

    short = tmp_path / "short"
    short.write_text("letmein\n")
    cli = CliRunner()
    cases = [
        (["train", "--listen", "0.0.0.0:1"], {secret.TOKEN_ENV: ""}),  # noqa: S104 - refused
        (["train", "--link-token-file", str(short)], {}),
        (["serve", "--port", "1", "--trainer", "127.0.0.1:1"], {secret.TOKEN_ENV: ""}),
        (["serve", "--port", "1", "--trainer", "127.0.0.1:1", "--link-token-file", str(short)],
         {}),
    ]  # fmt: skip
    for argv, env in cases:
        monkeypatch.delenv(secret.TOKEN_ENV, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        result = cli.invoke(app, argv)
        assert result.exit_code == 2, (argv, result.output)
        assert "token_urlsafe" in result.output, result.output


def test_healthz_says_authenticated_exactly_when_the_link_proved_the_token():
    async def check(c: Any, service: Any) -> dict[str, Any]:
        import asyncio

        for _ in range(200):
            link = (await c.get("/healthz")).json()["trainer_link"]
            if link["connected"]:
                return link
            await asyncio.sleep(0.05)
        raise AssertionError(f"never connected: {link}")

    for token in (TOKEN, None):
        runner = build_runner(token_file=token_file(token) if token else None)
        try:
            config = {"link_token_file": token_file(token)} if token else {}
            link = run_inprocess(check, game=GAME, trainer=f"127.0.0.1:{runner.port}", **config)
        finally:
            runner.stop()
        assert link["authenticated"] is (token is not None), link


# --- who proves first ---------------------------------------------------------------------------


def test_a_stranger_gets_no_proof_from_the_trainer_to_guess_the_token_against():
    """Anyone who reaches the trainer's port could collect (nonces, proof) pairs and test
    guesses offline. The trainer now proves itself only to a peer that proved itself first."""
    runner = build_runner(token_file=token_file(TOKEN), handshake_timeout_s=1.0)
    try:
        with socket.create_connection(("127.0.0.1", runner.port), timeout=5) as sock:
            nonce = os.urandom(auth.NONCE_BYTES)
            wire.send(sock, {"type": "PING", "auth": auth.PROTOCOL, "nonce": nonce})
            kind, pong = wire.recv(sock, 4096)
            assert kind.name == "PONG" and len(pong["nonce"]) == auth.NONCE_BYTES
            assert "proof" not in pong, "the trainer proved itself to a stranger"
            wire.send(sock, {"type": "PING", "proof": os.urandom(32)})  # a guess
            with pytest.raises((ConnectionError, OSError)):  # closed, nothing more said
                wire.recv(sock, 4096)
    finally:
        runner.stop()


# --- low: strangers' connections before they prove anything -----------------------------------


def test_strangers_holding_connections_open_neither_fill_the_slots_nor_keep_a_server_out():
    """The review filled the trainer's 256 connection slots with silent connections for 10 s
    each; now at most `max_handshaking` (16) strangers wait at once, the oldest making way.
    Scaled down: 32 slots."""
    runner = build_runner(token_file=token_file(TOKEN), max_connections=32)
    held: list[socket.socket] = []
    try:
        for _ in range(runner.server.options.max_connections):
            held.append(socket.create_connection(("127.0.0.1", runner.port), timeout=5))
        stats = runner.link_stats
        wait_for(lambda: stats()["connections_total"] == len(held), 10, 0.05, "every accept")
        assert stats()["connected_servers"] <= runner.server.options.max_handshaking
        sock = socket.create_connection(("127.0.0.1", runner.port), timeout=5)
        channel = auth.client_handshake(sock, TOKEN, time.monotonic() + 5)  # a real server
        channel.send({"type": "PING"})
        assert channel.recv(deadline=time.monotonic() + 5)[0].name == "PONG"
        sock.close()
        assert stats()["handshakes_evicted"] >= len(held) - runner.server.options.max_handshaking
    finally:
        for sock in held:
            sock.close()
        runner.stop()


# --- low: --rllib-compat unpickles only what its own user sent ---------------------------------


class _Marker:
    """A pickle that, when read, creates a file: proof the server unpickled it."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (self.path,))


def test_rllib_compat_reads_no_pickle_from_another_users_process(monkeypatch, tmp_path):
    """On loopback any local user can bind the trainer's port while it is down and answer with
    a pickle: it is read only if the process answering belongs to this server's user."""
    from croupier.link import client

    marker = tmp_path / "unpickled"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def fake_trainer() -> None:
        with contextlib.suppress(OSError):
            while True:
                sock, _ = listener.accept()
                with sock:
                    wire.recv(sock, 4096)
                    wire.send(sock, {"type": "PONG"})
                    wire.recv(sock, 4096)  # GET_CONFIG
                    config = pickle.dumps(_Marker(marker))
                    wire.send(sock, {"type": "SET_CONFIG", "config": config})
                    sock.settimeout(2)
                    with contextlib.suppress(OSError):
                        wire.recv(sock, 4096)

    threading.Thread(target=fake_trainer, daemon=True).start()
    monkeypatch.setattr(client, "BACKOFF_MAX_S", 0.2)
    monkeypatch.setattr(client.os, "getuid", lambda: os.geteuid() + 1)  # another user's port
    link = server_link(port, rllib_compat=True)
    link.start()
    try:
        wait_for(lambda: link.errors >= 2, 10, 0.05, "two refused configs")
        assert "belongs to uid" in str(link.last_error), link.last_error
        assert not marker.exists(), "a pickle from another user's process was read"
        monkeypatch.setattr(client.os, "getuid", os.geteuid)  # the same user: read
        wait_for(marker.exists, 10, 0.05, "the same user's pickle to be read")
    finally:
        link.stop()
        listener.close()


# --- medium 4: the token in no checkpoint, config or actor argument ---------------------------


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_no_checkpoint_file_holds_the_token_and_all_are_owner_only(tmp_path):
    """The review found the token pickled in clear in four files of every checkpoint (mode
    0644) and in every env runner's actor arguments. `croupier train` with the token in its
    environment, a remote env runner (which must read the token itself) and a checkpoint."""
    checkpoint_dir = tmp_path / "trainer"
    token = "probe-" + os.urandom(16).hex()
    env = {**os.environ, secret.TOKEN_ENV: token}
    cmd = [sys.executable, "-m", "croupier", "train", "--listen", f"127.0.0.1:{free_port()}",
           "--checkpoint-dir", str(checkpoint_dir), "--iterations", "0", "--algo", "ppo",
           "--hiddens", "8", "--num-env-runners", "1"]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=220)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    files = [p for p in checkpoint_dir.rglob("*") if p.is_file()]
    assert any(p.name == "class_and_ctor_args.pkl" for p in files), files  # RLlib's config
    holding = [str(p) for p in files if token.encode() in p.read_bytes()]
    assert not holding, f"the link token is in {holding}"
    assert stat.S_IMODE(checkpoint_dir.stat().st_mode) == 0o700
    saved = checkpoint_dir / "checkpoint"
    loose = [
        f"{p} {stat.S_IMODE(p.stat().st_mode):o}"
        for p in [saved, *saved.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert not loose, loose
