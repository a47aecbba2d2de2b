"""`bench strength --game doudizhu`'s report: the sides each evaluation seats (sampled, then
the learned side greedy) and the report's text and plot with every part present."""

from __future__ import annotations

import asyncio

from croupier.bench import strength
from croupier.bench.strength import GREEDY_SEAT, StrengthRun, format_report, plot


def test_evaluations_seat_the_learned_side_sampled_then_greedy(monkeypatch):
    seen: list[dict[str, str]] = []

    async def fake_engine(*args, sides, **kwargs):
        seen.append(sides)

    monkeypatch.setattr(strength, "run_engine", fake_engine)
    for learn in ("landlord", "peasants"):
        run = StrengthRun(learn=learn)
        asyncio.run(strength._play("http://127.0.0.1:1", run, None, 10, record=False))
        asyncio.run(strength._play("http://127.0.0.1:1", run, None, 10, False, GREEDY_SEAT))
    assert seen == [
        {"landlord": "learned", "peasant": "rules"},
        {"landlord": "learned:greedy", "peasant": "rules"},
        {"landlord": "rules", "peasant": "learned"},
        {"landlord": "rules", "peasant": "learned:greedy"},
    ]


class _Side:
    def __init__(self, mean: float, ci95: float, n: int):
        self.mean, self.ci95, self.n = mean, ci95, n


class _Summary:
    def __init__(self, sides: dict[str, _Side]):
        self.sides = sides


def test_side_rate_reads_the_policy_it_seated():
    summary = _Summary({"learned as peasant": _Side(0.5, 0.02, 2000),
                        "learned:greedy as peasant": _Side(0.6, 0.02, 2000)})  # fmt: skip
    assert strength._side_rate(summary, "peasants")["win_rate"] == 0.5
    assert strength._side_rate(summary, "peasants", GREEDY_SEAT)["win_rate"] == 0.6


def test_report_text_and_plot_carry_the_greedy_finals(tmp_path):
    point = {"train_s": 60.0, "decisions": 5000, "version": 4, "win_rate": 0.6, "ci95": 0.02,
             "games": 2000}  # fmt: skip
    report = {
        "run": {"game": "doudizhu", "learn": "landlord", "minutes": 1.0},
        "rules_record": 0.503,
        "external": {"setting": "learned landlord (external path)", "curve": [point],
                     "final": point, "final_greedy": {**point, "win_rate": 0.7},
                     "trainer": {"env_steps": 4100, "env_steps_per_s": 68.3,
                                 "trained_share": 0.42}},
        "anchor": {"setting": "learned landlord (in-process)", "curve": [point],
                   "final": point, "final_greedy": {**point, "win_rate": 0.65}},
    }  # fmt: skip
    text = format_report(report)
    assert "0.700 ± 0.020 greedy" in text and "0.650 ± 0.020 greedy" in text, text
    assert text.count("0.600 ± 0.020 sampled") == 2, text
    assert "4,100 steps trained (68/s), 42% of the steps received" in text, text
    plot(report, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_runs_started_together_get_a_directory_each(tmp_path):
    dirs = {strength.new_run_dir(tmp_path, "landlord-20261201-140351") for _ in range(3)}
    assert len(dirs) == 3 and all(d.is_dir() for d in dirs)
