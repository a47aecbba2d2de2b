"""The trainer's side of delivery: acks, de-duplication across a restart, the handshake.

A `LinkEnvRunner` is built in this process (no Algorithm, no Ray session) and spoken to over
loopback with the wire module, as a policy server would.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from croupier.link import auth, wire
from croupier.trainer.algo import Hyper
from croupier.trainer.ingest_log import outcome_counts
from tests.helpers.link import closed_by_peer, raw_frame, token_file
from tests.helpers.trainer import GAME, complete_update, synthetic_episode

HYPER = Hyper(train_batch_size=8, minibatch_size=8, num_epochs=1, lr=1e-3)
TOKEN = "acks-U3CDl2p5OUnz640D_BImqPscXv-4e0g1"  # random: a made-up one is refused


def build_runner(
    state_dir: Path | None,
    token: str | None = None,
    max_lag: int | None = None,
    hyper: Hyper = HYPER,
    algo: str = "ppo",
):
    from croupier.games.registry import load_adapter
    from croupier.policies.module import ModelSpec
    from croupier.trainer.algo import build_config
    from croupier.trainer.env_runner import LinkEnvRunner, LinkOptions

    options = LinkOptions(
        host="127.0.0.1",
        port=0,
        token_file=token_file(token) if token else None,
        max_version_lag=max_lag,
        state_dir=str(state_dir) if state_dir else None,
        handshake_timeout_s=1.0,
    )
    config = build_config(load_adapter(GAME), options, ModelSpec(algo=algo, hiddens=[16]), hyper)
    return LinkEnvRunner(config=config)


def connect(runner: Any, token: str | None = None) -> auth.Channel:
    """A policy server's handshake (with the token: proved both ways): the channel after it."""
    sock = socket.create_connection(("127.0.0.1", runner.port), timeout=10)
    return auth.client_handshake(sock, token, time.monotonic() + 10)


def recv_acks(channel: auth.Channel, want: int, timeout_s: float = 10.0) -> list[str]:
    """Read messages until `want` acked ids have arrived (weights pushes are skipped)."""
    channel.sock.settimeout(timeout_s)
    ids: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(ids) < want and time.monotonic() < deadline:
        kind, body = channel.recv()
        if kind is wire.LinkExt.ACK:
            ids += body["ids"]
    return ids


@pytest.fixture
def runners() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for r in made:
        r.stop()


def no_ack(channel: auth.Channel, wait_s: float = 0.3) -> bool:
    """True if no ACK arrives within `wait_s` (weights pushes are skipped)."""
    channel.sock.settimeout(wait_s)
    try:
        while True:
            kind, _ = channel.recv()
            if kind is wire.LinkExt.ACK:
                return False
    except (TimeoutError, OSError):
        return True


def test_an_episode_is_acked_only_once_a_learner_update_that_used_it_has_completed(
    tmp_path, runners
):
    """Acknowledged means trained: not on arrival, not when handed to the learner, but when
    the next weights version shows the update that used it is done. Logged before the ack."""
    runner = build_runner(tmp_path)
    runners.append(runner)
    chan = connect(runner)
    episodes = [synthetic_episode(0, seed=i) for i in range(3)]
    chan.send({"type": "EPISODES", "episodes": episodes})
    assert runner.wait_for_steps(12, 10)
    assert no_ack(chan)  # taken into the inbox: not acked
    assert len(runner.sample()) == 3
    assert no_ack(chan)  # handed to the learner, the update not done: not acked
    assert outcome_counts(tmp_path / "ingested-0.log") == {}
    runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 1})
    assert sorted(recv_acks(chan, 3)) == sorted(e["id"] for e in episodes)
    assert outcome_counts(tmp_path / "ingested-0.log") == {"trained": 3}
    stats = runner.link_stats()
    assert stats["episodes_trained"] == stats["episodes_acked"] == 3
    assert stats["unacked_episodes"] == 0


def test_appo_acks_two_versions_after_the_hand_over(runners):
    """APPO's learner queues a sample and trains it in the background: the next version may
    not have used it yet, so its acks wait one version more than PPO's."""
    runner = build_runner(None, algo="appo")
    runners.append(runner)
    episodes = [synthetic_episode(0, seed=7 + i) for i in range(2)]  # a train batch: 8 steps
    ids = sorted(e["id"] for e in episodes)
    acked: list[list[str]] = []
    runner.server.ack = lambda conn, ids: acked.append(sorted(ids))  # type: ignore[method-assign]
    runner.ingest(episodes, "conn")
    assert sorted(complete_update(runner)) == ids  # version 1: maybe still queued
    assert acked == []
    runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 2})
    assert acked == [ids]


def test_acks_wait_for_training_and_dedup_survives_a_restart(tmp_path, runners):
    episodes = [synthetic_episode(5, seed=i) for i in range(7)]  # played at version 5
    ids = [e["id"] for e in episodes]
    first = build_runner(tmp_path, max_lag=2)
    runners.append(first)
    chan = connect(first)
    stale = synthetic_episode(0, seed=99)
    first.set_state({"rl_module": first.module.get_state(), "weights_seq_no": 5})
    chan.send({"type": "EPISODES", "episodes": [*episodes[:4], stale]})
    # Dropped for lag: settled at once, logged and acked; the others wait for training.
    assert recv_acks(chan, 1) == [stale["id"]]
    assert sorted(complete_update(first)) == sorted(ids[:4])
    assert sorted(recv_acks(chan, 4)) == sorted(ids[:4])
    # Sent again (an ack lost on the way): a duplicate, acked again, not sampled again.
    chan.send({"type": "EPISODES", "episodes": [episodes[0], episodes[4], episodes[4]]})
    assert recv_acks(chan, 1) == [ids[0]]
    # episodes[4] is waiting: a reconnected server sends it again on a new connection; it
    # is not taken twice, and the ack goes to the new connection too once it is trained.
    chan2 = connect(first)
    chan2.send({"type": "EPISODES", "episodes": [episodes[4], episodes[5]]})
    assert first.wait_for_steps(8, 10)
    assert sorted(complete_update(first)) == sorted(ids[4:6])
    assert sorted(recv_acks(chan2, 2)) == sorted(ids[4:6])
    assert recv_acks(chan, 1) == [ids[4]]
    assert first.link_stats()["episodes_duplicate"] == 3
    # One more, handed to the learner, and then the trainer dies before the update ends.
    chan2.send({"type": "EPISODES", "episodes": [episodes[6]]})
    assert first.wait_for_steps(4, 10)
    assert [e.id_ for e in first.sample()] == [ids[6]]
    chan.sock.close()
    chan2.sock.close()
    first.stop()

    second = build_runner(tmp_path, max_lag=2)  # a restart on the same state dir
    runners.append(second)
    second.set_state({"rl_module": second.module.get_state(), "weights_seq_no": 6})
    chan = connect(second)
    # The server resends what it holds (never acked): the settled ones are recognised and
    # acked again; the one never trained is taken (again) and trained.
    chan.send({"type": "EPISODES", "episodes": [episodes[1], episodes[4], episodes[6]]})
    assert sorted(recv_acks(chan, 2)) == sorted([ids[1], ids[4]])
    assert complete_update(second) == [ids[6]]
    assert recv_acks(chan, 1) == [ids[6]]
    stats = second.link_stats()
    assert stats["episodes_received"] == 1 and stats["episodes_duplicate"] == 2
    chan.sock.close()
    second.stop()
    counts = outcome_counts(tmp_path / "ingested-0.log")
    assert counts == {"trained": 7, "lag": 1}  # every episode exactly once


def test_episodes_dropped_by_the_inbox_are_acked_as_dropped_and_logged(tmp_path, runners):
    """Stale or past the memory bound: settled (counted, logged with the reason, acked), so
    that recorded = trained + counted drops."""
    capped = Hyper(**{**HYPER.__dict__, "max_sample_batches": 1.0, "max_sample_lag": 1,
                      "backlog_max_steps": 13})  # fmt: skip
    runner = build_runner(tmp_path, hyper=capped)
    runners.append(runner)
    chan = connect(runner)
    episodes = [synthetic_episode(0, n=3, seed=i) for i in range(5)]  # 15 steps: 1 too many
    chan.send({"type": "EPISODES", "episodes": episodes})
    assert recv_acks(chan, 1) == [episodes[0]["id"]]  # the oldest, past the memory bound
    runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 2})
    fresh = synthetic_episode(2, n=1, seed=50)  # 12 + 1 steps: within the bound
    chan.send({"type": "EPISODES", "episodes": [fresh]})
    assert runner.wait_for_steps(13, 10)
    assert complete_update(runner) == [fresh["id"]]  # the rest is 2 versions old: stale
    acked = recv_acks(chan, 5)
    assert sorted(acked) == sorted([*(e["id"] for e in episodes[1:]), fresh["id"]])
    counts = outcome_counts(tmp_path / "ingested-0.log")
    assert counts == {"backlog": 1, "stale": 4, "trained": 1}
    stats = runner.link_stats()
    assert stats["episodes_dropped_backlog"] == 1 and stats["episodes_dropped_stale"] == 4


def test_token_handshake_closes_before_anything_is_processed(runners):
    runner = build_runner(None, token=TOKEN)
    runners.append(runner)
    good = synthetic_episode(0, seed=1)
    nonce = b"n" * auth.NONCE_BYTES
    hello = wire.pack({"type": "PING", "auth": auth.PROTOCOL, "nonce": nonce})
    cases = {
        "no auth": wire.pack({"type": "PING"}),
        "the token in clear (the old handshake)": wire.pack({"type": "PING", "token": TOKEN}),
        "a nonce of the wrong type": wire.pack(
            {"type": "PING", "auth": auth.PROTOCOL, "nonce": 12345}
        ),
        "episodes first": wire.pack({"type": "EPISODES", "episodes": [good], "token": TOKEN}),
        "big first frame": wire.pack(
            {"type": "PING", "auth": auth.PROTOCOL, "nonce": nonce, "pad": "x" * 10_000}
        ),
        "a wrong proof": hello + wire.pack({"type": "PING", "proof": b"p" * 32}),
        "episodes instead of a proof": hello + wire.pack({"type": "EPISODES", "episodes": [good]}),
        "huge length header": b"99999999",
        "wrong msgpack type": raw_frame(wire.encode_value([1, 2, 3])),
        "silence": b"",
    }
    for name, data in cases.items():
        with socket.create_connection(("127.0.0.1", runner.port), timeout=10) as sock:
            sock.sendall(data)
            t0 = time.monotonic()
            assert closed_by_peer(sock, 5.0), f"{name}: connection left open"
            assert time.monotonic() - t0 < 3.0, f"{name}: took too long to close"
    stats = runner.link_stats()
    assert stats["connections_refused"] == len(cases)
    assert stats["episodes_received"] == stats["episodes_rejected"] == 0
    assert stats["connected_servers"] == 0

    # With the token it works, and wrong types after the handshake drop only that link.
    chan = connect(runner, TOKEN)
    chan.send({"type": "EPISODES", "episodes": [good]})
    assert runner.wait_for_steps(len(good["actions"]), 10)
    assert complete_update(runner) == [good["id"]]
    assert recv_acks(chan, 1) == [good["id"]]
    for bad in ({"type": "EPISODES", "episodes": 7}, {"type": "SET_STATE", "x": 1}):
        other = connect(runner, TOKEN)
        other.send(bad)
        assert closed_by_peer(other.sock, 5.0)
        other.sock.close()
    chan.send({"type": "PING"})
    chan.sock.settimeout(10)
    assert chan.recv()[0].name == "PONG"  # the good link is still up
    chan.sock.close()


def test_ingest_log_compacts_and_survives_a_torn_line(tmp_path):
    from croupier.trainer.ingest_log import IngestLog, read_ingest_log

    path = tmp_path / "ingested-0.log"
    log = IngestLog(path, keep=3)
    for i in range(10):
        log.record([(f"id{i}", "accepted")])
    assert list(log.ids) == ["id7", "id8", "id9"]
    assert len(read_ingest_log(path)) <= 2 * 3  # compacted on disk too
    log.close()
    with path.open("a") as f:
        f.write("id10\tacc")  # a crash in the middle of a line
    again = IngestLog(path, keep=3)
    again.record([("id11", "lag")])
    again.close()
    assert "id11" in IngestLog(path, keep=3)
    assert read_ingest_log(path)[-1] == ("id11", "lag")


def test_a_checkpoint_swap_killed_halfway_is_recovered(tmp_path):
    from croupier.trainer.checkpoints import recover_checkpoint

    assert recover_checkpoint(tmp_path) is None
    (tmp_path / "checkpoint.tmp").mkdir()  # a save that never finished: not a checkpoint
    assert recover_checkpoint(tmp_path) is None
    (tmp_path / "checkpoint.old").mkdir()  # killed between the two renames of a swap
    (tmp_path / "checkpoint.tmp" / "new").touch()
    assert recover_checkpoint(tmp_path) == tmp_path / "checkpoint"
    assert (tmp_path / "checkpoint" / "new").exists()  # the newer, complete one
    (tmp_path / "checkpoint").rename(tmp_path / "checkpoint.old")
    assert recover_checkpoint(tmp_path) == tmp_path / "checkpoint"  # only the previous one


def test_a_backlog_bigger_than_the_cap_waits_for_the_next_updates(runners):
    """Games faster than the learner (or a spool after an outage): one update takes at most
    `max_sample_batches` train batches, the newest first; the rest waits for the next updates
    (trained, not dropped) unless it grows staler than `max_sample_lag` versions or past
    `backlog_max_steps` in memory: those are dropped and counted."""
    capped = Hyper(**{**HYPER.__dict__, "max_sample_batches": 2.0, "max_sample_lag": 3})
    runner = build_runner(None, hyper=capped)  # 2 x 8 = 16 steps per sample
    runners.append(runner)
    chan = connect(runner)
    episodes = [synthetic_episode(0, n=3, seed=i) for i in range(10)]  # 3 steps each
    ids = [e["id"] for e in episodes]
    chan.send({"type": "EPISODES", "episodes": episodes})
    assert runner.wait_for_steps(30, 10)
    # The newest 15 steps (16 would split one), then the rest: nothing lost; each acked
    # once its update is done.
    assert sorted(complete_update(runner)) == sorted(ids[5:])
    assert sorted(recv_acks(chan, 5)) == sorted(ids[5:])
    assert sorted(complete_update(runner)) == sorted(ids[:5])
    assert sorted(recv_acks(chan, 5)) == sorted(ids[:5])
    stats = runner.link_stats()
    assert stats["steps_received"] == 30 and stats["steps_sampled"] == 30
    assert stats["episodes_sampled"] == 10 and stats["episodes_dropped_backlog"] == 0
    assert stats["waiting_steps"] == 0

    # Versions move on while a backlog waits: what is now more than 3 versions old goes.
    old = [synthetic_episode(0, n=3, seed=20 + i) for i in range(4)]
    chan.send({"type": "EPISODES", "episodes": old})
    assert runner.wait_for_steps(12, 10)
    runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 4})
    fresh = synthetic_episode(4, n=3, seed=30)
    chan.send({"type": "EPISODES", "episodes": [fresh]})
    assert runner.wait_for_steps(15, 10)
    assert [e.id_ for e in runner.sample()] == [fresh["id"]]
    assert sorted(recv_acks(chan, 4)) == sorted(e["id"] for e in old)  # dropped: settled
    stats = runner.link_stats()
    assert stats["episodes_dropped_stale"] == 4 and stats["steps_dropped_stale"] == 12
    chan.sock.close()


def test_a_backlog_alone_waits_for_fresh_games_and_is_then_trained_beside_them(runners):
    """With `fresh_lag`, a backlog is never trained on its own (a trainer restarted after
    the games stopped did so update after update, each on older data, and pushed a worse
    policy: bench outage): it waits, kept and counted as waiting, and goes into the first
    update that fresh games make, behind them."""
    hyper = Hyper(**{**HYPER.__dict__, "max_sample_batches": 2.0, "fresh_lag": 2})
    runner = build_runner(None, hyper=hyper)  # 2 x 8 = 16 steps per sample
    runners.append(runner)
    runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 5})
    old = [synthetic_episode(0, n=3, seed=50 + i) for i in range(4)]  # 5 versions behind
    runner.ingest(old)
    assert not runner.wait_for_steps(1, 0.3)  # 12 steps wait, none fresh: no update
    assert runner.inbox.take(5) == ([], 0)
    stats = runner.link_stats()
    assert stats["waiting_steps"] == 12 and stats["episodes_dropped_stale"] == 0
    fresh = synthetic_episode(3, n=3, seed=60)  # 2 versions behind: fresh enough
    runner.ingest([fresh])
    assert runner.wait_for_steps(15, 5)
    taken = [e.id_ for e in runner.sample()]
    assert taken[0] == fresh["id"] and sorted(taken[1:]) == sorted(e["id"] for e in old)
    assert runner.link_stats()["waiting_steps"] == 0


def test_the_backlog_in_memory_is_bounded(runners):
    bounded = Hyper(**{**HYPER.__dict__, "max_sample_batches": 1.0, "backlog_max_steps": 16})
    runner = build_runner(None, hyper=bounded)  # at most 16 steps waiting
    runners.append(runner)
    episodes = [synthetic_episode(0, n=3, seed=i) for i in range(10)]
    runner.ingest(episodes)
    stats = runner.link_stats()
    assert stats["waiting_steps"] == 15 and stats["episodes_dropped_backlog"] == 5
    assert stats["steps_dropped_backlog"] == 15
    assert sorted(e.id_ for e in runner.sample()) == sorted(e["id"] for e in episodes[8:])


def test_one_episode_delivered_on_two_connections_at_once_is_taken_once(tmp_path, runners):
    """A resend racing its original (two readers, the same ids at the same moment): the
    duplicate check and its record in the ingest log are one step, so each episode is taken
    once and the other delivery counted as a duplicate. The log write is slowed down here to
    hold the window open that a check-then-record without a lock leaves."""
    runner = build_runner(tmp_path)
    runners.append(runner)
    episodes = [synthetic_episode(0, n=2, seed=40 + i) for i in range(6)]
    record = runner.ingest_log.record

    def slow_record(entries: list[tuple[str, str]]) -> None:
        time.sleep(0.3)
        record(entries)

    runner.ingest_log.record = slow_record  # type: ignore[method-assign]
    acked: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda i=i: acked.append(runner.ingest(episodes, f"conn{i}")))
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    stats = runner.link_stats()
    assert stats["episodes_received"] == 6 and stats["episodes_duplicate"] == 6
    assert stats["steps_received"] == 12 and runner.wait_for_steps(12, 1)
    assert not runner.wait_for_steps(13, 0.2)  # nothing taken twice
    assert acked == [[], []]  # not trained yet: nothing to ack
    # Once trained, both deliveries are acked (each connection may be the one still there).
    sent: list[tuple[Any, list[str]]] = []
    runner.server.ack = lambda conn, ids: sent.append((conn, sorted(ids)))  # type: ignore
    assert len(complete_update(runner)) == 6
    ids = sorted(e["id"] for e in episodes)
    assert sorted(sent) == [("conn0", ids), ("conn1", ids)]


def test_link_counters_lose_no_count_under_concurrent_readers():
    from croupier.link.server import LINK_COUNTERS, LinkCounters

    counters = LinkCounters()

    def bump() -> None:
        for _ in range(20_000):
            counters.add("frames_rejected")

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    snap = counters.snapshot()
    assert snap["frames_rejected"] == 80_000
    assert list(snap) == list(LINK_COUNTERS)  # every counter, in the one list's order
