"""The rules' clone (`trainer/rules_clone.py`): the rules' decisions recorded through the
simulator and encoded as served, the clone fitted to them, and its checks on fresh deals (its
agreement with the rules, its value offset and scale on first steps, its own level against the
rules, team by team)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from croupier.policies.module import ModelSpec
from croupier.trainer import rules_anchor as ra
from croupier.trainer import rules_clone as rc

GAME = "leduc-holdem"


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_the_clones_greedy_action_is_the_rules_on_fresh_leduc_states():
    """Leduc's rules are deterministic: the clone's most likely action is theirs, on states
    it was not fitted on (rules against random play, other deals), and on its own data."""
    from croupier.trainer.pretrain import rules_agreement

    spec = ModelSpec(algo="ppo", hiddens=[64, 64])
    anchor = ra.RulesAnchor(clone_decisions=4000, clone_epochs=10, smoothing=0.05)
    weights, report = rc.distil(GAME, spec, anchor, seed=3)
    assert report["decisions"] >= 4000 and report["greedy_agreement"] == 1.0
    # Label smoothing keeps some entropy where there is a choice (a sharp clone has ~0).
    assert 0.02 < report["entropy"] < 0.5
    served = rc.served_weights(GAME, spec, weights)
    fresh = rules_agreement(GAME, spec, served, hands=300, seed=11)
    assert fresh["decisions"] > 300 and fresh["agreement"] == 1.0


def test_rules_decisions_are_encoded_as_served_with_payoff_returns():
    from croupier.games.registry import load_adapter

    data = rc.rules_decisions(GAME, 200, seed=1, gamma=0.5, deviate=0.0)
    adapter = load_adapter(GAME)
    assert len(data) >= 200 and data.obs.shape == (len(data), adapter.obs_size)
    assert all(mask[a] == 1.0 for mask, a in zip(data.legal, data.actions, strict=True))
    # Leduc pays whole chips; discounted by the seat's own later decisions (gamma 0.5).
    finals = {float(abs(r)) for r in data.returns}
    assert any(v > 0 and v == int(v) for v in finals) and any(v != int(v) for v in finals)


def test_first_steps_only_keeps_each_seats_first_decision_with_its_discounted_return():
    whole = rc.rules_decisions(GAME, 300, seed=2, gamma=0.5, deviate=0.0)
    first = rc.rules_decisions(GAME, 300, seed=2, gamma=0.5, deviate=0.0, first_steps=True)
    # At most a row per seat a hand (leduc: two seats), so many more hands for the rows.
    assert len(first) >= 300 and first.hands <= len(first) <= 2 * first.hands
    assert first.hands > 2 * whole.hands
    # The same deals and play: the first hand's first two decisions are both seats' first,
    # with the same returns as in the whole record.
    np.testing.assert_array_equal(first.obs[:2], whole.obs[:2])
    np.testing.assert_allclose(first.returns[:2], whole.returns[:2])
    finals = {float(abs(r)) for r in first.returns}
    assert any(v != int(v) for v in finals)  # discounted by the seat's later decisions


def test_the_clones_report_holds_its_value_offset_on_fresh_first_steps():
    spec = ModelSpec(algo="ppo", hiddens=[16])
    anchor = ra.RulesAnchor(clone_decisions=1000, clone_max_decisions=1000, clone_epochs=2)
    _, report = rc.distil(GAME, spec, anchor, seed=4)
    assert report["value_offset_rows"] >= 200  # a fifth of the clone's decisions
    # And the clone's own level against the rules, each team's, the worst the floor.
    teams = report["clone_gain_by_team"]
    assert {t["team"] for t in teams} == {0, 1} and sum(t["rows"] for t in teams) >= 200
    assert report["clone_gain"] == min(t["gain"] for t in teams)
    assert report["clone_gain_se"] > 0
    assert np.isfinite(report["value_offset"]) and report["value_offset_se"] > 0
    # Leduc's payoffs are a few chips: an offset far beyond that is no offset.
    assert abs(report["value_offset"]) < 3.0


def test_a_player_plays_one_team_a_hand_against_the_rules_and_only_its_rows_are_kept():
    rules = rc.rules_decisions(GAME, 400, seed=3, deviate=0.0, first_steps=True)
    assert rules.teams is None

    def first_legal(state: dict) -> str:
        return state["legal_actions"][0]

    mine = rc.rules_decisions(GAME, 400, seed=3, deviate=0.0, first_steps=True,
                              player=first_legal)  # fmt: skip
    assert mine.teams is not None and len(mine.teams) == len(mine)
    assert set(mine.teams.tolist()) == {0, 1}  # leduc: each seat a team, drawn at random
    # One row a hand (the player's seat's first decision), labelled with its own move.
    assert mine.hands == len(mine)
    assert all(mine.legal[i][a] > 0 for i, a in enumerate(mine.actions))
    assert not np.array_equal(mine.actions, rules.actions[: len(mine)])
    # Its seat's payoffs: a player that always takes the first legal move (call, check or
    # fold) loses to the rules on the whole.
    assert mine.returns.mean() < 0


class _ValueOnly:
    """A module stand-in whose value at each first step is given: the scale's statistics
    alone, not a network's fit."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = torch.from_numpy(values.astype(np.float32))

    def forward_train(self, batch: dict) -> dict:
        return {}

    def compute_values(self, batch: dict, embeddings: object = None) -> torch.Tensor:
        return self.values


def _first_steps(returns: np.ndarray) -> rc.Decisions:
    n = len(returns)
    return rc.Decisions(obs=np.zeros((n, 2), np.float32), legal=[np.ones(2, np.float32)] * n,
                        actions=np.zeros(n, np.int64), returns=returns.astype(np.float32),
                        candidates=False, hands=n, seconds=0.0)  # fmt: skip


def test_the_clones_value_is_scaled_by_what_it_tracks_of_the_returns():
    rng = np.random.default_rng(0)
    n = 4000
    knows = rng.normal(0, 0.6, n)  # what a deal says before anyone plays
    returns = 0.2 + knows + rng.normal(0, 0.6, n)
    # A value that tracks it: scale ~1, the residual the returns' own noise.
    fair = rc.first_step_offset(_ValueOnly(knows), _first_steps(returns))
    assert fair["value_scale"] == pytest.approx(1.0, abs=0.06)
    assert fair["value_offset"] == pytest.approx(0.2, abs=0.04)
    assert fair["value_offset_se"] * n**0.5 == pytest.approx(0.6, abs=0.03)
    # An overfitted value (what it knows plus as much noise of its own): scaled by about half,
    # its residual below both the raw one and the returns' own spread.
    noisy = knows + rng.normal(0, 0.6, n)
    scaled = rc.first_step_offset(_ValueOnly(noisy), _first_steps(returns))
    raw_sd = float((returns - noisy).std())
    assert scaled["value_scale"] == pytest.approx(0.5, abs=0.07)
    assert scaled["value_offset_se"] * n**0.5 < min(raw_sd, float(returns.std())) - 0.05
    # A value that knows nothing: scaled to about 0, never below it; a constant one: 1.
    blind = rc.first_step_offset(_ValueOnly(-rng.normal(0, 0.6, n)), _first_steps(returns))
    assert 0.0 <= blind["value_scale"] < 0.06
    flat = rc.first_step_offset(_ValueOnly(np.full(n, 0.3)), _first_steps(returns))
    assert flat["value_scale"] == 1.0
    assert flat["value_offset"] == pytest.approx(returns.mean() - 0.3, abs=1e-4)


def test_keeping_a_share_of_the_decisions_draws_them_from_more_deals():
    whole = rc.rules_decisions(GAME, 600, seed=5, deviate=0.0)
    kept = rc.rules_decisions(GAME, 600, seed=5, deviate=0.0, keep=0.25)
    # As many decisions (the last hand played out), from about four times as many hands.
    assert len(kept) >= 600 and len(kept) < 600 + 2 * 10
    assert kept.hands > 3 * whole.hands
    # Still the rules' moves, encoded as served, labelled with the hands' payoffs.
    assert all(mask[a] == 1.0 for mask, a in zip(kept.legal, kept.actions, strict=True))
    assert np.isfinite(kept.returns).all() and kept.returns.std() > 0
    with pytest.raises(ValueError, match="keep"):
        rc.rules_decisions(GAME, 10, keep=0.0)


def test_without_clone_value_the_value_head_learns_the_mean_return_alone():
    """`--no-clone-value`: the policy is fitted as before, the critic knows nothing (on UNO and
    crazy eights the fitted one explained less of fresh hands' returns than their mean)."""
    from dataclasses import replace

    from croupier.games.registry import load_adapter

    spec = ModelSpec(algo="ppo", hiddens=[32])
    data = rc.rules_decisions(GAME, 3000, seed=8)
    anchor = ra.RulesAnchor(clone_decisions=3000, clone_epochs=10)
    adapter = load_adapter(GAME)
    fitted, _ = rc.fit_clone(adapter, spec, anchor, data)
    blind, _ = rc.fit_clone(adapter, spec, replace(anchor, clone_value=False), data)
    fitted_v, blind_v = rc.clone_values(fitted, data), rc.clone_values(blind, data)
    # Leduc's returns spread by chips (sd ~6) and the fitted value follows some of it; the
    # blind one stays at their mean.
    assert fitted_v.std() > 0.1 and blind_v.std() < 0.05 * fitted_v.std()
    assert blind_v.mean() == pytest.approx(float(data.returns.mean()), abs=0.05)
    # The policy alike: the rules' moves, greedy, on its own data.
    for module in (fitted, blind):
        assert rc.clone_fit(module, data)["greedy_agreement"] > 0.95


def test_the_clones_budget_doubles_while_it_still_misses_the_rules_on_fresh_decisions():
    """`grow_clone`: a clone too small for its first budget (one epoch of 600 decisions)
    misses Leduc's rules on fresh decisions; its budget doubles, on new deals, while a
    doubling still cuts the misses, up to the most allowed; the report says each round."""
    spec = ModelSpec(algo="ppo", hiddens=[8])
    anchor = ra.RulesAnchor(clone_decisions=600, clone_max_decisions=4800, clone_epochs=1)
    _, report = rc.distil(GAME, spec, anchor, seed=5)
    rounds = report["rounds"]
    assert len(rounds) >= 2 and rounds[0]["misses"] > rc.CLONE_MISS_TOLERANCE, rounds
    # Each round's budget doubles (the hands' last decisions a few more), up to the most.
    sizes = [r["decisions"] for r in rounds]
    budgets = [600 * 2**k for k in range(len(rounds))]
    assert all(b <= n < b + 40 for b, n in zip(budgets, sizes, strict=True)), sizes
    assert budgets[-1] <= 4800 and report["decisions"] == sizes[-1]
    # Leduc's rules are deterministic: asked again they answer the same.
    assert all(r["rules_misses"] == 0.0 and r["held_out"] > 0 for r in rounds)
    # It stopped for the reason it gives, and only the last round stopped.
    assert all("stop" not in r for r in rounds[:-1])
    stop, last = rounds[-1]["stop"], rounds[-1]
    assert stop in ("close to the rules", "a doubling no longer helps", "the most decisions")
    if stop == "the most decisions":
        assert budgets[-1] == 4800
    elif stop == "close to the rules":
        assert last["misses"] <= rc.CLONE_MISS_TOLERANCE
    else:
        assert len(rounds) >= 2 and last["misses"] > rc.CLONE_MISS_TOLERANCE
    # The checks' rows follow the first budget, not the grown one.
    assert report["value_offset_rows"] < sizes[-1] // rc.CALIBRATION_SHARE or len(rounds) == 1


def test_the_clone_stops_growing_close_to_the_rules_when_a_doubling_no_longer_helps_or_at_most():
    tol = rc.CLONE_MISS_TOLERANCE

    def r(misses: float, rules: float = 0.0) -> dict:
        return {"misses": misses, "rules_misses": rules}

    def m(missed: int, of: int = 1000, first: int = 0) -> np.ndarray:
        out = np.zeros(of, bool)
        out[first : first + missed] = True
        return out

    def stop(rounds: list[dict], missed: list[np.ndarray], next_budget: int = 40) -> str | None:
        return rc.stop_growing(rounds, missed, next_budget, most=160)

    assert stop([r(0.1)], [m(100)]) is None  # a first round that misses: one doubling more
    assert stop([r(tol / 2)], [m(10)]) == "close to the rules"
    # A bot that draws disagrees with itself: only the misses beyond that count.
    assert stop([r(0.2, rules=0.2 - tol / 2)], [m(200)]) == "close to the rules"
    # The doubling helped: 100 missed, then 70 of them; then the next budget is past the most.
    assert stop([r(0.1), r(0.07)], [m(100), m(70)]) is None
    assert stop([r(0.1), r(0.07)], [m(100), m(70)], next_budget=320) == "the most decisions"
    # It did not: 100 missed, then 95 others, 5 of them new (within the noise).
    assert stop([r(0.1), r(0.095)], [m(100), m(95, first=10)]) == "a doubling no longer helps"


def test_a_bot_that_draws_is_told_apart_by_asking_it_twice():
    """UNO's `uno-rule-v1` picks at random among its equal choices; asked the same state
    again it answers otherwise now and then. Leduc's rules never do (above)."""
    data = rc.rules_decisions("uno", 400, seed=2, deviate=0.0, ask_twice=True)
    assert data.again is not None and len(data.again) == len(data)
    assert (data.again != data.actions).mean() > 0.0
