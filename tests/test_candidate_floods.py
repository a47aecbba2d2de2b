"""Floods of big candidate decisions (doudizhu states listing hundreds of real moves).

What learned seats' recorders hold is bounded in bytes: per seat's episode and for all
recording on the server. Past either the seat still answers, the step is not recorded, its
episode so far ends truncated (as where a fallback answered), and it is counted. A big
`decide:batch` forwards off the event loop, so the server keeps answering meanwhile."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from croupier.games.doudizhu import ACTION_COUNTS, ID_2_ACTION, PASS_ID, _counts

HAND = "3334445556667778889T"  # leading with it: 380 real moves, ~245 KB of features a step
MB = 1024 * 1024


def _leading_state() -> dict:
    """Seat 0, the landlord, leads with a 20-card hand: every move it can make is legal."""
    held = _counts(HAND)
    ids = np.flatnonzero((held[None, :] >= ACTION_COUNTS).all(1))
    legal = [ID_2_ACTION[i] for i in ids if i != PASS_ID]
    left = np.array([4] * 13 + [1, 1]) - held
    others = "".join(r * int(n) for r, n in zip("3456789TJQKA2BR", left, strict=True))
    assert len(legal) == 380 and len(others) == 34
    return {"self": 0, "landlord": 0, "current_hand": HAND, "others_hand": others,
            "played_cards": ["", "", ""], "num_cards_left": [20, 17, 17], "trace": [],
            "legal_actions": legal}  # fmt: skip


def _held(recorder) -> int:
    """The bytes a recorder's arrays really hold (not what it counted)."""
    return sum(a.nbytes for part in (recorder.obs, recorder.masks, recorder.logits) for a in part)


def test_a_flood_of_big_decisions_holds_at_most_the_budgets(inprocess):
    """The review's probe, scaled down: `decide:batch`es of a 380-move doudizhu state (a
    ~7 KiB item that kept ~245 KB) into two games' learned seats. Recording holds at most
    its budgets (1 MiB a seat's episode, 1.5 MiB in all) however many come; every item is
    still answered by the learned policy; the steps past a budget are counted, their
    episodes spooled truncated; ending and aborting the games gives every byte back."""
    state = _leading_state()

    async def body(client, service):
        seats = {"0": "learned", "1": "rules", "2": "rules"}
        games = []
        for _ in range(2):
            created = await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})
            games.append(created.json()["game_id"])
        answers, peaks = [], []
        for _ in range(3):
            for gid in games:
                items = [{"game_id": gid, "seat": "0", "state": state}] * 6
                got = await client.post("/v1/decide:batch", json={"items": items})
                assert got.status_code == 200, got.text
                answers += got.json()["results"]
                recorders = [service.games.get(g).recorders["0"] for g in games]
                peaks.append((sum(_held(r) for r in recorders), max(_held(r) for r in recorders)))
        health = (await client.get("/healthz")).json()
        metrics = (await client.get("/metrics")).text
        ended = await client.post(
            f"/v1/games/{games[0]}/end", json={"payoffs": {"0": 1, "1": 0, "2": 0}}
        )
        assert (await client.delete(f"/v1/games/{games[1]}")).status_code == 204
        service.outbox.flush()
        spooled = service.outbox.take()
        return answers, peaks, health, metrics, ended.json(), spooled, service.recording.held

    answers, peaks, health, metrics, ended, spooled, held_after = inprocess(
        body, game="doudizhu", record_max_episode_bytes=1 * MB,
        record_max_total_bytes=3 * MB // 2, data_dir=None,
    )  # fmt: skip
    assert len(answers) == 36
    assert all(a["outcome"] == "ok" and a["policy"] == "learned" for a in answers)
    assert all(a["fallback"] is False for a in answers)
    assert max(total for total, _ in peaks) <= 3 * MB // 2  # ~8.8 MB without a budget
    assert max(one for _, one in peaks) <= 1 * MB
    recording = health["recording"]
    assert recording["steps_over_episode_budget"] > 0
    assert recording["steps_over_total_budget"] > 0
    assert 0 < recording["held_bytes"] <= 3 * MB // 2
    assert "croupier_recording_held_bytes" in metrics
    assert "croupier_recording_steps_over_total_budget_total" in metrics
    # The pieces cut at a budget were spooled truncated, and the ended game's last one.
    assert ended["episodes"] == 1
    assert sum(e["truncated"] for e in spooled) == len(spooled) - 1 >= 2
    assert all(len(e["candidates"]) * 161 * 4 <= 1 * MB + 380 * 161 * 4 for e in spooled)
    assert held_after == 0  # ended and aborted: nothing counted as held any more


def test_an_idle_expired_game_gives_its_bytes_back(inprocess):
    state = _leading_state()

    async def body(client, service):
        seats = {"0": "learned", "1": "rules", "2": "rules"}
        gid = (await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})).json()[
            "game_id"
        ]
        await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
        held = service.recording.held
        assert service.expire_idle_games(0.0) == 1
        return held, service.recording.held

    held, after = inprocess(body, game="doudizhu", data_dir=None)
    assert held > 380 * 161 * 4 and after == 0


def test_a_big_candidate_batch_does_not_hold_the_event_loop(inprocess):
    """The review's `decide:batch` of 572 such items held every request, `/healthz` too, for
    1.2-1.5 s: its forward ran on the event loop. Here the forward is held at a gate until a
    `/healthz` has been answered: only a forward off the loop lets that happen (on the loop,
    the gate times out first and /healthz is answered after the batch)."""
    state = _leading_state()
    entered, gate = threading.Event(), threading.Event()

    async def body(client, service):
        versions = service.versions
        real = versions.act_rows

        def held(*args, **kwargs):
            if sum(len(c) for c in args[2]) > 1000:  # the big batch's forward, not warm-up
                entered.set()
                gate.wait(5.0)
            return real(*args, **kwargs)

        versions.act_rows = held
        seats = {"0": "learned", "1": "rules", "2": "rules"}
        gid = (await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})).json()[
            "game_id"
        ]
        items = [{"game_id": gid, "seat": "0", "state": state}] * 16  # 6,080 candidates
        batch = asyncio.create_task(client.post("/v1/decide:batch", json={"items": items}))
        for _ in range(500):  # until the forward has begun (it may have held the loop)
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        health = await client.get("/healthz")
        answered_while_held = not gate.is_set() and not batch.done()
        gate.set()
        results = (await batch).json()["results"]
        return health.status_code, answered_while_held, results

    status, answered_while_held, results = inprocess(body, game="doudizhu", data_dir=None)
    assert status == 200 and answered_while_held
    assert len(results) == 16 and all(r["policy"] == "learned" for r in results)


def test_a_big_batchs_features_are_built_off_the_event_loop(inprocess):
    """The review: a `decide:batch` of candidate states still held the loop 0.3-1.9 s while
    their features were built (`encode_many`), before any forward. Past `ENCODE_INLINE_MAX`
    they are built on the forward thread: here held at a gate until a `/healthz` has been
    answered, which only a build off the loop allows. A small batch's stay inline."""
    from croupier.sessions.deciding import ENCODE_INLINE_MAX, ENCODE_STATE_CANDIDATES

    state = _leading_state()
    per_item = len(state["legal_actions"]) + ENCODE_STATE_CANDIDATES
    big, small = ENCODE_INLINE_MAX // per_item + 1, 4
    entered, gate = threading.Event(), threading.Event()
    threads: dict[int, str] = {}

    async def body(client, service):
        adapter = service.decider.adapter
        real = adapter.encode_many

        def held(states):
            threads[len(states)] = threading.current_thread().name
            if len(states) == big:
                entered.set()
                gate.wait(5.0)
            return real(states)

        adapter.encode_many = held
        seats = {"0": "learned", "1": "rules", "2": "rules"}
        made = await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})
        gid = made.json()["game_id"]
        small_items = [{"game_id": gid, "seat": "0", "state": state}] * small
        assert (
            await client.post("/v1/decide:batch", json={"items": small_items})
        ).status_code == 200
        items = [{"game_id": gid, "seat": "0", "state": state}] * big
        batch = asyncio.create_task(client.post("/v1/decide:batch", json={"items": items}))
        for _ in range(500):  # until the build has begun (it may have held the loop)
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        health = await client.get("/healthz")
        answered_while_held = not gate.is_set() and not batch.done()
        gate.set()
        results = (await batch).json()["results"]
        return health.status_code, answered_while_held, results

    status, answered_while_held, results = inprocess(body, game="doudizhu", data_dir=None)
    assert status == 200 and answered_while_held
    assert len(results) == big and all(r["policy"] == "learned" for r in results)
    assert threads[big].startswith("croupier-forward") and threads[small] == "MainThread"
