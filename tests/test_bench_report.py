"""The benchmark reports' arithmetic (the benchmarks themselves run with `make bench`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from croupier.bench.serve import Result, medians, ratios


def _result(scenario: str, games: int, per_s: float, p99: float) -> Result:
    return Result(scenario, scenario, games, per_s, per_s, 1.0, p99, 100.0, 0)


def test_serve_medians_over_rounds_and_ratios_within_a_round():
    rounds = [
        [_result("a", 100, 4000, 30), _result("c", 100, 3600, 20)],
        [_result("a", 100, 6000, 10), _result("c", 100, 5700, 25)],
        [_result("a", 100, 5000, 50), _result("c", 100, 4000, 15)],
    ]
    merged = {r.scenario: r for r in medians([r for rnd in rounds for r in rnd])}
    assert merged["a"].decisions_per_s == 5000 and merged["a"].p99_ms == 30
    assert merged["c"].decisions_per_s == 4000 and merged["c"].p99_ms == 20
    per_round = sorted(ratios(rnd)["100"]["c/a"] for rnd in rounds)
    assert per_round == [0.8, 0.9, 0.95]


def test_serve_ratios_of_two_processes_and_ray_serve_and_scenario_choice():
    from croupier.bench.serve import SCENARIOS, select

    rnd = [_result("c", 100, 4000, 20), _result("c2", 100, 7000, 20), _result("ray", 100, 1000, 9)]
    assert ratios(rnd) == {"100": {"c2/c": 1.75, "c/ray": 4.0}}  # no floor run: no X/a
    assert ratios([_result("c", 100, 4000, 20), _result("ray", 100, 0, 9)]) == {}  # no 1/0
    assert [s.name for s in select(["ray", "c"])] == ["c", "ray"]  # the bench's order
    assert select(None) == [s for s in SCENARIOS if s.name not in ("r", "c-torch")]
    with pytest.raises(ValueError, match="unknown scenarios"):
        select(["c", "nope"])


def test_serve_takes_another_game_seat_0_deciding_and_no_ray_for_it():
    from croupier.bench.serve import SCENARIOS, _sample_states, skip_reason

    states = _sample_states(8, "doudizhu")
    assert len(states) == 8 and all(s["self"] == 0 for s in states)
    assert all(s["legal_actions"] for s in states)
    ray = next(s for s in SCENARIOS if s.name == "ray")
    assert "serves leduc-holdem only" in (skip_reason(ray, "doudizhu") or "")
    floor = next(s for s in SCENARIOS if s.name == "a")
    assert skip_reason(floor, "doudizhu") is None


def test_serve_load_points_stay_apart_and_only_saturated_ones_make_ratios():
    def paced(scenario: str, per_s: float, p99: float, think: float) -> Result:
        return Result(scenario, scenario, 100, per_s, per_s, 1.0, p99, 100.0, 0, think)

    runs = [
        _result("a", 100, 4000, 50), _result("c", 100, 3000, 60),
        paced("a", 900, 4, 100.0), paced("c", 880, 6, 100.0),
        paced("a", 910, 5, 100.0), paced("c", 890, 7, 100.0),
    ]  # fmt: skip
    merged = {(r.scenario, r.think_ms): r for r in medians(runs)}
    assert len(merged) == 4
    assert merged[("c", 100.0)].p99_ms == 6.5 and merged[("c", 0.0)].p99_ms == 60
    # Below saturation decisions/s is the load offered (here 880 vs 900): not a ratio.
    assert ratios(runs) == {"100": {"c/a": 0.75}}
    assert ratios([r for r in runs if r.think_ms]) == {}


def test_serve_medians_carry_the_cores_servers_and_load_generator_used():
    runs = [
        Result("c2", "c2", 100, 6000, 6000, 1.0, 20, 260.0, 0, server_cores=1.70, load_cores=0.25),
        Result("c2", "c2", 100, 6500, 6500, 1.0, 20, 255.0, 0, server_cores=1.73, load_cores=0.26),
        Result("c2", "c2", 100, 6300, 6300, 1.0, 20, 250.0, 0, server_cores=1.71, load_cores=0.24),
    ]
    (merged,) = medians(runs)
    assert (merged.server_cores, merged.load_cores) == (1.71, 0.25)


@pytest.mark.integration  # starts a process
def test_serve_counts_the_load_generators_cpu_once_it_exits():
    """wrk's CPU is read from the children reaped around its run (`RUSAGE_CHILDREN`)."""
    import subprocess
    import sys

    from croupier.bench.serve import _children_cpu_seconds

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    before = _children_cpu_seconds()
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert 0.25 <= _children_cpu_seconds() - before < 5.0


def test_overload_rates_are_offered_and_trained_steps_between_the_first_and_last_update():
    from croupier.bench.overload import _rates

    timeline = [
        {"time": 100.0, "steps_received": 1_000, "steps_sampled": 500},
        {"time": 110.0, "steps_received": 4_000, "steps_sampled": 1_000},
        {"time": 120.0, "steps_received": 7_000, "steps_sampled": 2_500},
    ]
    rates = _rates(timeline)
    assert rates == {"offered_steps_per_s": 300.0, "trained_steps_per_s": 100.0, "ratio": 3.0}
    assert _rates(timeline[:1])["ratio"] is None  # one update: no rate yet


def test_serve_sets_adapters_side_by_side_with_their_cpu_ratio():
    from croupier.bench.serve import per_adapter, select

    both = ["doudizhu", "croupier.games.doudizhu_cards:DoudizhuCardsCandidates"]
    runs = per_adapter(select(["a", "c", "ray"]), both)
    assert [sc.name for sc in runs] == [
        "a@doudizhu",
        "a@DoudizhuCardsCandidates",
        "c@doudizhu",
        "c@DoudizhuCardsCandidates",
    ]  # fmt: skip  (Ray Serve's app serves one adapter of its own: not set beside)
    assert runs[3].adapter == both[1] and runs[3].server_args == select(["c"])[0].server_args
    assert per_adapter(select(["c"]), None) == select(["c"])
    with pytest.raises(ValueError, match="names of their own"):
        per_adapter(select(["c"]), ["x.a:Game", "x.b:Game"])
    results = [
        Result("c@doudizhu", "c", 100, 2000, 2000, 1.0, 9.0, 500.0, 0),
        Result("c@DoudizhuCardsCandidates", "c", 100, 1900, 1900, 1.0, 9.0, 540.0, 0),
    ]
    assert ratios(results)["100"]["cpu c@DoudizhuCardsCandidates/c@doudizhu"] == 540 / 500
    paced = [dataclasses.replace(r, think_ms=100.0) for r in results]
    assert ratios(paced)["100"] == {"cpu c@DoudizhuCardsCandidates/c@doudizhu think 100ms": 1.08}


@pytest.mark.unit
def test_a_report_is_saved_into_a_folder_that_did_not_exist(tmp_path):
    from croupier.bench.plotting import save_report

    path = tmp_path / "new" / "deeper" / "report.json"
    drawn: list[Path] = []
    report = save_report({"a": 1}, path, lambda r, png: drawn.append(png))
    assert json.loads(path.read_text()) == {"a": 1}
    assert report["saved"] == str(path) and drawn == [path.with_suffix(".png")]
