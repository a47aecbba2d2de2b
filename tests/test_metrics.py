"""`GET /metrics` (names present, values moving after traffic) and the arena results API."""

from __future__ import annotations

import asyncio
import math
import subprocess
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from croupier.api.metrics import EXPORTED, NOT_EXPORTED, endpoint_of, numeric_paths
from croupier.dashboard.history import quantile
from croupier.local_server import free_port
from tests.conftest import promtool
from tests.helpers.prometheus import parse, value

SERVER_METRICS = [
    "croupier_request_seconds_bucket",
    "croupier_requests_total",
    "croupier_decisions_total",
    "croupier_batch_size_bucket",
    "croupier_games_in_flight",
    "croupier_games_created_total",
    "croupier_version",
    "croupier_versions_loaded",
    "croupier_episodes_pending",
    "croupier_episodes_shipped_total",
    "croupier_episodes_dropped_total",
    "croupier_episodes_recorded_total",
    "croupier_ingest_oldest_waiting_lag_versions",
    "process_cpu_seconds_total",
]


async def _play(c: Any, states: list[dict], hands: int) -> None:
    for i in range(hands):
        game = (
            await c.post(
                "/v1/games", json={"game": "leduc-holdem", "seats": {"0": "learned", "1": "rules"}}
            )
        ).json()
        state = states[i % len(states)]
        seat = str(state["current_player"])
        r = await c.post(f"/v1/games/{game['game_id']}/decide", json={"seat": seat, "state": state})
        assert r.status_code == 200, r.text
        if i % 2 == 0:  # half stay in flight
            await c.post(f"/v1/games/{game['game_id']}/end", json={"payoffs": {"0": 1, "1": -1}})
    # and a client mistake: counted by status
    r = await c.post("/v1/games/nope/decide", json={"seat": "0", "state": states[0]})
    assert r.status_code == 404


def test_metrics_names_present_and_moving(inprocess, leduc_states) -> None:
    async def run(c, service) -> tuple[dict, dict]:
        before = parse((await c.get("/metrics")).text)
        await _play(c, leduc_states, 10)
        resp = await c.get("/metrics")
        assert resp.headers["content-type"].startswith("text/plain")
        return before, parse(resp.text)

    before, after = inprocess(run)
    names = {name for name, _ in after}
    missing = [m for m in SERVER_METRICS if m not in names]
    assert not missing, f"missing metrics: {missing}"
    assert value(after, "croupier_requests_total", endpoint="decide", status="200") == 10
    assert value(after, "croupier_requests_total", endpoint="decide", status="404") == 1
    assert value(after, "croupier_request_seconds_count", endpoint="decide") == 11
    assert value(after, "croupier_request_seconds_sum", endpoint="decide") > 0
    decisions = sum(v for (n, _), v in after.items() if n == "croupier_decisions_total")
    assert decisions == 10
    assert ("croupier_decisions_total", (("policy", "learned"),)) in after
    assert (
        value(after, "croupier_games_created_total")
        == value(before, "croupier_games_created_total") + 10
    )
    assert value(after, "croupier_games_in_flight") == 5
    assert value(after, "croupier_episodes_recorded_total") > 0
    assert value(after, "croupier_episodes_pending") > 0
    forwards = value(after, "croupier_batch_size_count")
    assert forwards == value(after, "croupier_batcher_forward_passes_total") > 0
    assert value(after, "croupier_batch_size_bucket", le="+Inf") == forwards
    assert "croupier_production" not in names  # no production version before a promotion


def test_production_version_in_metrics_and_dashboard(inprocess) -> None:
    async def run(c, service) -> tuple[dict, dict]:
        r = await c.post("/v1/policies/promote", json={"version": 0})
        assert r.status_code == 200, r.text
        for _ in range(50):  # the sampler takes one sample a second
            data = (await c.get("/dashboard/data.json")).json()
            if data["history"] and data["history"][-1]["production_version"] is not None:
                break
            await asyncio.sleep(0.1)
        return parse((await c.get("/metrics")).text), data

    samples, data = inprocess(run)
    assert value(samples, "croupier_production") == 0
    assert data["current"]["production"] == 0
    assert data["history"][-1]["production_version"] == 0


# The public names from health() (docs/monitoring.md): a change here is a change to every
# dashboard and alert built on them, so it must be deliberate.
EXPORTED_NAMES = [
    "croupier_version",
    "croupier_games_in_flight",
    "croupier_games_created_total",
    "croupier_decisions_total",
    "croupier_batcher_decisions_total",
    "croupier_batcher_forward_passes_total",
    "croupier_batcher_invalid_total",
    "croupier_batcher_late",
    "croupier_batcher_max_batch_seen",
    "croupier_batcher_queued",
    "croupier_episodes_pending",
    "croupier_episodes_pending_steps",
    "croupier_episodes_in_flight",
    "croupier_episodes_spooled",
    "croupier_episodes_spooled_bytes",
    "croupier_episodes_spool_max",
    "croupier_episodes_spool_max_bytes",
    "croupier_episodes_recorded_total",
    "croupier_episodes_recovered",
    "croupier_episodes_shipped_total",
    "croupier_episodes_acked_total",
    "croupier_episodes_dropped_total",
    "croupier_episodes_corrupt_total",
    "croupier_episodes_too_big_total",
    "croupier_episodes_put_seconds",
    "croupier_episodes_durable",
    "croupier_fallbacks_total",
    "croupier_turn_replays_total",
    "croupier_refused_overload_total",
    "croupier_refused_quota_total",
    "croupier_refused_payoffs_total",
    "croupier_forced_moves_total",
    "croupier_before_first_version_total",
    "croupier_search_decisions_total",
    "croupier_search_fallbacks_total",
    "croupier_search_late_total",
    "croupier_search_labels_total",
    "croupier_search_labels_missed_total",
    "croupier_search_labels_kept_base_total",
    "croupier_search_decision_seconds",
    "croupier_search_failed_total",
    "croupier_search_workers_died_total",
    "croupier_search_workers_replaced_total",
    "croupier_search_workers",
    "croupier_search_ready",
    "croupier_refused_too_large_total",
    "croupier_expired_games_total",
    "croupier_games_resumed_total",
    "croupier_resumed_fragments_dropped_total",
    "croupier_episodes_cut_total",
    "croupier_episodes_ended_by_fallback_total",
    "croupier_weights_refused_total",
    "croupier_versions_pinned",
    "croupier_episodes_refused_too_big_total",
    "croupier_recording_held_bytes",
    "croupier_recording_steps_over_episode_budget_total",
    "croupier_recording_steps_over_total_budget_total",
    "croupier_versions_pinned_not_held",
    "croupier_trainer_link_thread_alive",
    "croupier_trainer_link_connected",
    "croupier_trainer_link_authenticated",
    "croupier_trainer_link_connects_total",
    "croupier_trainer_link_versions_installed_total",
    "croupier_trainer_link_versions_refused_total",
    "croupier_trainer_link_errors_total",
    "croupier_trainer_link_trainer_acks",
    "croupier_trainer_link_max_message_bytes",
    "croupier_trainer_link_last_error_timestamp_seconds",
    "croupier_versions_loaded",
    "croupier_production",
    "croupier_canary_share",
    "croupier_ingest_oldest_waiting_lag_versions",
]


def test_exported_names_are_the_stored_list() -> None:
    names = [f"croupier_{m.name}" + ("_total" if m.kind == "counter" else "") for m in EXPORTED]
    assert sorted(names) == sorted(EXPORTED_NAMES)
    assert len(set(names)) == len(names)


def test_every_snapshot_number_is_exported_or_excluded(inprocess, tmp_path) -> None:
    """Renaming a stats key in health() (or adding one) fails here instead of silently
    renaming (or adding) a public metric; every exported path is really in the snapshot."""
    trainer = f"127.0.0.1:{free_port()}"  # nothing listens: the link's stats are there anyway

    async def run(c, service) -> tuple[dict, str]:
        assert (await c.post("/v1/policies/promote", json={"version": 0})).status_code == 200
        return c._transport.app.state.snapshot(), (await c.get("/metrics")).text

    snapshot, text = inprocess(run, trainer=trainer, data_dir=tmp_path / "data")
    paths = set(numeric_paths(snapshot))
    exported = {m.path for m in EXPORTED if m.label is None}
    exported |= {m.sum_path for m in EXPORTED if m.sum_path is not None}  # summaries' sums
    labelled = [m.path for m in EXPORTED if m.label]  # a labelled family: each key a series
    exported |= {p for p in paths if any(p[: len(path)] == path for path in labelled)}
    assert paths - exported - NOT_EXPORTED == set(), "a number neither exported nor excluded"
    assert exported - paths == set(), "an exported path is missing from health()"
    assert all(isinstance(snapshot[m.path[0]], dict) for m in EXPORTED if m.label)
    samples = parse(text)
    scraped = {name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
               for name, _ in samples}  # fmt: skip
    # (decisions by policy has no sample before a decision: checked with traffic above)
    assert set(EXPORTED_NAMES) - {"croupier_decisions_total"} <= scraped


def test_a_new_health_field_is_not_exported_until_named(inprocess) -> None:
    """Another module adding a number to health() does not invent a public metric."""

    async def run(c, service) -> str:
        original = service.health

        def health() -> dict[str, Any]:
            return {**original(), "spool": {"depth": 7, "path": "/x"}, "late_answers": 3}

        service.health = health
        return (await c.get("/metrics")).text

    samples = parse(inprocess(run))
    assert not any(name.startswith(("croupier_spool", "croupier_late")) for name, _ in samples)
    assert value(samples, "croupier_games_in_flight") == 0


def test_endpoint_labels_are_bounded() -> None:
    assert endpoint_of("/v1/games/abc123/decide") == "decide"
    assert endpoint_of("/v1/games/abc/end") == "end_game"
    assert endpoint_of("/v1/games/abc") == "abort_game"
    assert endpoint_of("/v1/games/abc/resume") == "resume_game"  # not counted as an abort
    assert endpoint_of("/v1/decide:batch") == "decide_batch"
    assert endpoint_of("/v1/arena/results") == "arena_results"
    assert endpoint_of("/anything/else/" + "x" * 50) == "other"


def test_quantile_interpolates_inside_buckets() -> None:
    bounds = [0.001, 0.002, 0.004, math.inf]
    assert quantile(bounds, [0, 0, 0, 0], 0.5) is None
    assert quantile(bounds, [0, 10, 10, 10], 0.5) == 0.0015
    assert quantile(bounds, [0, 0, 10, 10], 0.99) > 0.0039


def test_arena_results_post_validate_and_list(inprocess, tmp_path) -> None:
    path = tmp_path / "arena.jsonl"
    path.write_text('{"version": 1, "payoff": -0.5, "ci95": 0.1, "hands": 100}\nnot json\n')

    async def run(c, service) -> None:
        good = [{"version": 3, "payoff": 0.4, "ci95": 0.05, "hands": 2000, "opponent": "rules"}]
        r = await c.post("/v1/arena/results", json=good, headers={"Authorization": "Bearer adm"})
        assert r.status_code == 201 and r.json() == {"added": 1}
        for bad in (
            [{"version": -1, "payoff": 0.1}],
            [{"version": 1}],
            [{"version": 1, "payoff": "NaN"}],
            {"version": 1, "payoff": 0.1},
        ):
            r = await c.post("/v1/arena/results", json=bad, headers={"Authorization": "Bearer adm"})
            assert r.status_code == 422, (bad, r.text)
        r = await c.post("/v1/arena/results", json=good, headers={"Authorization": "Bearer eng"})
        assert r.status_code == 403
        r = await c.post("/v1/arena/results", json=good)
        assert r.status_code == 401
        listed = (await c.get("/v1/arena/results", headers={"Authorization": "Bearer eng"})).json()
        assert [(x["version"], x["payoff"]) for x in listed] == [(1, -0.5), (3, 0.4)]
        # The dashboard's data holds those results (and the trainer link's address and last
        # error): a key opens it, a read-only key will do; none gets nothing (finding 8).
        assert (await c.get("/dashboard/data.json")).status_code == 401
        assert (await c.get("/v1/arena/results")).status_code == 401
        for key in ("rd", "eng", "adm"):
            auth = {"Authorization": f"Bearer {key}"}
            data = (await c.get("/dashboard/data.json", headers=auth)).json()
            assert [x["version"] for x in data["arena"]] == [1, 3], key
            assert (await c.get("/v1/arena/results", headers=auth)).status_code == 200
        # a read key reads: it plays no game and changes nothing
        read = {"Authorization": "Bearer rd"}
        assert (
            await c.post("/v1/games", json={"game": "leduc-holdem"}, headers=read)
        ).status_code == 403
        r = await c.post("/v1/arena/results", json=good, headers=read)
        assert r.status_code == 403
        # open like /healthz even on a server with keys: counters only, no game data
        for path in ("/metrics", "/dashboard", "/dashboard/dashboard.js"):
            assert (await c.get(path)).status_code == 200, path
        assert (await c.get("/dashboard/..%2Fapp.py")).status_code == 404

    inprocess(run, arena_results=path, api_keys=["eng"], admin_keys=["adm"], read_keys=["rd"])
    assert len(path.read_text().splitlines()) == 3  # the posted one appended


def test_arena_results_file_in_a_directory_not_made_yet(inprocess, tmp_path) -> None:
    path = tmp_path / "not" / "yet" / "arena.jsonl"

    async def run(c, service) -> None:
        r = await c.post("/v1/arena/results", json=[{"version": 2, "payoff": 0.5}])
        assert r.status_code == 201, r.text
        assert [x["version"] for x in (await c.get("/v1/arena/results")).json()] == [2]

    inprocess(run, arena_results=path)
    assert path.exists()


def test_arena_results_that_cannot_be_stored_get_503_not_500(inprocess, tmp_path) -> None:
    path = tmp_path / "arena.jsonl"
    path.mkdir()  # a directory where the file should be: every write fails

    async def run(c, service) -> None:
        r = await c.post("/v1/arena/results", json=[{"version": 2, "payoff": 0.5}])
        assert r.status_code == 503, r.text
        assert (await c.get("/healthz")).status_code == 200

    inprocess(run, arena_results=path)


def test_history_rates_and_production_version() -> None:
    from croupier.api.metrics import RequestStats
    from croupier.dashboard.history import History

    health: dict[str, Any] = {
        "games_in_flight": 3,
        "version": 7,
        "decisions": {"learned": 0},
        "episodes": {"pending": 2, "shipped": 0, "dropped": 0},
    }
    requests = RequestStats()
    history = History(lambda: health, requests)
    assert history.sample() is None  # the first sample only sets the baseline
    health = {
        **health,
        "decisions": {"learned": 50, "rules": 10},
        "episodes": {"pending": 1, "shipped": 40, "dropped": 0},
        "production": {"version": 5},
    }
    for _ in range(98):
        requests.observe("decide", 200, 0.0015)
    requests.observe("decide", 200, 0.2)
    requests.observe("decide_batch", 200, 0.2)
    requests.observe("create_game", 201, 5.0)  # not a decision: not in the latency chart
    point = history.sample()
    assert point is not None
    assert point["decisions_per_s"] > 0 and set(point["decisions_per_s_by_policy"]) == {
        "learned",
        "rules",
    }
    assert 1.0 < point["latency_p50_ms"] < 2.0 and 128 < point["latency_p99_ms"] <= 256
    assert point["production_version"] == 5 and point["version"] == 7
    assert point["episodes_shipped_per_s"] > 0


def test_healthz_keeps_the_trainers_address_and_error_to_key_holders(inprocess):
    """/healthz stays open for load balancers; on a server with keys, where the trainer is and
    why the link failed are shown only to a key holder (a read key will do)."""
    trainer = f"127.0.0.1:{free_port()}"  # nothing listens: the link fails and says why

    async def run(c, service) -> None:
        for _ in range(100):
            keyed = (await c.get("/healthz", headers={"Authorization": "Bearer rd"})).json()
            if keyed["trainer_link"]["last_error"]:
                break
            await asyncio.sleep(0.05)
        assert keyed["trainer_link"]["trainer"] == trainer and keyed["trainer_link"]["last_error"]
        anonymous = (await c.get("/healthz")).json()["trainer_link"]
        assert "trainer" not in anonymous and "last_error" not in anonymous
        assert anonymous["connected"] is False

    inprocess(run, trainer=trainer, api_keys=["eng"], read_keys=["rd"])


# --- Prometheus's own linter --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_promtool_check_metrics_is_clean(inprocess, leduc_states, tmp_path) -> None:
    """`promtool check metrics` on a scrape with every family present (traffic, a trainer
    link, a production version): no naming or type problems."""
    tool = promtool()
    trainer = f"127.0.0.1:{free_port()}"  # nothing listens: the link's numbers are there

    async def run(c, service) -> str:
        await _play(c, leduc_states, 4)
        assert (await c.post("/v1/policies/promote", json={"version": 0})).status_code == 200
        return (await c.get("/metrics")).text

    text = inprocess(run, trainer=trainer, data_dir=tmp_path / "data")
    assert "croupier_episodes_put_seconds_count" in text
    out = subprocess.run(
        [tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_decisions_by_policy_keep_a_bounded_set_of_version_labels(inprocess, leduc_states):
    """Every `frozen@N` ever seated was a label of `croupier_decisions_total` for good (the
    review: one per version played). Only 16 labels a seat kind are counted apart now: the
    newest versions' (a newer one takes the oldest's place); the older ones' decisions fold
    into `frozen@older`, nothing lost from the totals."""
    from croupier.sessions.labels import LABELS_PER_KIND

    state = leduc_states[0]
    game = "leduc-holdem"

    async def run(c, service) -> tuple[dict, str]:
        weights = service.versions.weights()
        for v in range(1, LABELS_PER_KIND + 9):
            assert service.versions.install(v, {k: w + 0.001 * v for k, w in weights.items()})
            spec = f"frozen@{v}" + (":greedy" if v % 4 == 0 else "")
            seats = {"0": spec, "1": "rules"}
            gid = (await c.post("/v1/games", json={"game": game, "seats": seats})).json()
            url = f"/v1/games/{gid['game_id']}/decide"
            assert (await c.post(url, json={"seat": "0", "state": state})).status_code == 200
        return service.health()["decisions"], (await c.get("/metrics")).text

    decisions, text = inprocess(run, game=game)
    versioned = [k for k in decisions if k.startswith("frozen@") and k[7].isdigit()]
    assert len(versioned) == LABELS_PER_KIND  # 24 before the cap
    assert {f"frozen@{v}" for v in range(9, LABELS_PER_KIND + 9) if v % 4} <= set(versioned)
    assert decisions["frozen@older"] == 8
    assert sum(decisions.values()) == LABELS_PER_KIND + 8
    scraped = {dict(labels)["policy"]: n for (name, labels), n in parse(text).items()
               if name == "croupier_decisions_total"}  # fmt: skip
    assert scraped == decisions


def test_distinct_temperatures_leave_every_view_small(inprocess, leduc_states):
    """The security review's probe, scaled down: games with distinct temperatures
    (`frozen@N:temp=T`, `production:temp=T`) made a label each, unbounded, in `/healthz`,
    `/metrics` and the dashboard. Now the labels past 16 a seat kind fold into
    `<kind>:other`; `bench labels` runs the review's 20,000 games and the idle memory."""
    from croupier.sessions.labels import LABELS_PER_KIND

    state = leduc_states[0]
    game = "leduc-holdem"
    games = 300

    async def run(c, service) -> tuple[dict, dict[str, int]]:
        weights = service.versions.weights()
        for v in (1, 2):
            assert service.versions.install(v, {k: w + 0.001 * v for k, w in weights.items()})
        assert (await c.post("/v1/policies/promote", json={"version": 2})).status_code == 200
        for i in range(games):
            temp = f"{1 + i / 1000:g}"
            spec = f"frozen@{1 + i % 2}:temp={temp}" if i % 3 else f"production:temp={temp}"
            seats = {"0": spec, "1": "rules"}
            made = await c.post("/v1/games", json={"game": game, "seats": seats})
            assert made.status_code == 201, made.text
            url = f"/v1/games/{made.json()['game_id']}/decide"
            assert (await c.post(url, json={"seat": "0", "state": state})).status_code == 200
        sizes = {
            path: len((await c.get(path)).content)
            for path in ("/healthz", "/metrics", "/dashboard/data.json")
        }
        return service.health()["decisions"], sizes

    decisions, sizes = inprocess(run, game=game)
    assert sum(decisions.values()) == games
    assert len([k for k in decisions if k.startswith("frozen")]) <= LABELS_PER_KIND + 2
    assert len([k for k in decisions if k.startswith("production")]) == LABELS_PER_KIND + 1
    assert decisions["production:other"] == games // 3 - LABELS_PER_KIND
    assert decisions["frozen:other"] > 0
    assert all(n < 20_000 for n in sizes.values()), sizes


def test_history_is_bounded_in_bytes_and_keeps_its_span() -> None:
    """900 samples of many labels once held ~800 MiB: the history is bounded in bytes now,
    thinned where densest, and still spans from its first sample to its last."""
    from croupier.api.metrics import RequestStats
    from croupier.dashboard.history import History, json_size

    decisions: dict[str, int] = {}
    history = History(lambda: {"decisions": dict(decisions)}, RequestStats(), max_bytes=20_000)
    clock = [1_000.0]
    with patch("croupier.dashboard.history.time.time", lambda: clock[0]):
        for second in range(900):
            for i in range(40):  # 40 labels, each with decisions every second
                decisions[f"production:temp={1 + i / 100:g}"] = second * (i + 1)
            history.sample()
            clock[0] += 1.0
    samples = list(history.samples)
    assert history.nbytes == sum(json_size(p) for p in samples) <= 20_000
    assert json_size(samples) < 21_000
    assert samples[0]["t"] == 1_001.0 and samples[-1]["t"] == 1_899.0  # the whole span
    assert 10 < len(samples) < 30
    assert len(samples[-1]["decisions_per_s_by_policy"]) == 40

    # idle: labels without decisions cost a sample nothing
    idle = History(lambda: {"decisions": dict(decisions)}, RequestStats())
    idle.sample()
    assert idle.sample()["decisions_per_s_by_policy"] == {}
