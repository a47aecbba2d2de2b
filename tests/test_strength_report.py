"""`bench strength --game doudizhu`'s report: the sides each evaluation seats (sampled, then
the learned side greedy) and the report's text and plot with every part present."""

from __future__ import annotations

import asyncio

import pytest

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
        [{"landlord": "learned", "peasant": "rules"}],
        [{"landlord": "learned:greedy", "peasant": "rules"}],
        [{"landlord": "rules", "peasant": "learned"}],
        [{"landlord": "rules", "peasant": "learned:greedy"}],
    ]


def test_league_tables_train_beside_the_rules_and_never_enter_an_evaluation(monkeypatch):
    seen: list[list[dict[str, str]]] = []

    async def fake_engine(*args, sides, **kwargs):
        seen.append(sides)

    monkeypatch.setattr(strength, "run_engine", fake_engine)
    selfplay = {"landlord": "learned", "peasant": "learned"}
    past = {"landlord": "learned", "peasant": "league"}
    run = StrengthRun(learn="landlord", league_sides=[selfplay, past])
    asyncio.run(strength._play("http://127.0.0.1:1", run, 60.0, None, record=True))
    asyncio.run(strength._play("http://127.0.0.1:1", run, None, 10, record=False))
    rules = {"landlord": "learned", "peasant": "rules"}
    assert seen == [[rules, selfplay, past], [rules]]


@pytest.mark.parametrize(
    "mix, match",
    [({"landlord": "learned"}, "name landlord and peasant"),
     ({"landlord": "learned", "peasant": "strong"}, "unknown seat policy"),
     ({"landlord": "learned", "peasant": "frozen@x"}, "frozen@N")],
)  # fmt: skip
def test_a_bad_league_table_is_refused_before_any_run(mix, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        strength.bench_strength(StrengthRun(league_sides=[mix]), tmp_path)
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_league_tables_are_for_doudizhu(tmp_path):
    run = StrengthRun(game="leduc-holdem", league_sides=[{"landlord": "learned",
                                                           "peasant": "league"}])  # fmt: skip
    with pytest.raises(ValueError, match="doudizhu only"):
        strength.bench_strength(run, tmp_path)


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
                                 "trained_share": 0.42},
                     "minutes_below": 0.0},
    }  # fmt: skip
    text = format_report(report)
    assert "0.700 ± 0.020 greedy" in text, text
    assert text.count("0.600 ± 0.020 sampled") == 1, text
    assert "external: 0.0 min significantly below the rules' record" in text, text
    assert "4,100 steps trained (68/s), 42% of the steps received" in text, text
    plot(report, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_the_report_says_what_its_minutes_count(tmp_path):
    """The minutes are training from the served clone; the setup before them (the trainer,
    the rules' clone: ~5 minutes of a 30-minute run on a four-seat game) is reported apart,
    in the text, on the plot's axis and in the JSON, never as "everything counted"."""
    point = {"seconds": 0.0, "mean": -0.06, "ci95": 0.045, "n": 100}
    final = {"mean": 0.03, "ci95": 0.01, "payoff": 0.03, "n": 2000}
    report = {
        "run": {"game": "x.y:Z", "minutes": 30.0},
        "score": "the strength score",
        "clock": strength.CLOCK,
        "rules_record": 0.0,
        "rules_record_detail": {"mean": 0.0, "ci95": 0.0, "payoff": 0.0},
        "external": {"setting": "learned seat", "curve": [point, {**point, "seconds": 600.0}],
                     "minutes_below": 10.0, "below_resolution": 0.045, "setup_s": 290.0,
                     "env_steps": 1000, "final": {"sampled": final, "greedy": final}},
    }  # fmt: skip
    text = format_report(report)
    assert "30 min of training from the served clone; 4.8 min of setup before it" in text, text
    assert "a point shows a dip past ±0.045" in text, text
    assert "setup" in strength._clock_label(report) and "4.8 min" in strength._clock_label(report)
    assert "everything counted" not in strength._clock_label(report)
    strength.plot_simulated(report, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_runs_started_together_get_a_directory_each(tmp_path):
    dirs = {strength.new_run_dir(tmp_path, "landlord-20261201-140351") for _ in range(3)}
    assert len(dirs) == 3 and all(d.is_dir() for d in dirs)


def test_doudizhu_refuses_an_in_process_anchor_before_any_run(tmp_path):
    """Doudizhu's in-process anchor is an experiment (experiments/strength_anchors.py):
    `--anchor` on doudizhu is a clear error, not a flag silently ignored."""
    with pytest.raises(ValueError, match="experiments.strength_anchors"):
        strength.bench_strength(StrengthRun(anchor=True), tmp_path)
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_the_rules_record_seats_the_rules_in_the_learned_side(monkeypatch):
    seen: list[dict[str, str]] = []

    async def fake_engine(*args, sides, **kwargs):
        seen.append(sides)

    monkeypatch.setattr(strength, "run_engine", fake_engine)
    for learn in ("landlord", "peasants"):
        asyncio.run(strength._play("http://127.0.0.1:1", StrengthRun(learn=learn), None, 10,
                                   False, "rules"))  # fmt: skip
    assert seen == [[{"landlord": "rules", "peasant": "rules"}]] * 2


def test_training_settings_reach_the_trainer():
    """`bench strength --hiddens ... --lr ...`: `croupier train` gets them as its own flags
    (each one a setting of `croupier train` that lands where the preset's value would)."""
    import dataclasses

    from croupier.cli import train_options
    from croupier.config import TrainSettings

    # None of them the preset's: each must land as given.
    train = {"hiddens": [96, 48], "score_hidden": 40, "lr": 2e-4, "train_batch_size": 2048,
             "minibatch_size": 128, "num_epochs": 2, "entropy_coeff": 0.003}  # fmt: skip
    flags = strength.train_flags(train)
    assert flags[:4] == ["--hiddens", "96,48", "--score-hidden", "40"]
    # Each flag is one of `croupier train`'s settings; given, it overrides the preset.
    given = {flags[i][2:].replace("-", "_"): flags[i + 1] for i in range(0, len(flags), 2)}
    fields = {f.name: f for f in dataclasses.fields(TrainSettings)}
    assert set(given) <= set(fields)
    kwargs = {k: v if k == "hiddens" else type(train[k])(v) for k, v in given.items()}
    opts = train_options(TrainSettings(game="doudizhu", **kwargs))
    assert (opts.hiddens, opts.score_hidden) == ([96, 48], 40)
    h = opts.hyper
    assert (h.lr, h.train_batch_size, h.minibatch_size, h.num_epochs, h.entropy_coeff) == (
        2e-4, 2048, 128, 2, 0.003)  # fmt: skip

    with pytest.raises(ValueError, match="unknown training settings"):
        strength.train_flags({"gamma": 0.9})
    # The overrides land through the one place that applies them, which refuses a name it
    # does not know (neither the network's nor a `Hyper` field).
    from croupier.games.presets import preset_for
    from croupier.trainer.algo import training_defaults

    spec, hyper = training_defaults("doudizhu", None, {"hiddens": (64,), "gamma": 0.9})
    kept = preset_for("doudizhu").score_hidden  # not given: the preset's
    assert (spec.hiddens, spec.score_hidden, hyper.gamma) == ([64], kept, 0.9)
    with pytest.raises(ValueError, match="unknown training settings"):
        training_defaults("doudizhu", None, {"nope": 1})
