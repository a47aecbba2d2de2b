"""The simulator contract for every built-in game and for Kuhn poker (not in the package), how
`--game` finds a simulator, the arena's duplicate sets for teams, and greedy seats."""

from __future__ import annotations

import random

import numpy as np
import pytest

from croupier.arena.arena import _Score
from croupier.engine.runner import rotate
from croupier.games.candidates import is_candidate_game
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import Simulator
from croupier.policies.learned import PolicyVersions
from croupier.policies.seats import BadPolicySpec, parse_seat_policy, parse_spec
from tests.conftest import play_hands_over_http

KUHN_SIM = "examples.kuhn.game:KuhnSimulator"
KUHN_ADAPTER = "examples.kuhn.adapter:KuhnAdapter"
# Hands per game, few where a hand is long (uno, doudizhu: the test stays short).
GAMES = {"leduc-holdem": 40, "uno": 3, "doudizhu": 2, KUHN_SIM: 60, KUHN_ADAPTER: 10}


def play(table: Simulator, seed: int, rng: random.Random) -> tuple[list[dict], list[float]]:
    """One hand dealt from `seed`, random legal actions from `rng`: every state and the payoffs."""
    table.reset(seed)
    states = []
    for _ in range(5000):
        if table.is_over():
            return states, table.payoffs()
        state = table.state(table.current_player())
        states.append(state)
        table.step(rng.choice(state["legal_actions"]))
    raise AssertionError("the hand did not end")


@pytest.mark.parametrize("game", list(GAMES))
def test_simulator_contract(game: str) -> None:
    table = load_simulator(game)
    assert isinstance(table, Simulator)
    adapter = load_adapter(table.adapter)
    assert adapter.name == table.name and adapter.num_players == table.num_players
    teams = None
    for hand in range(GAMES[game]):
        states, payoffs = play(table, hand, random.Random(hand))
        teams = table.teams()
        # Teams partition the seats.
        assert sorted(s for team in teams for s in team) == list(range(table.num_players))
        assert len(payoffs) == table.num_players and all(type(p) is float for p in payoffs)
        if table.zero_sum:
            assert sum(payoffs) == pytest.approx(0.0)
        for state in states:
            # Exactly what an engine would send: the adapter takes it, its mask lists the legal
            # actions, and each legal action maps to an index inside the mask.
            obs, mask = adapter.encode(state)
            assert obs.shape == (adapter.obs_size,) and np.isfinite(obs).all()
            legal = state["legal_actions"]
            # (a candidate game's `mask` is the legal moves' features: one row per listed
            # move, a copy listed twice (UNO) included)
            listed = len(legal) if is_candidate_game(adapter) else len(set(legal))
            assert len(adapter.legal_indices(mask)) == listed
            assert adapter.legal_count(mask) == listed  # the forced-move check's count
            assert all(adapter.is_legal(mask, adapter.action_index(a, state)) for a in legal)
        # The same seed and the same actions replay the same hand (duplicate deals need it).
        again = load_simulator(game)
        assert play(again, hand, random.Random(hand)) == (states, payoffs)
        assert again.teams() == teams
    # An illegal action is refused.
    table.reset(0)
    with pytest.raises(ValueError):
        table.step("no-such-action")


def test_doudizhu_teams_are_the_landlord_and_the_peasants() -> None:
    table = load_simulator("doudizhu")
    table.reset(3)
    landlord = table.state(table.current_player())["landlord"]
    assert table.teams() == [[landlord], [s for s in range(3) if s != landlord]]
    assert not table.zero_sum


def test_a_game_is_found_by_name_simulator_or_adapter() -> None:
    assert type(load_simulator(KUHN_ADAPTER)).__name__ == "KuhnSimulator"
    assert type(load_simulator(KUHN_SIM)).__name__ == "KuhnSimulator"
    # Each call is a fresh table: concurrent tables must not share a hand.
    assert load_simulator(KUHN_SIM) is not load_simulator(KUHN_SIM)
    # The server takes the simulator's name too: it serves the adapter the simulator names.
    assert load_adapter(KUHN_SIM).name == "kuhn-poker"
    assert load_simulator("leduc-holdem").name == "leduc-holdem"
    for bad in ("chess", "vector", "croupier.games.vector:VectorAdapter", "examples.nope:X"):
        with pytest.raises(ValueError):
            load_simulator(bad)


def test_rotate_moves_each_policy_round_the_seats() -> None:
    assert rotate(["a", "b"], 2, 0) == {"0": "a", "1": "b"}
    assert rotate(["a", "b"], 2, 1) == {"0": "b", "1": "a"}
    assert rotate(["a", "b", "c"], 3, 1) == {"0": "b", "1": "c", "2": "a"}
    # Two policies for three seats: the first moves round, the second fills the rest.
    assert [rotate(["a", "b"], 3, t) for t in range(3)][2] == {"0": "b", "1": "b", "2": "a"}


def test_a_duplicate_set_scores_a_two_player_pair_as_before_and_teams_against_par() -> None:
    # Two players, zero-sum: A's mean over the pair (A in seat 0 scored +2, in seat 1 -1).
    score = _Score(1)
    score.record([([0], [[1]], [2.0, -2.0]), ([1], [[0]], [1.0, -1.0])])
    assert score.values == [pytest.approx((2.0 + -1.0) / 2)]
    assert (score.wins, score.losses) == (1, 1)
    # Doudizhu-like (1 to the winning side, 0 to the other): the landlord wins whoever plays
    # it, so A and B are even on this deal: 0, however the game scores.
    even = _Score(1)
    even.record([([0], [[1, 2]], [1.0, 0.0, 0.0]), ([1, 2], [[0]], [1.0, 0.0, 0.0])])
    assert even.values == [0.0]
    # A wins both roles: positive.
    better = _Score(1)
    better.record([([0], [[1, 2]], [1.0, 0.0, 0.0]), ([1, 2], [[0]], [0.0, 1.0, 1.0])])
    assert better.values[0] > 0 and better.wins == 2


# --- greedy seats ----------------------------------------------------------------------------


def test_greedy_is_a_suffix_of_model_specs_only() -> None:
    assert parse_spec("frozen@12:greedy").greedy and parse_spec("frozen@12:greedy").version == 12
    assert parse_spec("production:greedy").greedy and parse_spec("league:greedy").rollout
    for bad in (
        "rules:greedy",
        "random:greedy",
        "canary:greedy",
        "frozen@1:sample",
        "shadow:greedy",
    ):
        with pytest.raises(BadPolicySpec):
            parse_spec(bad)
    learned = parse_seat_policy("learned:greedy", latest=4)
    assert learned.greedy and not learned.record and learned.label() == "learned:greedy"
    assert parse_seat_policy("learned", latest=4).record  # training seats sample, recorded
    frozen = parse_seat_policy("frozen@-0:greedy", latest=4, loaded=[2, 4])
    assert (frozen.version, frozen.label()) == (4, "frozen@4:greedy")


def test_greedy_rows_take_the_most_likely_legal_action() -> None:
    versions = PolicyVersions(load_adapter("leduc-holdem"), seed=1)
    _, module = versions.resolve(None)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(400, versions.adapter.obs_size)).astype(np.float32)
    mask = (rng.random((400, versions.adapter.num_actions)) < 0.5).astype(np.float32)
    mask[np.arange(400), rng.integers(0, versions.adapter.num_actions, 400)] = 1.0
    greedy = np.arange(400) % 2 == 0
    res = versions.act(module, obs, mask, greedy=greedy)
    best = np.argmax(np.where(mask > 0, res.logits, -np.inf), axis=1)
    np.testing.assert_array_equal(res.actions[greedy], best[greedy])
    assert (mask[np.arange(400), res.actions] == 1).all()
    # The sampled rows do sample: some pick another legal action than the most likely.
    assert (res.actions[~greedy] != best[~greedy]).any()


def test_a_greedy_seat_plays_the_argmax_over_http_and_is_not_recorded(inprocess) -> None:
    async def body(client, service):
        versions = service.versions
        # Random weights of some scale: the argmax depends on the state (an untrained net's
        # argmax is nearly constant: it folds at once, and the check would see one action).
        rng = np.random.default_rng(5)
        weights = {
            k: rng.normal(0, 1, v.shape).astype(v.dtype) for k, v in versions.weights().items()
        }
        versions.install(1, weights)
        seen: list[tuple[int, int]] = []

        def argmax_of(state: dict) -> int:
            obs, mask = versions.adapter.encode(state)
            _, module = versions.resolve(None)
            logits = versions.act(module, obs[None], mask[None], explore=False).logits[0]
            return int(np.argmax(np.where(mask > 0, logits, -np.inf)))

        # Every learned:greedy decision is the argmax; a hand of it records no episode.
        from croupier.engine.rlcard_games import RLCardTable

        table = RLCardTable("leduc-holdem")
        for hand in range(20):
            seats = {"0": "learned:greedy", "1": "frozen@1:greedy"}
            r = await client.post("/v1/games", json={"game": "leduc-holdem", "seats": seats})
            assert r.status_code == 201, r.text
            assert r.json()["seats"]["0"]["policy"] == "learned:greedy"
            game_id = r.json()["game_id"]
            table.reset(hand)
            while not table.is_over():
                p = table.current_player()
                state = table.state(p)
                d = await client.post(
                    f"/v1/games/{game_id}/decide", json={"seat": str(p), "state": state}
                )
                assert d.status_code == 200, d.text
                seen.append((d.json()["action_index"], argmax_of(state)))
                table.step(d.json()["action"])
            payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
            await client.post(f"/v1/games/{game_id}/end", json={"payoffs": payoffs})
        greedy_recorded = service.outbox.stats()["recorded"]
        # The batch route's items take the same path: the argmax too.
        r = await client.post("/v1/games", json={"game": "leduc-holdem",
                                                 "seats": {"0": "learned:greedy"}})  # fmt: skip
        game_id = r.json()["game_id"]
        table.reset(99)
        state = table.state(table.current_player())
        items = [{"game_id": game_id, "seat": str(table.current_player()), "state": state}]
        b = await client.post("/v1/decide:batch", json={"items": items})
        assert b.status_code == 200, b.text
        seen.append((b.json()["results"][0]["action_index"], argmax_of(state)))
        # A sampling learned seat in the same server is recorded (the check can fail).
        await play_hands_over_http(client, "leduc-holdem", 3, lambda h: {"0": "learned"})
        return seen, greedy_recorded, service.outbox.stats()["recorded"]

    seen, greedy_recorded, after = inprocess(body)
    assert len(seen) > 30 and len({want for _, want in seen}) > 1, seen
    assert all(got == want for got, want in seen), seen
    assert greedy_recorded == 0
    assert after > 0
