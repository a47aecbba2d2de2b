"""RLCard's DMC trainer as a doudizhu anchor (`experiments/strength_dmc.py`): which weights it
evaluates, and (long tier) a real half-minute run trained, stopped and evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.strength_dmc import _complete_sets, _prune, evaluate, train


def _touch(d: Path, *names: str) -> None:
    for n in names:
        (d / n).write_bytes(b"")


def test_only_complete_sets_count_and_pruning_keeps_the_newest(tmp_path):
    _touch(tmp_path, "0_100.pth", "1_100.pth", "2_100.pth", "0_900.pth", "1_900.pth",
           "2_900.pth", "0_1200.pth", "1_1200.pth", "model.tar", "notes.pth")  # fmt: skip
    sets = _complete_sets(tmp_path)
    assert sorted(sets) == [100, 900]  # 1200 is still being written: seat 2 missing
    assert [p.name for p in sets[900]] == ["0_900.pth", "1_900.pth", "2_900.pth"]
    _prune(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["0_1200.pth", "0_900.pth", "1_1200.pth", "1_900.pth", "2_900.pth",
                    "model.tar", "notes.pth"]  # fmt: skip


@pytest.mark.long
@pytest.mark.integration  # RLCard's trainer and its actors are processes
def test_a_short_run_is_stopped_on_time_and_both_sides_evaluated(tmp_path):
    pytest.importorskip("git", reason="RLCard's DMC trainer needs gitpython")
    trained = train(0.75, tmp_path, actors=1)
    assert trained["train_s"] < 0.75 * 60 + 30  # stopped at its deadline (+ the kill)
    assert trained["frames"] > 0
    assert len(_complete_sets(tmp_path / "dmc")) == 1  # older sets pruned as it ran
    for side in ("landlord", "peasants"):
        result = evaluate(trained["weights"], side, games=40)
        assert result["games"] == 40 and 0 <= result["win_rate"] <= 1
        assert evaluate(trained["weights"], side, games=40) == result  # the same deals
