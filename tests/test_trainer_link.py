"""The trainer link end to end: real `croupier serve` processes feeding an in-process trainer.

One Ray session for the module. The trainer runs RLlib in this process (`num_env_runners=0`),
its `LinkEnvRunner` listens on loopback, and `Trainer.run()` loops in a background thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pickle
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from croupier.engine.rlcard_games import RLCardTable
from croupier.engine.runner import run_engine
from croupier.link import wire
from croupier.trainer.run import TrainOptions
from tests.conftest import (
    UNPICKLED,
    BackgroundPlay,
    LoggedServer,
    PickleBomb,
    free_port,
    running_server_logged,
    wait_for,
)
from tests.helpers.link import closed_by_peer, raw_frame
from tests.helpers.trainer import (
    GAME,
    HYPER,
    RunningTrainer,
    health,
    settled_snapshot,
    synthetic_episode,
    trainer_options,
    wait_quiet,
)

pytestmark = pytest.mark.ray


# --- fixtures and helpers ---------------------------------------------------------------------


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = httpx.post(url + path, json=body, timeout=30.0)
    assert resp.status_code in (200, 201), (resp.status_code, resp.text)
    return resp.json() if resp.content else {}


def play_hand(
    url: str, seats: dict[str, str], seed: int, pin: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """Play one whole hand through the HTTP API: (create response, decisions, end response)."""
    body: dict[str, Any] = {"game": GAME, "seats": seats}
    if pin is not None:
        body["pin"] = pin
    created = post(url, "/v1/games", body)
    table = RLCardTable(GAME)
    table.reset(seed)
    decisions = []
    for _ in range(100):
        if table.is_over():
            break
        player = table.current_player()
        state = table.state_json(player)
        d = post(
            url, f"/v1/games/{created['game_id']}/decide", {"seat": str(player), "state": state}
        )
        decisions.append({**d, "seat": str(player)})
        table.step(d["action"])
    assert table.is_over()
    payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
    ended = post(url, f"/v1/games/{created['game_id']}/end", {"payoffs": payoffs})
    return created, decisions, ended


def seat0_first_seed(start: int = 0) -> int:
    """A deal seed whose first decision is seat 0's."""
    table = RLCardTable(GAME)
    for seed in range(start, start + 200):
        table.reset(seed)
        if table.current_player() == 0:
            return seed
    raise AssertionError("no deal with seat 0 to act first")


@dataclasses.dataclass
class Shared:
    trainer: RunningTrainer
    servers: list[LoggedServer]


@pytest.fixture(scope="module")
def shared(ray_session, tmp_path_factory) -> Iterator[Shared]:
    """One PPO trainer (training in the background) and two servers connected to it."""
    rt = RunningTrainer(trainer_options(tmp_path_factory.mktemp("shared-trainer")))
    with contextlib.ExitStack() as stack:
        stack.callback(rt.close)
        rt.start()
        args = ("--trainer", f"127.0.0.1:{rt.port}", "--seats", "learned,rules")
        servers = [stack.enter_context(running_server_logged(*args)) for _ in range(2)]
        wait_for(lambda: rt.stats()["connected_servers"] == 2, 30, what="2 servers connected")
        yield Shared(rt, servers)
        # Servers stop first (ExitStack order), then the trainer (fed until its loop ends).
    assert rt.error is None, rt.error


# --- a. two servers, one trainer --------------------------------------------------------------


def test_two_servers_feed_one_trainer(shared):
    rt, servers = shared.trainer, shared.servers
    assert rt.stats()["connected_servers"] == 2
    received0 = rt.stats()["episodes_received"]
    shipped0 = [health(s)["episodes"]["shipped"] for s in servers]
    polls: list[list[int]] = [[s.latest()] for s in servers]
    plays = [BackgroundPlay(s.url, games=8).start() for s in servers]
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 90:
            time.sleep(2.5)
            for seen, s in zip(polls, servers, strict=True):
                seen.append(s.latest())
            if time.monotonic() - t0 >= 12 and all(len(set(p)) >= 4 for p in polls):
                break
    finally:
        for p in plays:
            p.stop()
    print("versions seen per server:", polls)
    for p in plays:
        assert p.errors == 0 and p.hands > 50, (p.hands, [s.error_samples for s in p.summaries])
    for seen in polls:
        assert seen == sorted(seen), f"a server's version went back: {seen}"
        assert len(set(seen)) >= 4, f"versions did not advance over time: {seen}"

    received = wait_quiet(rt, servers) - received0
    stats = rt.stats()
    shipped = [
        health(s)["episodes"]["shipped"] - s0 for s, s0 in zip(servers, shipped0, strict=True)
    ]
    print("shipped per server:", shipped, "trainer received:", received, stats)
    assert all(n > 20 for n in shipped), shipped  # both servers' episodes went out...
    assert received == sum(shipped)  # ...and every one of them arrived and was accepted
    assert stats["episodes_rejected"] == stats["episodes_duplicate"] == 0
    assert stats["episodes_dropped_lag"] == 0 and stats["frames_rejected"] == 0
    assert stats["connected_servers"] == 2

    # Acknowledged means trained, with RLlib's own PPO updates: once quiet, the servers hold
    # exactly what the trainer took and has not trained yet, and every episode they deleted
    # is in the trainer's log as trained (nothing was dropped here).
    def spools() -> dict[str, int]:
        both = [health(s)["episodes"] for s in servers]
        return {k: sum(b[k] for b in both) for k in ("pending", "spooled", "acked")}

    log_path = Path(rt.trainer.options.checkpoint_dir) / "ingested-0.log"
    spool, entries = settled_snapshot(spools, lambda: rt.stats()["unacked_episodes"], log_path)
    assert {o for _, o in entries} == {"trained"} and spool["acked"] == len(entries) > 0
    assert spool["spooled"] < HYPER.train_batch_size  # under a batch waits for more games

    # Once idle, both servers hold the trainer's newest version.
    def in_sync() -> bool:
        seq = rt.seq()
        return all(s.latest() == seq for s in servers) and rt.seq() == seq

    wait_for(in_sync, 30, 0.5, "servers to reach the trainer's weights_seq_no")
    assert rt.seq() > max(p[0] for p in polls)


# --- b. pinning ---------------------------------------------------------------------------------


def test_pinned_game_keeps_its_version(shared):
    server = shared.servers[0]
    url = server.url
    seed = seat0_first_seed()
    created = post(url, "/v1/games", {"game": GAME, "seats": {"0": "learned", "1": "rules"}})
    v = created["seats"]["0"]["version"]
    assert created["seats"]["0"]["policy"] == "learned" and v == server.latest()
    with BackgroundPlay(url, games=8):
        wait_for(lambda: server.latest() > v, 90, 0.5, f"a version newer than {v}")
        table = RLCardTable(GAME)
        table.reset(seed)
        state = table.state_json(0)
        d = post(url, f"/v1/games/{created['game_id']}/decide", {"seat": "0", "state": state})
        assert d["policy"] == "learned"
        assert d["version"] == v, f"pinned game decided with {d['version']}, created at {v}"
        assert server.latest() > v

        # pin=latest: the game follows the newest version.
        g2 = post(
            url,
            "/v1/games",
            {"game": GAME, "seats": {"0": "learned", "1": "rules"}, "pin": "latest"},
        )
        assert g2["seats"]["0"]["policy"] == "learned@latest"
        low = server.latest()
        d2 = post(url, f"/v1/games/{g2['game_id']}/decide", {"seat": "0", "state": state})
        high = server.latest()
        assert low <= d2["version"] <= high and d2["version"] > v, (v, low, d2, high)
    for gid in (created["game_id"], g2["game_id"]):
        assert httpx.delete(f"{url}/v1/games/{gid}", timeout=10).status_code == 204


# --- c. learned vs learned ------------------------------------------------------------------


def test_learned_vs_learned_ships_two_episodes(shared):
    rt, servers = shared.trainer, shared.servers
    before = wait_quiet(rt, servers)
    shipped0 = health(servers[1])["episodes"]["shipped"]
    # A seat that never decided (its opponent folded first) records nothing: play until a
    # hand where both learned seats decided (the policy samples, so this is bounded).
    total = 0
    for attempt in range(10):
        _, decisions, ended = play_hand(
            servers[1].url, {"0": "learned", "1": "learned"}, seed=seat0_first_seed(7 + attempt)
        )
        assert all(d["policy"] == "learned" for d in decisions)
        decided = {d["seat"] for d in decisions}
        assert ended["episodes"] == len(decided)
        total += ended["episodes"]
        if decided == {"0", "1"}:
            break
    assert ended["episodes"] == 2, "no hand in 10 where both seats decided"
    wait_for(lambda: rt.stats()["episodes_received"] >= before + total, 30, what="episodes in")
    time.sleep(1.5)  # nothing more may come
    assert rt.stats()["episodes_received"] == before + total
    assert health(servers[1])["episodes"]["shipped"] == shipped0 + total


# --- d. garbage on the trainer port -----------------------------------------------------------


def test_garbage_on_the_trainer_port(shared, tmp_path):
    import msgpack

    rt, servers = shared.trainer, shared.servers
    flag = tmp_path / "unpickled"
    evil_array = {
        b"nd": True,
        b"kind": b"O",
        b"type": "|O",
        b"shape": [1],
        b"data": pickle.dumps(np.array([PickleBomb(str(flag))], dtype=object)),
    }
    junk = random.Random(7).randbytes(40)
    bad_frames = [
        b"garbage!" + os.urandom(200),
        b"00000040" + junk,  # a valid header, then random bytes
        b"99999999" + b"x" * 100,  # claims ~100 MB
        # A good frame first, then an object array (msgpack-numpy would unpickle it).
        wire.pack({"type": "PING"})
        + raw_frame(
            msgpack.packb({"type": "EPISODES", "episodes": [evil_array]}, use_bin_type=True)
        ),
    ]
    before = rt.stats()
    seq_before = rt.seq()
    closed = []
    for frame in bad_frames:
        with socket.create_connection(("127.0.0.1", rt.port), timeout=10) as sock:
            sock.sendall(frame)
            closed.append(closed_by_peer(sock, 3.0))
    wait_for(
        lambda: rt.stats()["frames_rejected"] >= before["frames_rejected"] + len(bad_frames),
        15,
        what="frames_rejected to count every bad connection",
    )
    assert not flag.exists() and UNPICKLED == [], "the trainer unpickled a peer's payload"

    # A well-formed message with a bad episode: the episode is rejected, the link stays up.
    with socket.create_connection(("127.0.0.1", rt.port), timeout=10) as sock:
        bad = [{"t": "x"}, {**synthetic_episode(0), "actions": np.zeros(99, np.int64)}]
        wire.send(sock, {"type": "PING"})  # the handshake (no token here)
        assert wire.recv(sock)[0].name == "PONG"
        wire.send(sock, {"type": "EPISODES", "episodes": bad})
        wire.send(sock, {"type": "PING"})
        sock.settimeout(15)
        replies = [wire.recv(sock)[0].name]
        while replies[-1] != "PONG" and len(replies) < 10:  # weights pushes may interleave
            replies.append(wire.recv(sock)[0].name)
        # The rejected episode that has an id is settled (acked), then the PING is answered.
        assert [r for r in replies if r != "SET_STATE"] == ["ACK", "PONG"], replies
    after = rt.stats()
    print("before:", before, "after:", after)
    assert after["frames_rejected"] == before["frames_rejected"] + len(bad_frames)
    assert after["episodes_rejected"] == before["episodes_rejected"] + 2
    assert after["connections_total"] >= before["connections_total"] + len(bad_frames) + 1

    # Training goes on, and the real servers still get every new version.
    with BackgroundPlay(servers[0].url, games=8):
        wait_for(lambda: rt.seq() > seq_before + 1, 90, 0.5, "weights_seq_no to grow")
        wait_for(lambda: servers[0].latest() > seq_before + 1, 30, 0.5, "server 0 to follow")
    wait_for(lambda: servers[1].latest() > seq_before + 1, 30, 0.5, "server 1 to follow")

    # Every bad connection was closed by the trainer, and none is counted as a server.
    assert closed == [True] * len(bad_frames), f"trainer left bad connections open: {closed}"
    assert rt.stats()["connected_servers"] == 2, rt.stats()


# --- g. max_version_lag -----------------------------------------------------------------------


def test_ingest_drops_episodes_past_the_version_lag(ray_session):
    from croupier.games.registry import load_adapter
    from croupier.policies.module import ModelSpec
    from croupier.trainer.algo import build_config
    from croupier.trainer.env_runner import LinkEnvRunner, LinkOptions

    config = build_config(
        load_adapter(GAME),
        LinkOptions(host="127.0.0.1", port=0, max_version_lag=0),
        ModelSpec(algo="ppo", hiddens=[64, 64]),
        HYPER,
    )
    runner = LinkEnvRunner(config=config)
    try:
        runner.set_state({"rl_module": runner.module.get_state(), "weights_seq_no": 10})
        assert runner.weights_seq_no == 10
        current = synthetic_episode(10, seed=1)
        runner.ingest(
            [
                current,
                synthetic_episode(9, seed=2),  # one version late
                synthetic_episode(3, seed=3),
                {**synthetic_episode(10, seed=4), "versions": [10, 10, 6, 10]},
                current,  # a duplicate (at-least-once delivery)
            ]
        )
        stats = runner.link_stats()
        assert stats["episodes_received"] == 1
        assert stats["episodes_dropped_lag"] == 3
        assert stats["episodes_duplicate"] == 1
        assert stats["lag_histogram"] == {0: 1, 1: 1, 4: 1, 7: 1}
        assert runner.wait_for_steps(4, 0.1) and not runner.wait_for_steps(5, 0.1)
        episodes = runner.sample()
        assert [e.id_ for e in episodes] == [current["id"]]
    finally:
        runner.stop()


# --- e. restart from a checkpoint ---------------------------------------------------------------


def test_restart_from_checkpoint_and_weights_dir(ray_session, tmp_path):
    """APPO (the CLI's default) trains, checkpoints, resumes at the same version; a server
    keeps the versions it received across a restart."""
    port = free_port()
    ckpt, weights = tmp_path / "trainer", tmp_path / "weights"

    def options(iterations: int) -> TrainOptions:
        return trainer_options(ckpt, algo="appo", listen=f"127.0.0.1:{port}", iterations=iterations)

    args = ("--trainer", f"127.0.0.1:{port}", "--weights-dir", str(weights))
    with running_server_logged(*args, "--seats", "learned,rules") as server:
        rt1 = RunningTrainer(options(iterations=3))
        try:
            with BackgroundPlay(server.url, games=8):
                rt1.start().join(150)  # ends by itself after 3 iterations, with a checkpoint
                final1 = rt1.seq()
                assert final1 > 0 and rt1.result and rt1.result["version"] == final1
                wait_for(lambda: server.latest() == final1, 30, 0.5, f"server at {final1}")
            # APPO's learner may be a few updates past the last broadcast: the checkpoint
            # holds the learner's weights and number.
            saved = rt1.trainer.algo.learner_group._learner._weights_seq_no
            assert saved >= final1
        finally:
            rt1.close()
        assert (ckpt / "checkpoint").is_dir()
        assert sum(1 for _ in (ckpt / "progress.jsonl").open()) == 3

        rt2 = RunningTrainer(options(iterations=2))
        try:
            # The checkpoint was written after the last broadcast (so >= what servers saw), and
            # APPO's learner thread may have gone on after it (so <= what it reached).
            resumed = rt2.seq()
            assert final1 <= resumed <= saved, ("resumed at the wrong version", final1, saved)
            wait_for(lambda: rt2.stats()["connected_servers"] == 1, 30, what="reconnect")
            wait_for(lambda: server.latest() == resumed, 10, 0.2, f"server at {resumed}")
            with BackgroundPlay(server.url, games=8):
                rt2.start().join(150)
                final2 = rt2.seq()
                wait_for(lambda: server.latest() == final2, 30, 0.5, f"server at {final2}")
        finally:
            rt2.close()
        assert final2 > resumed >= final1, (final1, resumed, final2)
        last = server.latest()
        assert last == final2

    with running_server_logged("--weights-dir", str(weights), "--seats", "learned,rules") as again:
        policies = again.get("/v1/policies")["policies"]["learned"]
        # It serves the newest and loads the older versions still on disk (for frozen@N), the
        # newest --keep-versions of them (retention may keep a file a game was pinned to).
        on_disk = sorted(int(p.stem[1:]) for p in weights.glob("v*.npz"))
        loaded = policies["versions"]
        assert policies["latest"] == last and loaded == on_disk[-len(loaded) :]
        assert len(loaded) == min(8, len(on_disk))
        assert on_disk[-1] == last
        assert policies["model"]["algo"] == "appo" and policies["model"]["hiddens"] == [64, 64]
        _, decisions, _ = play_hand(again.url, {"0": "learned", "1": "rules"}, seed=3)
        assert {d["version"] for d in decisions if d["seat"] == "0"} == {last}


# --- f. learning: payoff against random ---------------------------------------------------------


# 1,500 hands a side: CIs of ~±0.09 / ±0.13 against the gap measured, -0.03 untrained and
# +1.04 trained (±0.066 / ±0.090 at 3,000 hands, each evaluation 36 s of the test's 219 s on
# a loaded 2-core box).
EVAL_HANDS = 1500
# Updates to train before scoring: the amount learned set by updates, not by the clock (30 s
# of training reached version 13 on a loaded 2-core box, +1.04 a hand over random; version 12
# scored +0.87 ± 0.13 against the untrained +0.03 ± 0.09; a quiet box gets there sooner).
TRAINED_VERSIONS = 12


def _evaluate(url: str, version: int, hands: int = EVAL_HANDS) -> Any:
    summary = asyncio.run(run_engine(url, GAME, 32, [f"frozen@{version}", "random"], hands, None))
    assert summary.errors == 0, summary.error_samples
    assert summary.hands == hands
    return summary.policies[f"frozen@{version}"]


def test_training_improves_payoff_against_random(ray_session, tmp_path):
    rt = RunningTrainer(trainer_options(tmp_path))
    try:
        args = ("--trainer", f"127.0.0.1:{rt.port}", "--seats", "learned,random")
        with running_server_logged(*args) as server:
            wait_for(lambda: rt.stats()["connected_servers"] == 1, 30, what="server connected")
            v0 = server.latest()
            assert v0 == 0
            t_eval = time.monotonic()
            untrained = _evaluate(server.url, v0)
            print(f"\nevaluation of {EVAL_HANDS} hands took {time.monotonic() - t_eval:.1f} s")
            assert rt.stats()["episodes_received"] == 0  # frozen seats are never recorded
            rt.start()
            with BackgroundPlay(server.url, games=16):
                t0 = time.monotonic()
                trained_v = wait_for(
                    lambda: (v := server.latest()) >= TRAINED_VERSIONS and v, 180, 0.5,
                    f"version {TRAINED_VERSIONS} on the server",
                )  # fmt: skip
                print(f"\n{TRAINED_VERSIONS} updates took {time.monotonic() - t0:.1f} s")
            trained = _evaluate(server.url, trained_v)
    finally:
        rt.close()
    print(
        f"\npayoff vs random over {EVAL_HANDS} hands: version {v0}: {untrained.mean:+.3f} "
        f"± {untrained.ci95:.3f};  version {trained_v}: {trained.mean:+.3f} ± {trained.ci95:.3f}"
    )
    assert abs(untrained.mean) < 0.35, untrained  # an untrained net plays about like random
    assert trained.mean - untrained.mean > 0.4, (untrained, trained)
    assert trained.mean - trained.ci95 > untrained.mean + untrained.ci95, (untrained, trained)
