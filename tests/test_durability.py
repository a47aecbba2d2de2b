"""The spool (durable, bounded, acked), idempotent turns, fallback, limits and idle expiry.

All in-process and fast; the same behaviour under real processes and SIGKILL is in
tests/test_faults.py.
"""

from __future__ import annotations

import asyncio
import pickle
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from croupier.games.leduc import LeducAdapter
from croupier.link import wire
from croupier.policies.weights_file import weights_path
from croupier.trajectories.recorder import SeatRecorder
from croupier.trajectories.spool import EpisodeSpool
from tests.conftest import UNPICKLED, PickleBomb

ADAPTER = LeducAdapter()
GAME = "leduc-holdem"


def make_episode(seed: int, steps: int = 3) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    rec = SeatRecorder(game_id=f"g{seed}", seat="0", policy="learned")
    for _ in range(steps):
        rec.add_decision(
            rng.standard_normal(ADAPTER.obs_size).astype(np.float32),
            np.ones(ADAPTER.num_actions, np.float32),
            int(rng.integers(ADAPTER.num_actions)),
            -1.1,
            np.zeros(ADAPTER.num_actions, np.float32),
            0,
        )
    episode = rec.close(1.0, ADAPTER.terminal_observation())
    assert episode is not None
    return episode


# --- the spool ------------------------------------------------------------------------------


def test_spool_survives_reopen_and_deletes_only_on_ack(tmp_path):
    path = tmp_path / "spool.sqlite3"
    episodes = [make_episode(i) for i in range(10)]
    spool = EpisodeSpool(path)
    for e in episodes:
        spool.put(e)
    sent = spool.take(4)
    assert [e["id"] for e in sent] == [e["id"] for e in episodes[:4]]
    np.testing.assert_array_equal(sent[0]["actions"], episodes[0]["actions"])
    assert spool.stats()["pending"] == 6 and spool.stats()["in_flight"] == 4
    assert spool.ack([e["id"] for e in sent[:2]] + ["unknown-id"]) == 2
    # No close(): the process "dies" here; a new spool on the same file finds the rest.
    again = EpisodeSpool(path)
    stats = again.stats()
    assert stats["recovered"] == stats["spooled"] == stats["pending"] == 8
    assert stats["pending_steps"] == 8 * 3
    taken = again.take()
    assert [e["id"] for e in taken] == [e["id"] for e in episodes[2:]]
    # A reconnect re-sends whatever is not acked, oldest first (at-least-once).
    again.ack([taken[0]["id"]])
    again.rewind()
    assert [e["id"] for e in again.take(2)] == [e["id"] for e in episodes[3:5]]
    # The same episode put twice (a retried end) is stored once.
    again.put(episodes[9])
    assert again.stats()["spooled"] == 7
    spool.close()
    again.close()


def test_spool_bounds_drop_the_oldest_and_count_them(tmp_path):
    spool = EpisodeSpool(tmp_path / "s.sqlite3", max_episodes=5)
    episodes = [make_episode(i) for i in range(8)]
    for e in episodes:
        spool.put(e)
    stats = spool.stats()
    assert stats["spooled"] == 5 and stats["dropped"] == 3 and stats["recorded"] == 8
    assert [e["id"] for e in spool.take()] == [e["id"] for e in episodes[3:]]

    one = len(wire.encode_value(episodes[0]))
    by_bytes = EpisodeSpool(tmp_path / "b.sqlite3", max_bytes=int(one * 2.5))
    for e in episodes:
        by_bytes.put(e)
    stats = by_bytes.stats()
    assert stats["spooled"] == 2 and stats["dropped"] == 6
    assert stats["spooled_bytes"] <= one * 2.5
    assert [e["id"] for e in by_bytes.take()] == [e["id"] for e in episodes[6:]]


def _note_peaks(spool: EpisodeSpool) -> None:
    """From now on every insert into `spool` notes the bytes stored right after it (inside
    the transaction) in a table `peaks`: a SQLite trigger, trusting none of the spool's code."""
    spool._db.execute("CREATE TABLE peaks (nbytes INTEGER)")
    spool._db.execute(
        "CREATE TRIGGER note AFTER INSERT ON episodes BEGIN "
        "INSERT INTO peaks SELECT SUM(nbytes) FROM episodes; END"
    )


def test_the_spool_makes_room_before_it_inserts(tmp_path):
    """The byte bound holds inside the write too: the oldest go before the insert (it was
    checked after: the review's spool reached 1,160 MiB with its WAL over a 1 GiB bound)."""
    episodes = [make_episode(i) for i in range(12)]
    one = len(wire.encode_value(episodes[0]))
    spool = EpisodeSpool(tmp_path / "s.sqlite3", max_bytes=int(one * 3.5))
    _note_peaks(spool)
    for e in episodes[:6]:
        spool.put(e)
    spool.put_many(episodes[6:])
    peaks = [n for (n,) in spool._db.execute("SELECT nbytes FROM peaks").fetchall()]
    assert len(peaks) == 12 and max(peaks) <= one * 3.5, (max(peaks), one * 3.5)
    assert [e["id"] for e in spool.take()] == [e["id"] for e in episodes[-3:]]
    assert spool.stats()["dropped"] == 9


def test_an_episode_bigger_than_the_spool_is_refused_and_evicts_nothing(tmp_path):
    """The review's 577 MiB episode evicted every other spooled episode before it was found
    unsendable. An episode over the spool's byte bound, or over what the link can ship
    (`max_episode_bytes`), is refused before anything is deleted for it, and counted."""
    small = [make_episode(i) for i in range(3)]
    later = make_episode(3)
    big = make_episode(99, steps=400)
    one, huge = len(wire.encode_value(small[0])), len(wire.encode_value(big))
    assert huge > 20 * one
    for bounds in ({"max_bytes": 10 * one}, {"max_episode_bytes": 10 * one}):
        spool = EpisodeSpool(tmp_path / f"{len(bounds)}{next(iter(bounds))}.sqlite3", **bounds)
        spool.put_many(small)
        spool.put(big)
        spool.put_many([big, later])
        stats = spool.stats()
        assert stats["refused_too_big"] == 2 and stats["dropped"] == 0, stats
        assert [e["id"] for e in spool.take()] == [e["id"] for e in [*small, later]]
        spool.close()


def test_a_server_with_a_trainer_refuses_episodes_no_frame_could_carry():
    from croupier.api.components import build_components
    from croupier.config import ServerConfig

    with_trainer = build_components(ServerConfig(trainer="127.0.0.1:9", data_dir=None))
    assert with_trainer.outbox.max_episode_bytes > wire.DEFAULT_MAX_FRAME - 2048
    assert with_trainer.outbox.max_episode_bytes < wire.DEFAULT_MAX_FRAME
    alone = build_components(ServerConfig(data_dir=None))
    assert alone.outbox.max_episode_bytes == alone.outbox.max_bytes  # nothing ships


def test_spool_never_unpickles_a_damaged_row(tmp_path):
    path = tmp_path / "spool.sqlite3"
    spool = EpisodeSpool(path)
    spool.put(make_episode(1))
    flag = tmp_path / "unpickled"
    evil = {  # msgpack-numpy's layout of an object array: its decoder would unpickle it
        b"nd": True,
        b"kind": b"O",
        b"type": "|O",
        b"shape": [1],
        b"data": pickle.dumps(np.array([PickleBomb(str(flag))], dtype=object)),
    }
    import msgpack

    with sqlite3.connect(path) as db:  # someone tampers with the file
        db.execute(
            "INSERT INTO episodes (episode_id, steps, nbytes, body) VALUES ('evil', 1, 10, ?)",
            (msgpack.packb({"id_": "evil", "observations": evil}, use_bin_type=True),),
        )
    again = EpisodeSpool(path)
    taken = again.take()
    assert len(taken) == 1 and again.stats()["corrupt"] == 1 and again.stats()["spooled"] == 1
    assert not flag.exists() and UNPICKLED == []


def test_spool_put_many_is_one_transaction(tmp_path):
    """`end:batch` writes its games' episodes together: all of them survive a reopen, a
    duplicate id is stored once, the bounds still hold, and it costs less than one by one."""
    path = tmp_path / "spool.sqlite3"
    spool = EpisodeSpool(path, max_episodes=150)
    batch = [make_episode(i, steps=2) for i in range(100)]
    spool.put_many([*batch, batch[0]])
    assert spool.stats()["spooled"] == 100 and spool.put_calls == 1
    spool.put_many([make_episode(i, steps=2) for i in range(100, 200)])
    stats = spool.stats()
    assert stats["spooled"] == 150 and stats["dropped"] == 50  # the oldest went first
    spool.close()
    again = EpisodeSpool(path, max_episodes=150)
    ids = [e["game_id"] for e in again.take()]
    assert ids == [f"g{i}" for i in range(50, 200)]


def test_a_write_off_the_event_loop_is_committed_when_its_future_is_done(tmp_path):
    """`end` awaits `spool.write`: done means committed (a reopened spool finds it, as after a
    SIGKILL), writes queued together go in one transaction (a group commit), and one bad write
    fails alone."""
    path = tmp_path / "spool.sqlite3"
    spool = EpisodeSpool(path)
    episodes = [make_episode(i, steps=2) for i in range(60)]

    async def main() -> list[Any]:
        first = spool.write(episodes[:2])
        await first
        assert EpisodeSpool(path).stats()["recovered"] == 2  # on disk when the future is done
        # Queued without yielding to the writer: grouped. A bad one (no actions) among them.
        futures = [spool.write([e]) for e in episodes[2:50]]
        futures.insert(5, spool.write([{"id": "bad"}]))
        return await asyncio.gather(*futures, return_exceptions=True)

    results = asyncio.run(main())
    assert [type(r).__name__ for r in results].count("KeyError") == 1
    assert isinstance(results[5], KeyError) and results.count(None) == 48
    assert EpisodeSpool(path).stats()["recovered"] == 50
    # Nobody waits for a cut episode's write; close() commits it before closing.
    spool.write_later(episodes[50:])
    spool.close()
    assert EpisodeSpool(path).stats()["recovered"] == 60


def test_a_group_commit_writes_many_ends_in_few_transactions(tmp_path):
    spool = EpisodeSpool(tmp_path / "spool.sqlite3")
    episodes = [make_episode(i, steps=2) for i in range(64)]

    async def main() -> None:
        await asyncio.gather(*(spool.write([e]) for e in episodes))

    asyncio.run(main())
    assert spool.stats()["spooled"] == 64
    assert spool.put_calls <= 8, spool.put_calls  # one per queued group, not one per end
    spool.close()


def test_a_full_spool_deletes_its_oldest_in_chunks(tmp_path):
    """Past the bound the oldest go 0.1% at a time, not one per write (each was a DELETE
    in `end`'s transaction once the spool was full)."""
    spool = EpisodeSpool(tmp_path / "spool.sqlite3", max_episodes=2000)
    spool.put_many([make_episode(i, steps=1) for i in range(2000)])
    assert spool.stats()["dropped"] == 0
    spool.put(make_episode(2000, steps=1))
    stats = spool.stats()
    assert stats["spooled"] == 1998 and stats["dropped"] == 3  # down to 0.1% below
    spool.put(make_episode(2001, steps=1))
    spool.put(make_episode(2002, steps=1))
    stats = spool.stats()
    assert stats["spooled"] == 2000 and stats["dropped"] == 3  # no delete meanwhile
    assert [e["game_id"] for e in spool.take(1)] == ["g3"]  # the oldest went first
    spool.close()


def test_spool_put_cost(tmp_path):
    """What `end` pays per learned seat for durability (printed; bounded loosely), one game
    per write and 64 per write (`end:batch`)."""
    spool = EpisodeSpool(tmp_path / "spool.sqlite3")
    episodes = [make_episode(i, steps=2) for i in range(800)]
    t0 = time.perf_counter()
    for e in episodes[:400]:
        spool.put(e)
    one_us = (time.perf_counter() - t0) / 400 * 1e6
    t0 = time.perf_counter()
    for start in range(400, 800, 64):
        spool.put_many(episodes[start : start + 64])
    batched_us = (time.perf_counter() - t0) / 400 * 1e6
    print(
        f"\nspool put (WAL, synchronous=NORMAL, 2-step Leduc episode): {one_us:.0f} µs one by "
        f"one, {batched_us:.0f} µs each in writes of 64"
    )
    assert one_us < 5000 and batched_us < 5000


# --- idempotent turns -------------------------------------------------------------------------


def _state(states: list[dict], player: int) -> dict:
    return next(s for s in states if s["current_player"] == player)


def test_retried_turn_returns_the_same_action_and_records_once(inprocess, leduc_states):
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}
        gid = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()[
            "game_id"
        ]
        url = f"/v1/games/{gid}/decide"
        payload = {"seat": "0", "state": state, "turn": 3}
        # Two copies in flight at once (a client timeout and retry), then one more later.
        first, second = await asyncio.gather(
            client.post(url, json=payload), client.post(url, json=payload)
        )
        third = await client.post(url, json=payload)
        answers = [r.json() for r in (first, second, third)]
        older = await client.post(url, json={**payload, "turn": 2})
        other_seat = await client.post(url, json={**payload, "seat": "1"})
        nxt = await client.post(url, json={**payload, "turn": 5})
        batch = await client.post(
            "/v1/decide:batch",
            json={
                "items": [
                    {**payload, "game_id": gid, "turn": 5},
                    {**payload, "game_id": gid, "turn": 4},
                ]
            },
        )
        ended = (
            await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        ).json()
        return answers, older, other_seat, nxt, batch.json(), ended, service.outbox.take(), service

    answers, older, other_seat, nxt, batch, ended, taken, service = inprocess(body, seed=3)
    assert all(a == answers[0] for a in answers), answers
    assert answers[0]["policy"] == "learned" and answers[0]["fallback"] is False
    assert older.status_code == 409 and other_seat.status_code == 409
    assert nxt.status_code == 200
    replayed, stale = batch["results"]
    assert {k: replayed[k] for k in ("action", "action_index")} == {
        k: nxt.json()[k] for k in ("action", "action_index")
    }
    assert stale["error"]["status"] == 409
    # Turn 3 (once) and turn 5 (once): two steps, not five.
    assert ended["episodes"] == 1
    (episode,) = taken
    assert len(episode["actions"]) == 2
    assert service.health()["turn_replays"] == 3


def test_a_turn_and_its_retry_in_one_batch_get_one_decision(inprocess, leduc_states):
    """An engine that resends a turn inside the same `decide:batch` (both copies in one
    body): the copy waits on the first, both answer the same action, one step is recorded."""
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}
        gid = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()[
            "game_id"
        ]
        item = {"game_id": gid, "seat": "0", "state": state, "turn": 1}
        later = {**item, "turn": 2}
        batch = await client.post("/v1/decide:batch", json={"items": [item, item, later, item]})
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        return batch.json()["results"], ended.json(), service.outbox.take()

    (first, retry, later, stale), ended, taken = inprocess(body, seed=4)
    assert first["error"] is None and first["policy"] == "learned"
    assert retry == first
    assert later["error"] is None
    assert stale["error"]["status"] == 409  # turn 1 again after turn 2: out of order
    assert ended["episodes"] == 1
    (episode,) = taken
    assert len(episode["actions"]) == 2  # turns 1 and 2, once each


# --- fallback -----------------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["late", "error"])
def test_fallback_answers_marks_counts_and_records_nothing(inprocess, leduc_states, failure):
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        act = service.batcher.versions.act

        def broken_act(*args: Any, **kwargs: Any) -> Any:
            if failure == "error":
                raise RuntimeError("the model broke")
            time.sleep(0.5)  # on the forward thread: far past the 100 ms deadline
            return act(*args, **kwargs)

        service.batcher.versions.act = broken_act
        seats = {"0": "learned", "1": "rules"}
        gid = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()[
            "game_id"
        ]
        t0 = time.perf_counter()
        decided = await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
        took = time.perf_counter() - t0
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        return decided, took, ended.json(), service.health()

    decided, took, ended, health = inprocess(body, decide_deadline_ms=100, forward_thread=True)
    body = decided.json()
    assert decided.status_code == 200, body
    assert body["fallback"] is True and body["policy"] == "rules" and body["version"] is None
    assert body["action"] in state["legal_actions"]
    if failure == "late":
        # Answered at the deadline, not when the model finished.
        assert 0.09 < took < 0.45, health["batcher"]
        assert health["batcher"]["late"] == 1
    assert health["fallbacks"] == 1
    assert ended["episodes"] == 0  # the fallback step is not the learned policy's


def test_a_training_server_answers_with_the_rules_until_its_trainers_first_version(
    inprocess, leduc_states
):
    """A server started with a trainer holds only its own untrained version 0 until the
    trainer's first version arrives: the model seats that would play it get the rules (as a
    fallback: labelled so, not recorded), lone and batched; once version 1 is installed new
    games play it, and a game pinned to version 0 keeps the rules to its end."""
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}

        async def game() -> str:
            created = await client.post("/v1/games", json={"game": GAME, "seats": seats})
            return created.json()["game_id"]

        early = await game()
        lone = await client.post(f"/v1/games/{early}/decide", json={"seat": "0", "state": state})
        item = {"game_id": early, "seat": "0", "state": state}
        batched = await client.post("/v1/decide:batch", json={"items": [item]})
        weights = service.batcher.versions.weights(0)
        service.batcher.versions.install(1, {k: v + 0.01 for k, v in weights.items()})
        later = await game()
        trained = await client.post(f"/v1/games/{later}/decide", json={"seat": "0", "state": state})
        pinned = await client.post(f"/v1/games/{early}/decide", json={"seat": "0", "state": state})
        ends = [
            (await client.post(f"/v1/games/{g}/end", json={"payoffs": {"0": 1, "1": -1}})).json()
            for g in (early, later)
        ]
        return lone.json(), batched.json()["results"][0], trained.json(), pinned.json(), ends

    lone, batched, trained, pinned, ends = inprocess(body, trainer="127.0.0.1:9")
    for answer in (lone, batched, pinned):
        assert answer["fallback"] is True and answer["policy"] == "rules", answer
        assert answer["version"] is None and answer["action"] in state["legal_actions"]
    assert trained["fallback"] is False and trained["policy"] == "learned"
    assert trained["version"] == 1
    assert [e["episodes"] for e in ends] == [0, 1]  # only the trained version's step is kept


def test_a_server_without_a_trainer_still_serves_its_version_0(inprocess, leduc_states):
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}
        created = await client.post("/v1/games", json={"game": GAME, "seats": seats})
        gid = created.json()["game_id"]
        return await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})

    answer = inprocess(body).json()
    assert answer["fallback"] is False and answer["policy"] == "learned"
    assert answer["version"] == 0


def test_batch_request_items_fall_back_when_the_model_fails(inprocess, leduc_states):
    """A batch request's learned items are forwarded at once, not queued: a failing model
    gives every one of them the fallback's answer, and the other items are unaffected."""
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        def broken_act(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the model broke")

        service.batcher.versions.act = broken_act
        ids = []
        for seats in ({"0": "learned", "1": "rules"}, {"0": "random", "1": "rules"}):
            created = await client.post("/v1/games", json={"game": GAME, "seats": seats})
            ids.append(created.json()["game_id"])
        items = [{"game_id": gid, "seat": "0", "state": state} for gid in (*ids, "nope")]
        batch = await client.post("/v1/decide:batch", json={"items": items})
        ended = await client.post(f"/v1/games/{ids[0]}/end", json={"payoffs": {"0": 1, "1": -1}})
        return batch, ended.json(), service.health()

    batch, ended, health = inprocess(body)
    assert batch.status_code == 200
    learned, random_seat, unknown = batch.json()["results"]
    assert learned["fallback"] is True and learned["policy"] == "rules"
    assert learned["action"] in state["legal_actions"] and learned["error"] is None
    assert random_seat["policy"] == "random" and random_seat["fallback"] is False
    assert unknown["error"]["status"] == 404
    assert health["fallbacks"] == 1 and ended["episodes"] == 0


# --- limits and expiry ------------------------------------------------------------------------


def test_body_limit_413(inprocess, leduc_states):
    state = leduc_states[0]

    async def body(client, service) -> Any:
        gid = (await client.post("/v1/games", json={"game": GAME})).json()["game_id"]
        big = {"seat": "0", "state": {**state, "pad": "x" * 5000}}
        declared = await client.post(f"/v1/games/{gid}/decide", json=big)

        async def chunks():  # no Content-Length: counted as it streams
            for _ in range(10):
                yield b" " * 1000

        streamed = await client.post(f"/v1/games/{gid}/decide", content=chunks())
        small = await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
        return declared, streamed, small, service.health()

    declared, streamed, small, health = inprocess(body, max_body_bytes=4096)
    assert declared.status_code == 413 and streamed.status_code == 413
    assert small.status_code in (200, 422)  # handled normally (422: not this seat's turn)
    assert health["refused_too_large"] == 2


def test_overload_503_with_retry_after(inprocess, leduc_states):
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        a = await client.post("/v1/games", json={"game": GAME, "seats": {"0": "learned"}})
        b = await client.post("/v1/games", json={"game": GAME})
        c = await client.post("/v1/games", json={"game": GAME})
        gid = a.json()["game_id"]
        decide = await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
        batch = await client.post(
            "/v1/decide:batch", json={"items": [{"game_id": gid, "seat": "0", "state": state}]}
        )
        return [a, b, c], decide, batch.json(), service.health()

    created, decide, batch, health = inprocess(
        body, max_games=2, max_queued_decisions=0, retry_after_s=3
    )
    assert [r.status_code for r in created] == [201, 201, 503]
    assert created[2].headers["retry-after"] == "3"
    assert decide.status_code == 503 and decide.headers["retry-after"] == "3"
    assert batch["results"][0]["error"]["status"] == 503
    assert health["refused_overload"] == 3


def test_idle_games_expire(inprocess, leduc_states):
    state = _state(leduc_states, 0)

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}
        idle = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()
        busy = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()
        await client.post(f"/v1/games/{idle['game_id']}/decide", json={"seat": "0", "state": state})
        for _ in range(8):  # keep one game busy for 0.8 s
            await asyncio.sleep(0.1)
            await client.post(
                f"/v1/games/{busy['game_id']}/decide", json={"seat": "0", "state": state}
            )
        gone = await client.post(
            f"/v1/games/{idle['game_id']}/decide", json={"seat": "0", "state": state}
        )
        return gone.status_code, service.health(), service.outbox.stats()

    status, health, spool = inprocess(body, idle_game_timeout_s=0.4)
    assert status == 410  # gone: told apart from an id never seen (404)
    assert health["expired_games"] == 1 and health["games_in_flight"] == 1
    assert spool["recorded"] == 0  # an expired game is aborted: nothing recorded


def test_data_dir_holds_spool_and_weights(tmp_path: Path):
    from croupier.config import ServerConfig

    config = ServerConfig(data_dir=tmp_path / "data")
    assert config.spool_path() == tmp_path / "data" / "spool.sqlite3"
    assert config.resolved_weights_dir() == tmp_path / "data" / "weights"
    assert ServerConfig(data_dir=tmp_path, weights_dir=tmp_path / "w").resolved_weights_dir() == (
        tmp_path / "w"
    )


def test_spool_oldest_is_the_longest_waiting(tmp_path):
    spool = EpisodeSpool(tmp_path / "s.sqlite3")
    assert spool.oldest() is None
    episodes = [make_episode(i) for i in range(3)]
    for e in episodes:
        spool.put(e)
    assert spool.oldest()["id"] == episodes[0]["id"]
    spool.ack([episodes[0]["id"]])
    assert spool.oldest()["id"] == episodes[1]["id"]


# --- a retry must be the same request (issue 14, finding 10) -----------------------------------


def test_a_retried_turn_with_another_state_is_refused_not_answered(inprocess, leduc_states):
    """Turn 1 decided with call/raise/fold legal; a "retry" of turn 1 where only fold is legal
    must not get the cached answer (it was 200 with an illegal action): 409, nothing recorded."""
    state = {**_state(leduc_states, 0), "legal_actions": ["call", "raise", "fold"]}
    only_fold = {**state, "legal_actions": ["fold"]}

    async def body(client, service) -> Any:
        seats = {"0": "learned", "1": "rules"}
        gid = (await client.post("/v1/games", json={"game": GAME, "seats": seats})).json()[
            "game_id"
        ]
        url = f"/v1/games/{gid}/decide"
        first = await client.post(url, json={"seat": "0", "state": state, "turn": 1})
        changed = await client.post(url, json={"seat": "0", "state": only_fold, "turn": 1})
        reward = await client.post(
            url, json={"seat": "0", "state": state, "turn": 1, "reward": 2.0}
        )
        batch = await client.post(
            "/v1/decide:batch",
            json={"items": [{"game_id": gid, "seat": "0", "state": only_fold, "turn": 1}]},
        )
        same = await client.post(url, json={"seat": "0", "state": dict(state), "turn": 1})
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        return first, changed, reward, batch.json(), same, ended.json(), service.outbox.take()

    first, changed, reward, batch, same, ended, taken = inprocess(body, seed=5)
    assert first.status_code == 200
    assert changed.status_code == 409 and "another state" in changed.json()["detail"]
    assert reward.status_code == 409  # a different reward is not the same request either
    assert batch["results"][0]["error"]["status"] == 409
    assert same.status_code == 200 and same.json() == first.json()  # a true retry: replayed
    assert ended["episodes"] == 1
    (episode,) = taken
    assert len(episode["actions"]) == 1


# --- weights files on disk (issue 14, finding 7) ------------------------------------------------


def _versions_on_disk(weights_dir: Path, count: int) -> dict[int, dict[str, np.ndarray]]:
    """Versions 1..count installed (so written) by a PolicyVersions; their weights."""
    from croupier.policies.learned import PolicyVersions

    versions = PolicyVersions(ADAPTER, weights_dir=weights_dir, seed=1)
    written = {}
    for v in range(1, count + 1):
        weights = {k: w + v for k, w in versions.weights(0).items()}
        assert versions.install(v, weights)
        written[v] = weights
    return written


def _damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "cut":  # a crash mid-write: the file's first part only
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"not a zip file at all" * 100)
    elif how == "nan":
        with np.load(path) as data:
            weights = {k: data[k] for k in data.files}
        first = next(iter(weights))
        weights[first] = np.full_like(weights[first], np.nan)
        with open(path, "wb") as f:
            np.savez(f, **weights)


@pytest.mark.parametrize("how", ["cut", "empty", "garbage", "nan"])
def test_a_damaged_newest_weights_file_falls_back_to_the_newest_good_one(tmp_path, how):
    from croupier.policies.learned import PolicyVersions

    written = _versions_on_disk(tmp_path, 3)
    _damage(weights_path(tmp_path, 3), how)
    again = PolicyVersions(ADAPTER, weights_dir=tmp_path, seed=1)  # a restart: no exception
    assert again.latest == 2 and again.versions() == [1, 2]
    for name, value in again.weights(2).items():
        np.testing.assert_array_equal(value, written[2][name])
    # Every version damaged: a fresh model (version 0), still no failed start.
    for v in (1, 2):
        _damage(weights_path(tmp_path, v), how)
    assert PolicyVersions(ADAPTER, weights_dir=tmp_path, seed=1).latest == 0


def test_weights_are_on_disk_before_latest_json_names_them(tmp_path, monkeypatch):
    """The file and its directory entry are fsynced before latest.json is renamed into
    place: a crash in between leaves the previous latest.json pointing at a whole file."""
    import os

    from croupier.policies.learned import PolicyVersions

    versions = PolicyVersions(ADAPTER, weights_dir=tmp_path, seed=1)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert versions.install(1, versions.weights(0))
    npz, meta = str(weights_path(tmp_path, 1)), str(tmp_path / "latest.json")
    names_it = events.index(("replace", meta))
    before = events[:names_it]
    assert ("fsync", str(tmp_path / "v00000001.tmp.npz")) in before  # the data
    assert before.index(("replace", npz)) < len(before) - 1
    # the directory, after the weights' rename and before latest.json's
    renamed = before.index(("replace", npz))
    assert ("fsync", str(tmp_path)) in before[renamed:]
    assert events[names_it + 1 :] == [("fsync", str(tmp_path))]  # latest.json's rename too


def test_a_server_with_bad_weights_on_disk_starts_and_serves_the_newest_good_version(tmp_path):
    """A real `croupier serve` on a weights dir whose latest.json names NaN weights (a
    diverged run saved before this check existed), and whose version before that was cut
    short by a crash: it starts, serves version 1, and every answer is legal."""
    import httpx

    from tests.conftest import running_server

    _versions_on_disk(tmp_path, 3)
    _damage(weights_path(tmp_path, 2), "cut")
    _damage(weights_path(tmp_path, 3), "nan")
    state = {
        "hand": "SJ", "public_card": None, "all_chips": [2, 1], "my_chips": 1,
        "legal_actions": ["raise", "fold"], "current_player": 0,
    }  # fmt: skip
    with (
        running_server("--game", GAME, "--weights-dir", str(tmp_path)) as url,
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        seats = {"0": "learned", "1": "rules"}
        created = c.post("/v1/games", json={"game": GAME, "seats": seats}).json()
        assert created["seats"]["0"]["version"] == 1
        answers = [
            c.post(
                f"/v1/games/{created['game_id']}/decide", json={"seat": "0", "state": state}
            ).json()
            for _ in range(20)
        ]
        health = c.get("/healthz").json()
    assert {a["action"] for a in answers} <= {"raise", "fold"}, answers
    assert all(a["version"] == 1 and a["fallback"] is False for a in answers)
    assert health["version"] == 1 and health["fallbacks"] == 0
