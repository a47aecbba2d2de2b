"""League training's opponents: the `league` seat's sampling schedules (fictitious play over a
history kept in memory, a share of the rules), and `bench league`'s modes and exact scoring."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from croupier.bench.league import LeagueBench, mode_setting, score
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.policies.rollout.league import LeaguePool, LeagueSampling

GAME = "leduc-holdem"
HISTORY = "croupier.games.leduc:LeducHistoryAdapter"


def _install(versions: PolicyVersions, *numbers: int) -> None:
    weights = versions.weights()
    for v in numbers:
        versions.install(v, {k: w + 0.01 * v for k, w in weights.items()})


def test_a_history_is_kept_in_memory_for_the_league():
    """Besides the newest `keep` others, one version per `history_every` version numbers (the first
    at or past each multiple) stays loaded; without it only the newest do."""
    adapter = load_adapter(GAME)
    spec = ModelSpec(algo="ppo", hiddens=[8])
    with_history = PolicyVersions(adapter, spec, keep=2, history_every=10)
    plain = PolicyVersions(adapter, spec, keep=2)
    numbers = [3, 7, 12, 15, 21, 29, 33, 41, 44]
    _install(with_history, *numbers)
    _install(plain, *numbers)
    # the history (0, 12, 21, 33, 41) and the newest 2 of the others
    assert with_history.versions() == [0, 12, 21, 29, 33, 41, 44]
    assert plain.versions() == [41, 44]
    with pytest.raises(ValueError):
        PolicyVersions(adapter, spec, history_every=-1)


def test_fsp_draws_every_loaded_version_alike_and_the_rules_their_share():
    loaded = [0, 12, 21, 33, 41, 44]
    pool = LeaguePool(None, np.random.default_rng(1), LeagueSampling("fsp", rules_share=0.25))
    draws = collections.Counter(pool.draw(loaded) for _ in range(6000))
    assert set(draws) == {None, *loaded}
    assert 0.22 < draws[None] / 6000 < 0.28  # binomial(6000, 0.25): ±5.7 sd
    per_version = [draws[v] for v in loaded]
    # 4,500 draws over 6 versions: 750 each, sd ~25
    assert min(per_version) > 650 and max(per_version) < 850, per_version

    recent = LeaguePool(None, np.random.default_rng(1))  # the default: the newest 4
    assert {recent.draw(loaded) for _ in range(400)} == {21, 33, 41, 44}
    never_rules = LeaguePool(None, np.random.default_rng(1), LeagueSampling("fsp"))
    assert None not in {never_rules.draw(loaded) for _ in range(400)}
    with pytest.raises(ValueError, match="sampling"):
        LeagueSampling("psro")
    with pytest.raises(ValueError, match="share"):
        LeagueSampling("fsp", rules_share=1.5)


def test_a_server_seats_league_opponents_from_its_whole_history(inprocess):
    """`--league-sampling fsp --league-every 10 --league-rules-share 0.3`: a `league` seat is
    the rules about 30% of the time, else any version kept, the oldest ones included."""

    async def body(client, service):
        _install(service.versions, *range(1, 60))
        seen = []
        for _ in range(200):
            r = await client.post("/v1/games", json={"game": GAME, "seats": {"0": "league"}})
            assert r.status_code == 201, r.text
            seat = r.json()["seats"]["0"]
            seen.append(seat["version"] if seat["policy"] != "rules" else "rules")
        greedy = await client.post(
            "/v1/games", json={"game": GAME, "seats": {"0": "league:greedy"}}
        )
        assert greedy.status_code == 201, greedy.text
        return seen, service.versions.versions()

    seen, loaded = inprocess(
        body, league_sampling="fsp", league_every=10, league_rules_share=0.3, keep_versions=4
    )
    assert loaded == [0, 10, 20, 30, 40, 50, 56, 57, 58, 59]
    drawn = collections.Counter(seen)
    assert 35 < drawn["rules"] < 85  # binomial(200, 0.3): ±3.9 sd
    assert {v for v in drawn if v != "rules"} <= set(loaded)
    assert drawn[0] + drawn[10] + drawn[20] > 15  # the early history plays too


def test_bench_league_modes_and_settings():
    history = ["--weights-keep-every", "4"]
    assert mode_setting("rules", 4, 0.25) == {"seats": ["learned", "rules"], "server_args": history}
    fsp = mode_setting("fsp-rules", 4, 0.25)
    assert fsp["seats"] == ["learned", "league"]
    assert fsp["server_args"] == [*history, "--league-sampling", "fsp", "--league-every", "4",
                                  "--league-rules-share", "0.25"]  # fmt: skip
    assert LeagueBench(game="leduc").game == HISTORY
    with pytest.raises(ValueError, match="unknown modes"):
        LeagueBench(modes=("rules", "psro"))


def test_snapshots_are_scored_exactly_once_per_version(tmp_path):
    """`bench league`'s curve: each snapshot measured on the tree (sampled, as served); a
    version served across several snapshots is measured once, with the same numbers."""
    from croupier.policies.weights_file import write_weights

    adapter = load_adapter(HISTORY)
    spec = ModelSpec(algo="ppo", hiddens=[16])
    versions = PolicyVersions(adapter, spec, seed=5)
    write_weights(tmp_path / "0000-v3.weights", versions.weights(0))
    snaps = [
        {"seconds": 0.0, "version": 3, "file": "0000-v3.weights", "spec": spec.to_dict()},
        {"seconds": 30.0, "version": 3, "file": "0000-v3.weights", "spec": spec.to_dict()},
    ]
    curve = score(HISTORY, snaps, tmp_path)
    assert [p["seconds"] for p in curve] == [0.0, 30.0]
    first, second = curve
    assert {k: v for k, v in first.items() if k != "seconds"} == {
        k: v for k, v in second.items() if k != "seconds"
    }
    # an untrained network is close to uniform random play (1.47 a hand), far from 0
    assert 0.8 < first["exploitability"] < 2.0
    assert first["vs_rules"] < 0 and first["vs_equilibrium"] < 0
    assert 0 < first["folds_when_check_free"] < 1 and first["folds_worst"]["max"] > 0


def test_the_engine_plays_league_seats_through_a_real_server(server_factory):
    """The training games of a league run, without the trainer: the engine's `learned,league`
    tables against `croupier serve --league-sampling fsp --league-rules-share 0.5`, the history
    observation: every hand plays, the league seats are the rules or a loaded version."""
    import asyncio

    from croupier.engine.runner import run_engine

    flags = ["--game", HISTORY, "--seats", "learned,league", "--league-sampling", "fsp",
             "--league-rules-share", "0.5", "--data-dir", "none"]  # fmt: skip
    with server_factory(*flags) as url:
        summary = asyncio.run(run_engine(url, HISTORY, 8, ["learned", "league"], 120, None))
    assert summary.errors == 0, summary.error_samples
    assert summary.hands == 120
    # version 0 is the only one loaded: the league seats are it or the rules
    assert set(summary.policies) == {"learned", "rules", "frozen@0"}, summary.policies
    assert 30 < summary.policies["rules"].n < 90  # binomial(120, 0.5): ±5.5 sd


@pytest.mark.long
@pytest.mark.system
def test_bench_league_short_run(tmp_path):
    """`croupier bench league` end to end, a few seconds per mode: both modes' curves, exact."""
    from typer.testing import CliRunner

    from croupier.cli import app

    result = CliRunner().invoke(app, [
        "bench", "league", "--minutes", "0.4", "--modes", "rules,fsp", "--every", "10",
        "--eval-hands", "100", "--tables", "16", "--out", str(tmp_path),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    import json

    [saved] = tmp_path.glob("league-leduc-*.json")
    report = json.loads(saved.read_text())
    assert set(report["modes"]) == {"rules", "fsp"}
    for r in report["modes"].values():
        assert r["curve"] and r["average"]
        assert all(0 < p["exploitability"] < 2 for p in r["curve"] + r["average"])
        assert r["curve"][0]["seconds"] == 0.0
    assert saved.with_suffix(".png").exists()


@pytest.mark.integration
def test_serve_refuses_a_bad_league_setting_in_one_line():
    import subprocess
    import sys

    from croupier.local_server import free_port

    proc = subprocess.run(
        [sys.executable, "-m", "croupier", "serve", "--league-sampling", "psro", "--port",
         str(free_port()), "--data-dir", "none"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "league sampling" in proc.stderr, proc.stderr[-500:]
    assert "Traceback" not in proc.stderr
