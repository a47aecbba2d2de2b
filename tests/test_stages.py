"""The decide path's stage timers (`croupier/stages.py`) and `bench serve`'s stage table."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from rlcard.games.doudizhu.game import DoudizhuGame

from croupier import stages
from croupier.api.components import build_components
from croupier.bench.serve import Result, format_stage_table, stage_costs, stage_table
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import to_json


@pytest.fixture
def timing():
    stages.reset()
    stages.enable()
    yield
    stages.disable()
    stages.reset()


def test_stages_add_up_per_thread_and_between_snapshots(timing):
    before = stages.snapshot()
    t0 = stages.clock()
    sum(i * i for i in range(20_000))  # some CPU to time
    stages.add(stages.FORWARD, t0)
    stages.decisions(3)
    done = []

    def elsewhere() -> None:  # another thread's stages land in its own list, then are summed
        stages.add(stages.FORWARD, stages.clock())
        done.append(1)

    import threading

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    diff = stages.difference(stages.snapshot(), before)
    assert diff["decisions"] == 3 and diff["calls"]["forward"] == 2 and done
    assert diff["ns"]["forward"] > 0 and diff["ns"]["parse"] == 0
    assert set(diff["ns"]) == set(stages.STAGES)


def test_a_snapshot_is_written_on_request(timing, tmp_path: Path):
    old = signal.getsignal(signal.SIGUSR1)
    try:
        stages.enable(tmp_path / "stages.json")
        stages.decisions(2)
        first = stages.request_snapshot(os.getpid(), tmp_path / "stages.json", 1, timeout_s=10)
        stages.decisions(5)
        second = stages.request_snapshot(os.getpid(), tmp_path / "stages.json", 2, timeout_s=10)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert (first["seq"], second["seq"]) == (1, 2)
    assert stages.difference(second, first)["decisions"] == 5


def _state(game: DoudizhuGame, player: int) -> dict:
    state = to_json(game.get_state(player))
    state["legal_actions"] = state["actions"]
    return state


def test_a_served_doudizhu_game_times_every_stage_of_its_seats(timing, tmp_path: Path):
    """Learned and rules seats through the server's own parts: each stage they pass is timed
    (parse and response are the HTTP routes', not met here)."""
    torch.set_num_threads(1)
    parts = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path))

    async def play() -> None:
        await parts.start()
        try:
            game = DoudizhuGame()
            game.np_random = np.random.RandomState(4)
            _, player = game.init_game()
            seats = {"0": "learned", "1": "rules", "2": "rules"}
            parts.service.create_game("doudizhu", "g", seats)
            while not game.is_over():
                decision = await parts.service.decide("g", str(player), _state(game, player))
                _, player = game.step(decision.action)
        finally:
            await parts.stop()

    asyncio.run(play())
    ns = stages.snapshot()["ns"]
    timed = {"encode", "validate", "state_features", "candidate_features", "rules",
             "batch_assembly", "forward", "sampling", "record"}  # fmt: skip
    assert {k for k, v in ns.items() if v > 0} == timed
    assert ns["encode"] >= ns["validate"] + ns["state_features"] + ns["candidate_features"]


def test_the_stage_table_has_every_stage_and_the_rest():
    profile = {"decisions": 10, "ns": dict.fromkeys(stages.STAGES, 0), "calls": {}}
    profile["ns"] |= {"parse": 300_000, "encode": 1_000_000, "validate": 600_000,
                      "forward": 2_000_000}  # fmt: skip
    costs = stage_costs([profile], cpu_us=500.0)
    assert list(costs) == [*stages.STAGES, "other"]
    assert costs["parse"] == 30.0 and costs["validate"] == 60.0
    # The rest: the process's CPU less the top-level stages (validate is inside encode).
    assert costs["other"] == pytest.approx(500 - 30 - 100 - 200)
    result = Result("c", "learned", 100, 900.0, 900.0, 1.0, 9.0, 500.0, 0, 100.0, 0.9, 0.1, costs)
    assert stage_table([result]) == {"100 games, think 100 ms": {"c": costs}}
    text = format_stage_table([result])
    assert "  validate" in text and "other" in text and "total (/proc)" in text


def test_chained_stages_share_their_clock_reads(timing):
    """`add` returns the clock it read: the next stage starts there, so chained stages add up
    to exactly the time from the first start to the last read, with one read a stage."""
    before = stages.snapshot()["ns"]
    t0 = stages.clock()
    t = t0
    for stage in (stages.VALIDATE, stages.STATE_FEATURES, stages.CANDIDATE_FEATURES):
        sum(i * i for i in range(2_000))
        t_next = stages.add(stage, t)
        assert t_next >= t
        t = t_next
    ns = stages.snapshot()["ns"]
    spent = {s: ns[s] - before[s] for s in ("validate", "state_features", "candidate_features")}
    assert all(v > 0 for v in spent.values())
    assert sum(spent.values()) == t - t0


def test_the_http_stages_are_timed_on_the_fast_lane(timing, inprocess, leduc_states, tmp_path):
    """`http_in` (the lane's stack up to the handler) and `http_out` (the answer sent) are
    timed once a decide, beside the handler's own stages; a request off the lane is not."""

    async def body(client, service):
        created = await client.post(
            "/v1/games", json={"game": "leduc-holdem", "seats": {"0": "random", "1": "rules"}}
        )
        game_id = created.json()["game_id"]
        state = next(s for s in leduc_states if s.get("current_player", 0) == 0)
        before = stages.snapshot()
        r = await client.post(f"/v1/games/{game_id}/decide", json={"seat": "0", "state": state})
        assert r.status_code == 200, r.text
        after = stages.snapshot()
        await client.get("/healthz")  # off the lane
        return stages.difference(after, before), stages.difference(stages.snapshot(), after)

    decide, healthz = inprocess(body, data_dir=tmp_path)
    assert decide["calls"]["http_in"] == 1 and decide["calls"]["http_out"] == 1
    assert decide["ns"]["http_in"] > 0 and decide["ns"]["http_out"] > 0
    assert decide["calls"]["parse"] == 1 and decide["calls"]["response"] == 1
    assert healthz["calls"]["http_in"] == 0 and healthz["calls"]["http_out"] == 0
