"""Recorded episodes: what the learned seats' games turn into for the trainer."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import numpy as np
import pytest
import torch

from croupier.games.leduc import LeducAdapter
from croupier.trainer.episodes import validate_episode
from croupier.trajectories.record import RECORD_VERSION
from croupier.trajectories.recorder import episode_len, episode_versions

GAME = "leduc-holdem"
ADAPTER = LeducAdapter()
ENGINE_TIMEOUT_S = 120


def test_engine_run_records_one_episode_per_hand_the_learned_seat_played(server_factory):
    with server_factory("--game", GAME, "--seats", "learned,rules") as url:
        cmd = [sys.executable, "-m", "croupier", "engine", "--url", url, "--game", GAME]
        cmd += ["--games", "16", "--seats", "learned,rules", "--hands", "300", "--json"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        health = httpx.get(url + "/healthz", timeout=10).json()
    assert summary["hands"] == 300 and summary["errors"] == 0
    assert summary["policies"]["learned"]["n"] == 300
    assert health["games_created"] == 300 and health["games_in_flight"] == 0
    episodes = health["episodes"]
    # One episode per hand in which the learned seat decided at least once: at most one per
    # hand, and the learned seat only misses a hand when the rules seat folds before it acts.
    assert 200 < episodes["recorded"] <= 300
    assert episodes["pending"] == episodes["recorded"] and episodes["dropped"] == 0
    # Every learned decision is a step of exactly one recorded episode ...
    learned = health["decisions"]["learned"]
    assert episodes["pending_steps"] == learned == health["batcher"]["decisions"]
    # ... so the episodes hold all of them, at least one step each.
    assert episodes["recorded"] <= learned
    assert summary["decisions"] == learned + health["decisions"]["rules"]


# --- in-process: the recorder through the decision service --------------------------------


def _states(leduc_states, n):
    """n states for one seat (the service does not check that they follow each other)."""
    picked = [s for s in leduc_states if len(s["legal_actions"]) >= 2][:n]
    assert len(picked) == n
    return picked


def check_episode(state: dict, steps: list[tuple[dict, float | None]], final: float) -> None:
    """`steps`: (game state, reward sent with that decide) in order; `final`: the end payoff."""
    T = len(steps)
    assert episode_len(state) == T and len(state["obs"]) == T + 1
    assert state["terminated"] is True and state["truncated"] is False

    obs = state["obs"]
    masks = state["mask"]
    assert obs.shape == (T + 1, ADAPTER.obs_size) and obs.dtype == np.float32
    assert masks.shape == (T + 1, ADAPTER.num_actions)
    for t, (game_state, _) in enumerate(steps):
        o, m = ADAPTER.encode(game_state)
        np.testing.assert_array_equal(obs[t], o)
        np.testing.assert_array_equal(masks[t], m)
    np.testing.assert_array_equal(obs[T], np.zeros(ADAPTER.obs_size))
    np.testing.assert_array_equal(masks[T], np.ones(ADAPTER.num_actions))

    actions = state["actions"]
    assert actions.shape == (T,) and actions.dtype == np.int64
    assert (masks[np.arange(T), actions] == 1.0).all()

    # RLlib: rewards[t] is what followed action t. A decide's reward is "since the last
    # decision" (so it belongs to the step before); the end payoff belongs to the last step.
    want = np.zeros(T, np.float32)
    for t, (_, reward) in enumerate(steps):
        if t > 0 and reward is not None:
            want[t - 1] += reward
    want[T - 1] += final
    np.testing.assert_allclose(state["rewards"], want)

    logp = state["logp"]
    logits = state["logits"]
    assert logp.shape == (T,) and logits.shape == (T, ADAPTER.num_actions)
    assert (logp <= 0).all()
    log_softmax = torch.log_softmax(torch.from_numpy(logits), -1).numpy()
    np.testing.assert_allclose(logp, log_softmax[np.arange(T), actions], rtol=1e-5, atol=1e-5)
    assert len(episode_versions(state)) == T

    assert state["record"] == RECORD_VERSION and state["extra"] == {}

    # The trainer's conversion to RLlib's episode keeps every step.
    ep = validate_episode(state, ADAPTER.obs_size, ADAPTER.num_actions)
    assert len(ep) == T and ep.is_done
    assert ep.get_return() == pytest.approx(float(want.sum()))
    np.testing.assert_array_equal(ep.get_actions(), actions)
    np.testing.assert_array_equal(ep.get_observations()["observations"], obs)
    np.testing.assert_allclose(ep.get_extra_model_outputs("action_logp"), logp)


def test_recorded_episode_layout(inprocess, leduc_states):
    states = _states(leduc_states, 4)
    rewards = [None, 0.5, None, 0.0]

    async def body(client, service):
        g = service.create_game(GAME, seats={"0": "learned", "1": "rules"})
        gid = g["game_id"]
        for state, reward in zip(states, rewards, strict=True):
            d = await service.decide(gid, "0", state, reward)
            assert d.policy == "learned" and d.action in state["legal_actions"]
            await service.decide(gid, "1", state)  # the rules seat: not recorded
        assert service.outbox.stats()["recorded"] == 0  # nothing before the end
        ended = await service.end_game(gid, {"0": 2.0, "1": -2.0})
        return ended, service.outbox.take()

    ended, episodes = inprocess(body)
    assert ended["episodes"] == 1 and len(episodes) == 1
    ep = episodes[0]
    assert ep["seat"] == "0" and ep["policy"] == "learned"
    assert episode_versions(ep) == [0, 0, 0, 0]
    check_episode(ep, list(zip(states, rewards, strict=True)), final=2.0)
    np.testing.assert_allclose(ep["rewards"], [0.5, 0.0, 0.0, 2.0])


def test_versions_recorded_per_step(inprocess, leduc_states):
    """A `learned@latest` seat follows a new version mid-game; each step keeps its own."""
    states = _states(leduc_states, 3)

    async def body(client, service):
        g = service.create_game(GAME, seats={"0": "learned@latest", "1": "learned"})
        gid = g["game_id"]
        await service.decide(gid, "0", states[0])
        await service.decide(gid, "1", states[0])
        service.versions.install(1, service.versions.weights(0))
        await service.decide(gid, "0", states[1], 0.25)
        await service.decide(gid, "1", states[1], 0.25)
        await service.decide(gid, "0", states[2])
        ended = await service.end_game(gid, {"0": -1.0, "1": 1.0})
        return ended, service.outbox.take()

    ended, episodes = inprocess(body)
    assert ended["episodes"] == 2
    by_seat = {e["seat"]: e for e in episodes}
    assert episode_versions(by_seat["0"]) == [0, 1, 1]  # follows the newest
    assert episode_versions(by_seat["1"]) == [0, 0]  # pinned at creation
    check_episode(by_seat["0"], [(states[0], None), (states[1], 0.25), (states[2], None)], -1.0)
    check_episode(by_seat["1"], [(states[0], None), (states[1], 0.25)], 1.0)
    np.testing.assert_allclose(by_seat["0"]["rewards"], [0.25, 0.0, -1.0])
    np.testing.assert_allclose(by_seat["1"]["rewards"], [0.25, 1.0])


def test_single_step_episode_and_reward_before_first_decision(inprocess, leduc_states):
    (state,) = _states(leduc_states, 1)

    async def body(client, service):
        g = service.create_game(GAME, seats={"0": "learned", "1": "rules"})
        # A reward before the seat's first decision has no step to belong to.
        await service.decide(g["game_id"], "0", state, 7.0)
        await service.end_game(g["game_id"], {"0": 1.5, "1": -1.5})
        return service.outbox.take()

    (ep,) = inprocess(body)
    check_episode(ep, [(state, None)], 1.5)


def test_which_games_are_recorded(inprocess, leduc_states):
    state = _states(leduc_states, 1)[0]
    payoffs = {"0": 1.0, "1": -1.0}

    async def body(client, service):
        async def play(seats, **kw):
            r = await client.post("/v1/games", json={"game": GAME, "seats": seats, **kw})
            assert r.status_code == 201, r.text
            gid = r.json()["game_id"]
            for seat in ("0", "1"):
                d = await client.post(
                    f"/v1/games/{gid}/decide", json={"seat": seat, "state": state}
                )
                assert d.status_code == 200, d.text
            e = await client.post(f"/v1/games/{gid}/end", json={"payoffs": payoffs})
            assert e.status_code == 200, e.text
            return e.json()["episodes"], service.outbox.take()

        return {
            "learned-learned": await play({"0": "learned", "1": "learned"}),
            "no-record": await play({"0": "learned", "1": "learned"}, record=False),
            "frozen-learned": await play({"0": "frozen@0", "1": "learned"}),
            "frozen-rules": await play({"0": "frozen@0", "1": "rules"}),
            "random-rules": await play({"0": "random", "1": "rules"}),
        }

    out = inprocess(body)
    n, eps = out["learned-learned"]
    assert n == 2 and sorted(e["seat"] for e in eps) == ["0", "1"]
    assert out["no-record"][0] == 0 and out["no-record"][1] == []
    n, eps = out["frozen-learned"]
    assert n == 1 and [e["seat"] for e in eps] == ["1"]
    assert out["frozen-rules"] == (0, [])
    assert out["random-rules"] == (0, [])
    for _, eps in out.values():
        for e in eps:
            validate_episode(e, ADAPTER.obs_size, ADAPTER.num_actions)


def test_aborted_and_late_games_record_nothing(inprocess, leduc_states):
    state = _states(leduc_states, 1)[0]

    async def body(client, service):
        g = service.create_game(GAME, seats={"0": "learned", "1": "learned"})
        await service.decide(g["game_id"], "0", state)
        service.abort_game(g["game_id"])
        return service.outbox.stats()

    stats = inprocess(body)
    assert stats["recorded"] == 0 and stats["pending"] == 0


# --- games longer than the trainer takes (issue 14, suspicion a) -------------------------------


def test_a_game_past_the_trainers_episode_limit_ships_in_truncated_pieces(inprocess):
    """The trainer refuses episodes over MAX_EPISODE_LEN steps; a learned seat that plays on
    (10,001 decisions here) used to make one episode of 10,001 steps, refused whole at the
    trainer. It is cut at the limit, truncated (bootstrapped from the state the game went on
    from), counted, and every piece is accepted by the trainer's own check."""
    from croupier.trainer.episodes import MAX_EPISODE_LEN
    from croupier.trajectories.recorder import MAX_EPISODE_STEPS

    assert MAX_EPISODE_LEN == MAX_EPISODE_STEPS == 10_000
    obs_size, num_actions, decisions = 4, 3, 10_001

    def state(i: int) -> dict:
        return {"obs": [float(i % 7), 1.0, 0.0, -1.0], "legal_actions": [i % 3, (i + 1) % 3]}

    async def body(client, service):
        created = await client.post(
            "/v1/games", json={"game": "vector", "seats": {"0": "learned", "1": "random"}}
        )
        gid = created.json()["game_id"]
        for start in range(0, decisions, 4096):
            items = [
                {"game_id": gid, "seat": "0", "state": state(i), "reward": 0.5}
                for i in range(start, min(start + 4096, decisions))
            ]
            r = await client.post("/v1/decide:batch", json={"items": items})
            assert all(x["error"] is None for x in r.json()["results"])
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 3.0, "1": -3}})
        return ended.json(), service.outbox.take(), service.health()

    ended, taken, health = inprocess(
        body, game="vector", obs_size=obs_size, num_actions=num_actions, fallback="random"
    )
    assert health["episodes_cut"] == 1 and ended["episodes"] == 1
    cut, rest = taken
    assert (episode_len(cut), episode_len(rest)) == (10_000, 1)
    assert cut["truncated"] is True and cut["terminated"] is False
    assert rest["terminated"] is True
    assert cut["game_id"] == rest["game_id"]
    assert cut["id"] != rest["id"]
    # The cut piece's last observation is the state the game went on from (decision 10,000).
    last_obs = cut["obs"][-1]
    np.testing.assert_array_equal(last_obs, np.asarray(state(10_000)["obs"], np.float32))
    # Rewards: each decide's reward belongs to the step before; the payoff to the last step.
    assert cut["rewards"][-1] == pytest.approx(0.5)
    assert rest["rewards"][-1] == pytest.approx(3.0)
    for episode in (cut, rest):
        validate_episode(episode, obs_size, num_actions)  # the trainer takes both


@pytest.mark.parametrize("bad_id", ["a\tb", "x\naccepted", "", "x" * 129, "a b", 7])
def test_the_trainer_refuses_episode_ids_that_could_forge_ingest_log_lines(bad_id):
    """The ingest log is `<id>\\t<outcome>` lines (suspicion b): an id with a tab or newline
    would write a line of its own choosing, so the trainer refuses it."""
    from croupier.trainer.episodes import EpisodeRejected
    from croupier.trajectories.recorder import SeatRecorder

    rec = SeatRecorder("g", "0", "learned", episode_id="ok-id")
    rec.add_decision(*ADAPTER.terminal_observation(), 0, -0.5, np.zeros(ADAPTER.num_actions), 0)
    episode = rec.close(1.0, ADAPTER.terminal_observation())
    validate_episode(episode, ADAPTER.obs_size, ADAPTER.num_actions)  # the id as servers make
    with pytest.raises(EpisodeRejected, match="id must"):
        validate_episode({**episode, "id": bad_id}, ADAPTER.obs_size, ADAPTER.num_actions)


def test_the_ingest_log_never_writes_an_unsafe_id(tmp_path):
    """Whoever calls it (a rejected episode's id is logged too), an id with a tab or newline
    never reaches the ingest log's lines."""
    from croupier.trainer.ingest_log import IngestLog, read_ingest_log

    log = IngestLog(tmp_path / "ingest.log")
    log.record([("x\tforged\naccepted", "rejected"), ("ok-1", "accepted"), ("a b", "lag")])
    log.close()
    assert read_ingest_log(tmp_path / "ingest.log") == [("ok-1", "accepted")]
    assert (tmp_path / "ingest.log").read_text() == "ok-1\taccepted\n"


# --- a fallback in the middle of a hand (issue 18, point 4) --------------------------------------


def test_a_fallback_mid_hand_ends_the_fragment_truncated_and_the_next_starts_clean(
    inprocess, leduc_states
):
    """Learned, fallback (the model late), learned: the first fragment ends at the fallback's
    state, truncated, with the reward received up to it on its last step (bootstrapped from
    that state by the learner); the reward that followed the fallback's action is nobody's;
    the next learned decision starts a fresh fragment that ends with the payoff. Before, the
    fallback step was skipped: one 2-step episode whose first step's next observation was a
    state two actions later, with the fallback's consequences on the learned step."""
    s1, s2, s3 = _states(leduc_states, 3)

    async def body(client, service):
        gid = service.create_game(GAME, seats={"0": "learned", "1": "rules"})["game_id"]
        first = await service.decide(gid, "0", s1)
        submit = service.batcher.submit

        def late(obs, mask, version, greedy=False):  # noqa: ARG001  the batcher's answer when the deadline passed first
            future = asyncio.get_running_loop().create_future()
            future.set_result(None)
            return future

        service.batcher.submit = late
        fallback = await service.decide(gid, "0", s2, 0.25)
        service.batcher.submit = submit
        again = await service.decide(gid, "0", s3, -0.5)
        ended = await service.end_game(gid, {"0": 2.0, "1": -2.0})
        return first, fallback, again, ended, service.outbox.take(), service.health()

    first, fallback, again, ended, taken, health = inprocess(body)
    assert not first.fallback and fallback.fallback and not again.fallback
    assert health["fallbacks"] == 1 and ended["episodes"] == 1
    assert health["episodes_ended_by_fallback"] == 1
    cut, rest = taken
    assert cut["game_id"] == rest["game_id"] and cut["id"] != rest["id"]
    assert cut["table"] == rest["table"] == "rules"  # a piece of a hand says where too
    # The fragment before the fallback: one step, truncated at the fallback's state.
    assert episode_len(cut) == 1
    assert cut["truncated"] is True and cut["terminated"] is False
    o1, m1 = ADAPTER.encode(s1)
    o2, m2 = ADAPTER.encode(s2)
    np.testing.assert_array_equal(cut["obs"], np.stack([o1, o2]))
    np.testing.assert_array_equal(cut["mask"], np.stack([m1, m2]))
    assert cut["actions"][0] == first.action_index
    np.testing.assert_allclose(cut["rewards"], [0.25])  # received up to the fallback
    # The fragment after it: the learned decision at s3 to the end; the -0.5 reported with
    # it followed the fallback's action, not a learned one: not on any learned step.
    check_episode(rest, [(s3, None)], final=2.0)
    assert rest["actions"][0] == again.action_index
    # The trainer takes both: the cut one truncated (bootstrapped), the other terminated.
    ep = validate_episode(cut, ADAPTER.obs_size, ADAPTER.num_actions)
    assert ep.is_truncated and not ep.is_terminated and len(ep) == 1
    assert ep.get_return() == pytest.approx(0.25)


def test_a_fallback_before_any_learned_step_or_twice_in_a_row_records_no_empty_fragment(
    inprocess, leduc_states
):
    s1, s2, s3 = _states(leduc_states, 3)

    async def body(client, service):
        gid = service.create_game(GAME, seats={"0": "learned", "1": "rules"})["game_id"]
        submit = service.batcher.submit

        def late(obs, mask, version, greedy=False):  # noqa: ARG001
            future = asyncio.get_running_loop().create_future()
            future.set_result(None)
            return future

        service.batcher.submit = late
        await service.decide(gid, "0", s1)  # nothing recorded yet: nothing to end
        service.batcher.submit = submit
        await service.decide(gid, "0", s2, 1.0)  # the 1.0 followed the fallback: dropped
        service.batcher.submit = late
        await service.decide(gid, "0", s3, 0.5)  # ends the one-step fragment
        await service.decide(gid, "0", s3, 0.125)  # nothing left to end
        ended = await service.end_game(gid, {"0": -1.0, "1": 1.0})  # after a fallback
        assert service.outbox.flush(10)  # the cut fragment's write is not awaited by anyone
        return ended, service.outbox.take(), service.health()

    ended, taken, health = inprocess(body)
    assert health["fallbacks"] == 3 and ended["episodes"] == 0
    assert health["episodes_ended_by_fallback"] == 1
    (cut,) = taken
    assert episode_len(cut) == 1 and cut["truncated"] is True
    np.testing.assert_allclose(cut["rewards"], [0.5])


def test_offline_episodes_are_bounded_in_bytes_oldest_dropped(tmp_path):
    """`--offline-dir` grew with every `record: rules` game (the review); past its byte bound
    the oldest files go, counted, files an earlier run left there included."""
    import time

    from croupier.trajectories.offline import FILE_GLOB, OfflineWriter

    adapter = LeducAdapter()
    steps = [(np.ones(adapter.obs_size, np.float32), np.ones(4, np.float32), 1)] * 4

    def sizes() -> dict[str, int]:
        return {p.name: p.stat().st_size for p in tmp_path.glob(FILE_GLOB)}

    first = OfflineWriter(tmp_path, adapter.terminal_observation(), rows_per_file=8)
    first.add_episode("g0", "0", steps, 1.0)
    first.add_episode("g1", "0", steps, 1.0)  # 8 rows: one file
    (left,) = sizes()
    one = sizes()[left]
    time.sleep(0.01)  # file ages by modification time
    writer = OfflineWriter(
        tmp_path, adapter.terminal_observation(), rows_per_file=8, max_bytes=3 * one + one // 2
    )
    assert writer.files_dropped == 0
    for g in range(12):
        writer.add_episode(f"g{g}", "0", steps, 1.0)  # a file every second episode
    assert writer.files == 6 and writer.files_dropped == 4  # 7 files: the oldest 4 went
    assert left not in sizes() and len(sizes()) == 3
    assert sum(sizes().values()) <= 3 * one + one // 2
    assert writer.stats()["files_dropped"] == 4
