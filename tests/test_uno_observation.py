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
from croupier.games.uno import _LAYOUT, MAX_MOVES, UnoAdapter

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
    with pytest.raises(InvalidState):
        ADAPTER.encode(bad)


def test_built_in_uno_is_the_richer_observation_end_to_end():
    adapter = load_adapter("uno")
    assert type(adapter) is UnoAdapter and adapter.describe()["obs_size"] == 353
    env = SeatEnv({"game": "uno", "opponent": "rules", "seed": 0})
    assert env.observation_space["observations"].shape == (353,)
    obs, _ = env.reset()
    seen_history = seen_opp_draw = False
    for _ in range(300):
        state = env.table.state_json(env._seat)
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
    from croupier.games.presets import preset_for
    from croupier.policies.module import ModelSpec
    from croupier.trainer.algo import Hyper, base_config

    p = preset_for("uno")
    assert p is not None and p.policy == "masked"
    spec = ModelSpec(algo=p.algo, hiddens=p.hiddens)
    hyper = Hyper(
        lr=p.lr,
        gamma=p.gamma,
        train_batch_size=p.train_batch_size,
        minibatch_size=p.minibatch_size,
        num_epochs=p.num_epochs,
        entropy_coeff=p.entropy_coeff,
        extra={"lambda_": p.lambda_},
    )
    config = base_config(spec, hyper)  # what the trainer would build from it
    assert (config.lr, config.gamma, config.lambda_) == (p.lr, p.gamma, p.lambda_)
    assert config.train_batch_size_per_learner == p.train_batch_size
    assert (config.minibatch_size, config.num_epochs) == (p.minibatch_size, p.num_epochs)
