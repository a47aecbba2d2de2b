"""One strength score for every tool (`arena/duplicate.py`): duplicate sets, A's payoff less
the deal's par; the rules' own record drawn from the game; minutes below it."""

from __future__ import annotations

import math

import pytest

from croupier.arena.duplicate import score_summary, set_outcome
from croupier.bench.evaluate import duplicate_score, opponent_player, rules_record
from croupier.bench.record import evaluation_spans
from croupier.stats import below_resolution, minutes_below

KUHN = "examples.kuhn.game:KuhnSimulator"


def test_a_set_is_half_of_a_minus_b_in_the_same_seats() -> None:
    # A scored a0 in seat 0 and a1 in seat 1; B, b0 and b1 in the same seats on that deal.
    a0, b1, b0, a1 = 3.0, -1.0, 0.5, 2.0  # not zero-sum
    outcome = set_outcome([([0], [[1]], [a0, b1]), ([1], [[0]], [b0, a1])])
    assert outcome.value == pytest.approx(((a0 - b0) + (a1 - b1)) / 4)
    # zero-sum: A's payoff per hand against B
    zs = set_outcome([([0], [[1]], [2.0, -2.0]), ([1], [[0]], [1.0, -1.0])])
    assert zs.value == pytest.approx((2.0 + -1.0) / 2)
    assert score_summary([1.0]) == (1.0, pytest.approx(math.nan, nan_ok=True))


@pytest.mark.parametrize("game", ["leduc-holdem", KUHN])
def test_the_rules_own_record_is_drawn_from_the_game(game) -> None:
    """The rules in A's seats against the rules: a strength score of 0 (deterministic rules:
    exactly), and their raw payoff against themselves beside it."""
    record = rules_record(game, 60, seed=3)
    assert record["mean"] == 0.0 and record["n"] == 60
    assert math.isfinite(record["payoff"])


def test_a_weaker_player_scores_below_the_rules_on_the_same_deals() -> None:
    rules = opponent_player("leduc-holdem", "rules", 0)
    random = opponent_player("leduc-holdem", "random", 0)
    weak = duplicate_score("leduc-holdem", random, rules, 400, seed=1)
    assert weak["mean"] + weak["ci95"] < 0  # random loses to the rules (about -1.2 a hand)
    # two-player zero-sum: the score is the raw payoff per hand, up to the par's noise
    assert weak["mean"] == pytest.approx(weak["payoff"], abs=3 * weak["ci95"])


def test_minutes_below_counts_until_the_next_point() -> None:
    curve = [
        {"seconds": 0, "mean": -0.5, "ci95": 0.1},  # below: 0..60
        {"seconds": 60, "mean": -0.05, "ci95": 0.1},  # within the CI: not below
        {"seconds": 120, "mean": -0.3, "ci95": 0.1},  # below: 120..180
        {"seconds": 180, "mean": 0.4, "ci95": 0.1},
    ]
    spans = evaluation_spans(curve, end_s=240.0)
    assert minutes_below(spans, 0.0) == pytest.approx(2.0)
    assert minutes_below(spans, -1.0) == 0.0
    # The record's own CI widens the test: -0.3 ± 0.1 against 0 ± 0.3 is not below (the
    # difference's CI, ±0.32, reaches 0); -0.5 ± 0.1 still is.
    assert minutes_below(spans, 0.0, record_ci=0.3) == pytest.approx(1.0)
    # The smallest dip a point shows: the median of the combined half-widths.
    assert below_resolution(spans) == pytest.approx(0.1)
    assert below_resolution(spans, record_ci=0.3) == pytest.approx(math.hypot(0.1, 0.3))
    assert below_resolution([]) is None


def test_a_side_played_alone_reads_its_win_rate_on_the_same_deals() -> None:
    """`side_score` (what `bench exploit --side` measures): A on every seat of one side only.
    Doudizhu's rule peasants beat the rule landlord about half the time (0.503 ± 0.031 over
    1,000 games, ../shared notes); random peasants seldom do (the rule landlord wins 0.93
    against them); the same seed deals the same hands."""
    from croupier.bench.evaluate import side_score

    rules = opponent_player("doudizhu", "rules", 0)
    random = opponent_player("doudizhu", "random", 0)
    even = side_score("doudizhu", rules, rules, 120, "peasant", seed=5)
    weak = side_score("doudizhu", random, rules, 120, "peasant", seed=5)
    assert even["n"] == weak["n"] == 120 and even["side"] == "peasant"
    assert 0.3 < even["win"] < 0.7 and weak["win"] < 0.25
    assert weak["win"] < even["win"] - 2 * max(even["win_ci95"], weak["win_ci95"]) / 1.96
    # a doudizhu side wins 1 a seat, loses 0: the payoff is the win rate
    assert even["payoff"] == pytest.approx(even["win"])
    assert side_score("doudizhu", rules, rules, 120, "peasant", seed=5) == even
    with pytest.raises(ValueError, match="no side 'dealer'"):
        side_score("doudizhu", rules, rules, 2, "dealer")


def test_a_set_on_one_side_is_half_of_a_minus_b_there() -> None:
    """A on the landlord's seat, then B there on the same deal (B on the peasants both times):
    the par is their mean, the set's score half of A - B on that side; only A's hand counts
    for its win rate."""
    a_hand = [1.0, 0.0, 0.0]  # A as landlord won
    b_hand = [0.0, 1.0, 1.0]  # B as landlord lost the same deal
    outcome = set_outcome([([0], [[1, 2]], a_hand)], reference=[b_hand])
    assert outcome.value == pytest.approx((1.0 - 0.0) / 2)
    assert (outcome.wins, outcome.draws, outcome.losses) == (1, 0, 0)
    assert set_outcome([([0], [[1, 2]], b_hand)], reference=[b_hand]).value == 0.0
