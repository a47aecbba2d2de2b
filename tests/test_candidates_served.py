"""Scored candidate actions served and recorded: doudizhu through the server's own parts
(in-process), two learned peasants at one table, the learner's exact recomputation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rlcard.games.doudizhu.game import DoudizhuGame

from croupier.api.components import build_components
from croupier.config import ServerConfig
from croupier.engine.rlcard_games import to_json
from croupier.games.candidates import CandidateGame
from croupier.policies.module import logits_agree
from croupier.sessions.errors import Unprocessable
from croupier.sessions.games import team_payoffs
from croupier.trainer.episodes import EpisodeRejected, validate_episode

GAMES = 4


def _state(game: DoudizhuGame, player: int) -> dict[str, Any]:
    state = to_json(game.get_state(player))
    state["legal_actions"] = state["actions"]
    return state


async def _play(service: Any, game_id: str, seed: int, batch: bool) -> dict[str, float]:
    """One doudizhu game (RLCard's engine) to its end through the service; its payoffs."""
    game = DoudizhuGame()
    game.np_random = np.random.RandomState(seed)
    _, player = game.init_game()
    landlord = game.round.landlord_id
    # A random landlord in odd games: the peasants win those (a rules landlord beats untrained
    # peasants), so partners with unequal reported payoffs are seen.
    opponent = "random" if seed % 2 else "rules"
    seats = {str(s): opponent if s == landlord else "learned" for s in range(3)}
    service.create_game("doudizhu", game_id, seats)
    while not game.is_over():
        state = _state(game, player)
        if batch:  # decide:batch's path: forwarded together, unqueued
            decision = (await service.decide_many([(game_id, str(player), state, None)]))[0]
        else:  # a lone decide: queued on the batcher with the other games' decisions
            decision = await service.decide(game_id, str(player), state)
        assert decision.action in state["legal_actions"]
        _, player = game.step(decision.action)
    won = game.winner_id == landlord
    # The engine credits only one peasant with the peasants' win (within doudizhu's payoff
    # range, 0..1): partners must still end with the same (team) payoff.
    payoffs = {str(s): 0.0 for s in range(3)}
    payoffs[str(landlord)] = 1.0 if won else 0.0
    if not won:
        payoffs[str((landlord + 1) % 3)] = 1.0
    await service.end_game(game_id, payoffs)
    return {**payoffs, "landlord": str(landlord)}


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(1)
    parts = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path_factory.mktemp("s")))

    async def run() -> dict[str, Any]:
        await parts.start()
        try:
            payoffs = await asyncio.gather(
                *(_play(parts.service, f"g{i}", i, batch=i % 2 == 1) for i in range(GAMES))
            )
            return {
                "payoffs": dict(zip([f"g{i}" for i in range(GAMES)], payoffs, strict=True)),
                "episodes": parts.outbox.take(),
                "stats": parts.batcher.stats(),
            }
        finally:
            await parts.stop()

    out = asyncio.run(run())
    out["parts"] = parts
    return out


def test_doudizhu_is_served_by_candidate_scoring(played):
    adapter = played["parts"].adapter
    assert isinstance(adapter, CandidateGame)
    assert "candidates" in adapter.observation_space.spaces
    # Lone decides of concurrent games were forwarded together: one forward for all their
    # candidates, whatever each state's count.
    assert played["stats"]["max_batch_seen"] >= 2


def test_two_learned_partners_each_record_an_episode_with_the_team_payoff(played):
    episodes = played["episodes"]
    assert len(episodes) == 2 * GAMES  # each learned seat is its own episode
    by_game: dict[str, list[dict[str, Any]]] = {}
    for e in episodes:
        by_game.setdefault(e["game_id"], []).append(e)
    for game_id, pair in by_game.items():
        payoffs = played["payoffs"][game_id]
        landlord = payoffs["landlord"]
        assert sorted(e["seat"] for e in pair) == sorted(
            s for s in payoffs if s not in (landlord, "landlord")
        )
        team = 0.5 if payoffs[landlord] == 0 else 0.0  # the peasants' mean of (1, 0) or (0, 0)
        for e in pair:
            assert e["record"] == 2 and e["policy"] in ("learned", "learned@latest")
            assert e["rewards"][-1] == team  # not 1.0 / 0.0 as the engine reported
            assert (e["rewards"][:-1] == 0).all()
            counts = e["candidate_counts"]
            assert len(counts) == len(e["actions"]) + 1 and counts[-1] == 1
            assert (e["actions"] < counts[:-1]).all()
            assert e["candidates"].shape == (counts.sum(), adapter_size(played))


def adapter_size(played: dict[str, Any]) -> int:
    return played["parts"].adapter.candidate_size


def test_learner_recomputes_the_served_logits(played):
    parts = played["parts"]
    adapter, versions = parts.adapter, parts.versions
    spec = versions.spec.rl_module_spec(adapter.observation_space, adapter.action_space)
    learner = spec.build()  # the training module: what the learner's forward runs
    learner.load_state_dict({k: torch.as_tensor(v) for k, v in versions.weights().items()})
    for record in played["episodes"]:
        episode = validate_episode(
            record, adapter.obs_size, adapter.num_actions, adapter.candidate_size
        )
        obs = episode.get_observations(slice(0, len(episode)))  # the acting steps
        # Padded to the episode's own largest count (an update pads its episodes alike).
        width = int(record["candidate_counts"].max())
        assert obs["candidates"].shape[1:] == (width, adapter.candidate_size)
        # Doudizhu's features are exact in float16: the learner keeps them so (half the bytes).
        assert obs["candidates"].dtype == np.float16
        with torch.no_grad():
            out = learner.forward_train({"obs": {k: torch.from_numpy(v) for k, v in obs.items()}})
        logits = out["action_dist_inputs"].numpy()
        real = obs["candidate_mask"] > 0
        # To float32 rounding (`LOGITS_RTOL`): the learner's batch is not the served one.
        assert logits_agree(logits[real], record["logits"])
        logp = torch.log_softmax(torch.from_numpy(logits), -1).numpy()
        chosen = logp[np.arange(len(record["actions"])), record["actions"]]
        np.testing.assert_allclose(chosen, record["logp"], atol=1e-5)
        np.testing.assert_array_equal(
            episode.get_extra_model_outputs("action_dist_inputs", slice(0, len(episode)))[real],
            record["logits"],
        )


def test_candidates_float16_cannot_hold_stay_float32(played):
    """The learner's float16 candidates are an exact copy or not used: one feature float16
    would round (0.1) keeps the episode's candidates float32, every value as sent."""
    adapter = played["parts"].adapter
    record = dict(played["episodes"][0])
    record["candidates"] = record["candidates"].copy()
    record["candidates"][0, -1] = 0.1
    episode = validate_episode(
        record, adapter.obs_size, adapter.num_actions, adapter.candidate_size
    )
    obs = episode.get_observations(slice(0, len(episode) + 1))
    assert obs["candidates"].dtype == np.float32
    real = obs["candidate_mask"] > 0
    np.testing.assert_array_equal(obs["candidates"][real], record["candidates"])


def test_a_bad_candidate_record_is_refused(played):
    adapter = played["parts"].adapter
    good = played["episodes"][0]
    size = (adapter.obs_size, adapter.num_actions, adapter.candidate_size)
    bad_action = {**good, "actions": good["candidate_counts"][:-1].copy()}  # one past the end
    fewer = {**good, "candidates": good["candidates"][:-1]}
    for record in (bad_action, fewer):
        with pytest.raises(EpisodeRejected):
            validate_episode(record, *size)
    with pytest.raises(EpisodeRejected):  # a candidate record where fixed-size ones go
        validate_episode(good, adapter.obs_size, adapter.num_actions)


def test_candidate_decisions_refuse_bad_states(played, tmp_path: Path):
    service = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path)).service
    game = DoudizhuGame()
    game.np_random = np.random.RandomState(7)
    _, player = game.init_game()
    service.create_game("doudizhu", "b", {"0": "random", "1": "random", "2": "rules"})
    state = _state(game, player)
    for broken in ({**state, "legal_actions": []}, {**state, "legal_actions": ["ZZ"]}):
        with pytest.raises(Unprocessable):
            asyncio.run(service.decide("b", str(player), broken))
    decision = asyncio.run(service.decide("b", str(player), state))
    assert decision.action == state["legal_actions"][decision.action_index]


def test_partners_share_the_payoff_the_engine_gave_one_of_them(tmp_path: Path):
    service = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path)).service
    game = DoudizhuGame()
    game.np_random = np.random.RandomState(3)
    _, player = game.init_game()
    landlord = str(game.round.landlord_id)
    peasants = [str(s) for s in range(3) if str(s) != landlord]
    service.create_game("doudizhu", "t", {landlord: "rules", **dict.fromkeys(peasants, "learned")})

    async def two_rounds() -> None:
        nonlocal player
        # until each peasant made a real choice (a forced pass is answered, not recorded)
        recorders = service.games.get("t").recorders
        for _ in range(60):
            if all(len(recorders[p]) for p in peasants) or game.is_over():
                break
            decision = await service.decide("t", str(player), _state(game, player))
            _, player = game.step(decision.action)
        assert all(len(recorders[p]) for p in peasants)

    async def play() -> list[dict[str, Any]]:
        await service.batcher.start()
        try:
            await two_rounds()
        finally:
            await service.batcher.stop()
        # The engine credits only the peasant who went out (an engine's own convention).
        await service.end_game("t", {landlord: 0.0, peasants[0]: 1.0, peasants[1]: 0.0})
        return service.outbox.take()

    episodes = asyncio.run(play())
    assert sorted(e["seat"] for e in episodes) == sorted(peasants)
    assert [float(e["rewards"][-1]) for e in episodes] == [0.5, 0.5]  # the team's mean


def test_team_payoffs_average_partners_only():
    assert team_payoffs({"0": 2.0, "1": 2.0, "2": 0.0}, [["0"], ["1", "2"]]) == {
        "0": 2.0, "1": 1.0, "2": 1.0}  # fmt: skip
    assert team_payoffs({"0": 1.0, "1": -1.0}, []) == {"0": 1.0, "1": -1.0}


def test_rules_seats_are_answered_without_features_unless_observed(tmp_path: Path, monkeypatch):
    """A rules seat needs the state checked and its legal moves, not the features (doudizhu:
    ~60% of an encode); a seat the rollout observes (shadow, `record: rules`) gets them."""
    service = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path)).service
    inner = service.adapter.inner
    built: list[int] = []
    features = inner.state_features
    monkeypatch.setattr(inner, "state_features", lambda p: built.append(1) or features(p))
    parsed: list[int] = []  # once a decision: the rules bot acts on the state the decider checked
    parse = inner.parse
    monkeypatch.setattr(inner, "parse", lambda state: parsed.append(1) or parse(state))
    rollout = service.decider.rollout
    for observed in (False, True):
        monkeypatch.setattr(rollout, "observes", lambda game_id, seat, seen=observed: seen)
        game_id = f"observed-{observed}"
        service.create_game("doudizhu", game_id, dict.fromkeys(("0", "1", "2"), "rules"))
        game = DoudizhuGame()
        game.np_random = np.random.RandomState(5)
        _, player = game.init_game()
        built.clear()
        parsed.clear()
        for _ in range(9):
            state = _state(game, player)
            decision = asyncio.run(service.decide(game_id, str(player), state))
            assert decision.policy == "rules" and not decision.fallback
            assert decision.action == state["legal_actions"][decision.action_index]
            _, player = game.step(decision.action)
        assert len(built) == (9 if observed else 0)
        assert len(parsed) == 9
        with pytest.raises(Unprocessable):  # checked all the same: a move not in the hand
            asyncio.run(service.decide(game_id, str(player), {**state, "legal_actions": ["BR"]}))
