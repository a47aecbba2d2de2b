"""UNO's richer observation: what the table sends, what the adapter reads, what it refuses."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest

from croupier.engine.rlcard_games import UNO_MOVES_SENT, RLCardTable
from croupier.engine.seat_env import SeatEnv
from croupier.games.base import InvalidState
from croupier.games.registry import load_adapter
from croupier.games.uno import _LAYOUT, MAX_MOVES, UnoAdapter, UnoCandidatesAdapter

ADAPTER = UnoAdapter()

STATE = {
    "hand": ["r-1", "r-1", "b-wild", "g-skip"],
    "target": "g-wild",  # printed green, recoloured blue: `color` says so
    "played_cards": ["y-5", "y-skip", "b-wild"],
    "legal_actions": ["b-wild", "r-wild", "g-wild", "y-wild"],
    "num_cards": [4, 9],
    "num_players": 2,
    "current_player": 0,
    "color": "b",
    "moves": [[0, "y-5", "y"], [1, "draw", "r"], [1, "y-skip", "y"], [1, "b-wild", "y"]],
}


def block(obs: np.ndarray, name: str) -> np.ndarray:
    start, size = _LAYOUT[name]
    return obs[start : start + size]


def changed(**kw) -> dict:
    s = copy.deepcopy(STATE)
    for k, v in kw.items():
        if v is ...:
            del s[k]
        else:
            s[k] = v
    return s


def table_states(hands: int, seed: int):
    """(table, state) at every decision of random-play UNO hands."""
    table, rng = RLCardTable("uno"), random.Random(seed)
    for hand in range(hands):
        table.reset(seed=seed + hand)
        while not table.is_over():
            state = table.state_json(table.current_player())
            yield table, state
            table.step(rng.choice(state["legal_actions"]))


def test_table_sends_the_colour_in_force():
    recoloured = 0
    for table, state in table_states(hands=15, seed=1):
        json.dumps(state)  # plain JSON
        assert state["color"] == table.env.game.round.target.color
        recoloured += state["color"] != state["target"][0]
    assert recoloured  # RLCard's `target` alone gets a recoloured wild's colour wrong


def test_table_records_each_move():
    table, rng = RLCardTable("uno"), random.Random(0)
    table.reset(seed=5)
    expected = []
    for _ in range(30):
        if table.is_over():
            break
        player, state = table.current_player(), table.state_json(table.current_player())
        assert state["moves"] == expected[-UNO_MOVES_SENT:]
        action = rng.choice(state["legal_actions"])
        expected.append([player, action, state["color"]])
        table.step(action)
    assert len(expected) > UNO_MOVES_SENT  # the cut to the latest moves was exercised
    table.reset(seed=6)
    assert table.state_json(table.current_player())["moves"] == []  # a new hand starts clean


def test_real_states_encode_with_counts_colour_and_hand():
    n = 0
    for _, state in table_states(hands=20, seed=7):
        obs, mask = ADAPTER.encode(state)
        assert obs.shape == (ADAPTER.obs_size,) and obs.dtype == np.float32
        assert np.isfinite(obs).all()
        me = state["current_player"]
        mine, theirs = state["num_cards"][me], state["num_cards"][1 - me]
        assert np.flatnonzero(block(obs, "my_count")).tolist() == [min(mine, 17)]
        assert np.flatnonzero(block(obs, "opp_count")).tolist() == [min(theirs, 17)]
        assert block(obs, "counts").tolist() == pytest.approx([mine / 20, theirs / 20])
        assert np.flatnonzero(block(obs, "color")).tolist() == ["rgby".index(state["color"])]
        wild = sum(c[2:] in ("wild", "wild_draw_4") for c in state["hand"])
        assert block(obs, "hand").sum() == pytest.approx(
            0.5 * (len(state["hand"]) - wild) + 0.25 * wild
        )
        assert block(obs, "played").sum() > 0 or not state["played_cards"]
        assert sorted(np.flatnonzero(mask)) == sorted(
            {ADAPTER.action_index(a, state) for a in state["legal_actions"]}
        )
        np.testing.assert_array_equal(ADAPTER.check(state), mask)  # a rules seat's check
        n += 1
    assert n > 300


def test_opponent_history_features():
    obs, _ = ADAPTER.encode(STATE)
    # The colour in force is `color`, not the target's printed one; the trait is the target's.
    assert np.flatnonzero(block(obs, "color")).tolist() == [2]  # blue
    assert np.flatnonzero(block(obs, "trait")).tolist() == [13]  # wild
    # Seat 1 drew facing red, then made two more moves: 1 / (1 + 2).
    assert block(obs, "opp_drew_on").tolist() == pytest.approx([1 / 3, 0, 0, 0])
    # Its newest move chose blue for a wild: weight 1.
    assert block(obs, "opp_wild_color").tolist() == pytest.approx([0, 0, 1, 0])
    recent = block(obs, "recent").reshape(8, -1)
    assert recent[0, :2].tolist() == [0, 1]  # newest first: the opponent's
    assert recent[0, 2:6].tolist() == [0, 0, 1, 0] and recent[0, 6 + 13] == 1  # b-wild
    assert recent[2, -1] == 1 and recent[2, 2:-1].sum() == 0  # the draw
    assert recent[3, :2].tolist() == [1, 0] and recent[3, 2] == 0  # my y-5
    assert recent[3, 2 + 3] == 1 and recent[3, 6 + 5] == 1
    assert recent[4:].sum() == 0  # no more moves: zeros
    # Seen from the other seat, "me" and "opponent" swap and my own draws do not count.
    other, _ = ADAPTER.encode(changed(current_player=1))
    assert block(other, "opp_drew_on").sum() == 0
    assert block(other, "recent").reshape(8, -1)[0, :2].tolist() == [1, 0]
    assert np.flatnonzero(block(other, "opp_count")).tolist() == [4]


def test_colour_and_moves_are_optional():
    obs, _ = ADAPTER.encode(changed(color=..., moves=...))
    assert np.flatnonzero(block(obs, "color")).tolist() == [1]  # the target's printed green
    assert block(obs, "recent").sum() == block(obs, "opp_drew_on").sum() == 0


@pytest.mark.parametrize(
    "bad",
    [
        changed(num_cards=...),
        changed(current_player=...),
        changed(played_cards=...),
        changed(num_cards=[4]),
        changed(num_cards=[4, -1]),
        changed(num_cards=[4, "9"]),
        changed(num_cards=[4, True]),
        changed(current_player=2),
        changed(current_player="0"),
        changed(played_cards="y-5"),
        changed(played_cards=["y-5", "p-5"]),
        changed(played_cards=["y-5", 3]),
        changed(played_cards=["r-1"] * 109),
        changed(color="p"),
        changed(color=["b"]),
        changed(moves=[[1, "draw", ["r"]]]),
        changed(moves="draw"),
        changed(moves=[[1, "draw"]]),
        changed(moves=[[2, "draw", "r"]]),
        changed(moves=[[1, "shout", "r"]]),
        changed(moves=[[1, "draw", "purple"]]),
        changed(moves=[{"seat": 1}]),
        changed(moves=[[1, "draw", "r"]] * (MAX_MOVES + 1)),
    ],
)
def test_malformed_states_are_refused(bad):
    with pytest.raises(InvalidState) as encoded:
        ADAPTER.encode(bad)
    # A rules seat's check (no features) refuses the same, with the same words.
    with pytest.raises(InvalidState) as checked:
        ADAPTER.check(bad)
    assert str(checked.value) == str(encoded.value)
    candidates = UnoCandidatesAdapter()
    with pytest.raises(InvalidState):
        candidates.candidate_count(bad)


def test_the_masked_head_keeps_the_richer_observation_end_to_end():
    game = "croupier.games.uno:UnoAdapter"
    adapter = load_adapter(game)
    assert type(adapter) is UnoAdapter and adapter.describe()["obs_size"] == 353
    env = SeatEnv({"game": game, "opponent": "rules", "seed": 0})
    assert env.observation_space["observations"].shape == (353,)
    obs, _ = env.reset()
    seen_history = seen_opp_draw = False
    for _ in range(300):
        state = env.table.state_json(env.table.current_player())
        want, mask = adapter.encode(state)
        np.testing.assert_array_equal(obs["observations"], want)
        np.testing.assert_array_equal(obs["action_mask"], mask)
        seen_history |= block(want, "recent").any()
        seen_opp_draw |= block(want, "opp_drew_on").any()
        action = int(np.flatnonzero(mask)[0])
        obs, _, done, _, _ = env.step(action)
        if done:
            obs, _ = env.reset()
    assert seen_history and seen_opp_draw


def test_training_preset_names_real_settings():
    """`croupier train --game uno` and the in-process anchor start from the preset."""
    from croupier.games.presets import preset_for
    from croupier.trainer.algo import anchor_config, base_config, training_defaults

    p = preset_for("uno")
    assert p is not None
    spec, hyper = training_defaults("uno")
    assert (spec.algo, spec.hiddens, spec.score_hidden) == (p.algo, p.hiddens, p.score_hidden)
    adapter = load_adapter("uno")
    for config in (
        base_config(spec, hyper, adapter.observation_space, adapter.action_space),
        anchor_config("uno", spec, hyper),
    ):
        assert (config.lr, config.gamma, config.lambda_) == (p.lr, p.gamma, p.lambda_)
        assert config.train_batch_size_per_learner == p.train_batch_size
        assert (config.minibatch_size, config.num_epochs) == (p.minibatch_size, p.num_epochs)
        assert config.entropy_coeff == p.entropy_coeff
    # Another algorithm keeps the preset's network, not its (PPO-measured) settings.
    appo_spec, appo_hyper = training_defaults("uno", "appo")
    assert appo_spec.hiddens == p.hiddens and appo_hyper.train_batch_size == 128


# --- scored candidates ----------------------------------------------------------------------


def test_candidates_describe_each_legal_action_with_the_hand_and_the_opponent():
    from croupier.games.uno import CANDIDATE_SIZE, UnoCandidatesAdapter

    adapter = UnoCandidatesAdapter()
    state = changed(
        hand=["r-1", "r-1", "r-skip", "b-wild"],
        target="r-5",
        color="r",
        legal_actions=["r-1", "r-1", "r-skip", "r-wild", "b-wild", "g-wild", "y-wild"],
        # the opponent drew facing blue, two of its moves ago
        moves=[[1, "draw", "b"], [1, "g-3", "g"], [1, "g-4", "g"], [0, "g-4", "g"]],
    )
    obs, cands = adapter.encode_candidates(state)
    np.testing.assert_array_equal(obs, UnoAdapter().encode(state)[0])
    assert cands.shape == (7, CANDIDATE_SIZE) and cands.dtype == np.float32
    red_one, red_one_again, skip, red_wild, blue_wild = cands[:5]
    np.testing.assert_array_equal(red_one, red_one_again)  # copies: the same candidate
    assert red_one[1] == 1 and red_one[5 + 1] == 1  # red, trait "1"
    assert skip[5 + 10] == 1  # trait "skip"
    # coloured cards of its colour left after it: two reds after a red; 3 reds kept by a wild
    assert red_one[20] == pytest.approx(0.2) and red_wild[20] == pytest.approx(0.3)
    assert red_one[21] == pytest.approx(0.25) and skip[21] == 0  # the other "1"; no other skip
    assert blue_wild[22] == pytest.approx(1 / 3) and red_wild[22] == 0  # drew on blue
    assert adapter.candidate_value(2, state) == "r-skip"
    with pytest.raises(InvalidState):
        adapter.candidate_value(7, state)
    draw = changed(legal_actions=["draw"])
    assert adapter.encode_candidates(draw)[1][0, 0] == 1.0  # the draw flag, nothing else
    assert adapter.encode_candidates(draw)[1][0, 1:].sum() == 0


def test_built_in_uno_scores_candidates_through_seat_env():
    """`--game uno` is the candidate adapter: in SeatEnv its padded candidate space, and
    `payoff_vs` plays it."""
    from croupier.bench.evaluate import payoff_vs
    from croupier.games.uno import UnoCandidatesAdapter
    from croupier.policies.learned import PolicyVersions
    from croupier.policies.module import ModelSpec

    game = "uno"
    assert type(load_adapter(game).inner) is UnoCandidatesAdapter
    env = SeatEnv({"game": game, "seed": 0})
    obs, _ = env.reset()
    assert set(obs) == {"observations", "candidates", "candidate_mask"}
    for _ in range(200):
        state = env.table.state_json(env.table.current_player())
        want_obs, want_cands = env.adapter.encode(state)
        k = len(state["legal_actions"])
        assert obs["candidate_mask"].sum() == k == len(want_cands)
        np.testing.assert_array_equal(obs["candidates"][:k], want_cands)
        np.testing.assert_array_equal(obs["observations"], want_obs)
        obs, _, done, _, _ = env.step(k - 1)
        if done:
            obs, _ = env.reset()
    spec = ModelSpec(algo="ppo", hiddens=[16], score_hidden=8)
    weights = PolicyVersions(env.adapter, spec).weights(0)
    result = payoff_vs(game, spec, weights, hands=20, seed=3)
    assert result["n"] == 20 and -1.0 <= result["mean"] <= 1.0
    # an adapter named by path is that adapter, not the table's default (`uno`)
    basic = SeatEnv({"game": "croupier.games.uno:UnoBasicAdapter", "seed": 0})
    assert basic.reset()[0]["observations"].shape == (240,)
