"""Production channel (promote/rollback with admin auth, persisted), canary, shadow, league."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from croupier.engine.rlcard_games import RLCardTable
from tests.conftest import play_hands_over_http
from tests.helpers.hands import play_hand

GAME = "leduc-holdem"
ADMIN = {"Authorization": "Bearer adm"}
ENGINE = {"Authorization": "Bearer eng"}


def _install(service, *versions):
    for v in versions:
        weights = service.versions.weights()
        service.versions.install(v, {k: w + 0.01 * v for k, w in weights.items()})


async def _play(client, service, seats, hands=1, headers=ENGINE, seed=0):
    """Play whole hands of leduc through the API; returns the create responses."""
    table = RLCardTable(GAME)
    created = []
    for h in range(hands):
        r = await client.post("/v1/games", json={"game": GAME, "seats": seats}, headers=headers)
        assert r.status_code == 201, r.text
        game = r.json()
        created.append(game)
        table.reset(seed + h)
        await play_hand(client, table, game["game_id"], headers=headers)
    return created


def test_promote_and_rollback_need_admin_and_persist(inprocess, tmp_path):
    async def body(client, service):
        _install(service, 3, 5)
        out = {}
        promote = "/v1/policies/promote"
        out["no_key"] = (await client.post(promote, json={"version": 3})).status_code
        out["engine_key"] = (
            await client.post(promote, json={"version": 3}, headers=ENGINE)
        ).status_code
        out["production_before"] = (
            await client.post("/v1/games", json={"game": GAME, "seats": {"0": "production"}},
                              headers=ENGINE)
        ).status_code  # fmt: skip
        r = await client.post(
            promote, json={"version": 3, "evidence": {"why": "test"}}, headers=ADMIN
        )
        out["promote3"] = r.status_code, r.json()["production"]
        out["unknown"] = (
            await client.post(promote, json={"version": 99}, headers=ADMIN)
        ).status_code
        out["bad_body"] = (
            await client.post(promote, json={"version": "3"}, headers=ADMIN)
        ).status_code
        out["again"] = (await client.post(promote, json={"version": 3}, headers=ADMIN)).status_code
        out["promote5"] = (await client.post(promote, json={"version": 5}, headers=ADMIN)).json()[
            "previous"
        ]
        game = (await _play(client, service, {"0": "production", "1": "rules"}))[0]
        out["seat"] = game["seats"]["0"]
        # A newer version pushes the old ones out of memory; production's stay.
        _install(service, *range(6, 20))
        out["loaded"] = service.versions.versions()
        rb = await client.post("/v1/policies/rollback", json={}, headers=ADMIN)
        out["rollback"] = rb.status_code, rb.json()["production"]
        out["rollback_empty"] = (
            await client.post("/v1/policies/rollback", json={}, headers=ADMIN)
        ).status_code
        out["channels"] = (await client.get("/v1/policies/channels", headers=ENGINE)).json()
        return out

    wd = tmp_path / "weights"
    out = inprocess(body, api_keys=["eng"], admin_keys=["adm"], weights_dir=wd)
    assert out["no_key"] == 401 and out["engine_key"] == 403
    assert out["production_before"] == 409  # well-formed, but nothing promoted yet
    assert out["promote3"] == (200, 3)
    assert out["unknown"] == 409 and out["again"] == 409 and out["bad_body"] == 422
    assert out["promote5"] == 3
    assert out["seat"] == {"policy": "production", "version": 5}
    assert {3, 5} <= set(out["loaded"]) and 7 not in out["loaded"]
    assert out["rollback"] == (200, 3)
    assert out["rollback_empty"] == 409
    assert out["channels"]["production"] == 3
    # Every change is logged with its evidence.
    log = [json.loads(line) for line in (wd / "promotions.jsonl").read_text().splitlines()]
    assert [(e["action"], e["production"]) for e in log] == [
        ("promote", 3),
        ("promote", 5),
        ("rollback", 3),
    ]
    assert log[0]["evidence"] == {"why": "test"}

    # A restarted server keeps production (3), though the trainer's newest is 19.
    async def after_restart(client, service):
        game = await client.post("/v1/games", json={"game": GAME, "seats": {"0": "production"}})
        return service.versions.latest, game.json()["seats"]["0"]

    latest, seat = inprocess(after_restart, weights_dir=wd)
    assert latest == 19
    assert seat == {"policy": "production", "version": 3}


def test_shadow_counts_disagreement_and_outcomes(inprocess):
    async def body(client, service):
        # A version that always folds when it may: it disagrees with leduc's rules (which
        # raise, call or check) on every decision where fold is legal.
        weights = service.versions.weights()
        bias = [k for k in weights if k.endswith("bias")][-1]
        weights[bias] = weights[bias].copy()
        weights[bias][:] = -50.0
        weights[bias][2] = 50.0  # leduc's action order: call, raise, fold, check
        service.versions.install(4, weights)
        created = await _play(client, service, {"0": "shadow", "1": "rules"}, hands=30)
        # Shadow forwards finish off the answers' path: wait (bounded) for the last ones.
        for _ in range(600):  # 30 s: a loaded 2-core box took over 5
            stats = (await client.get("/v1/rollout")).json()
            if stats["shadow"].get("4", {}).get("games", {}).get("n") == 30:
                break
            await asyncio.sleep(0.05)
        return created, stats, dict(service.decisions_by_policy)

    created, stats, decisions = inprocess(body)
    assert created[0]["seats"]["0"] == {"policy": "shadow", "version": 4}
    shadow = stats["shadow"]["4"]
    # The rules acted on every shadow decision; the learned version was only computed.
    assert shadow["decisions"] == decisions["shadow"] > 0
    assert 0.3 < shadow["disagreement_rate"] <= 1.0
    assert shadow["disagreement_rate"] == shadow["greedy_disagreement_rate"]
    assert shadow["games"]["n"] == 30
    assert 0 < shadow["games_with_disagreement"]["n"] <= 30


def test_shadow_outcomes_are_kept_for_a_bounded_number_of_versions(inprocess):
    """Shadow outcomes were kept for every version ever shadowed (the review: unbounded);
    now for the newest 16, the older dropped and counted."""
    from croupier.policies.rollout.core import SHADOW_VERSIONS

    async def body(client, service):
        for v in range(1, SHADOW_VERSIONS + 5):
            _install(service, v)
            await _play(client, service, {"0": f"shadow@{v}", "1": "rules"}, seed=v)
            for _ in range(600):  # shadow forwards finish off the answers' path (30 s)
                if v in service.rollout.shadow:
                    break
                await asyncio.sleep(0.01)
        return (await client.get("/v1/rollout")).json()

    stats = inprocess(body)
    kept = sorted(int(v) for v in stats["shadow"])
    assert kept == list(range(5, SHADOW_VERSIONS + 5)), kept  # 20 before the bound
    assert stats["shadow_versions_dropped"] == 4


def test_canary_share_splits_new_games(inprocess):
    async def body(client, service):
        _install(service, 2)
        r = await client.post("/v1/policies/promote", json={"version": 2})
        assert r.status_code == 200
        created = await _play(client, service, {"0": "canary", "1": "rules"}, hands=200)
        return [g["seats"]["0"]["policy"] for g in created], (
            await client.get("/v1/rollout")
        ).json()

    arms, stats = inprocess(body, canary_share=0.25)
    share = arms.count("canary:production") / len(arms)
    assert set(arms) == {"canary:production", "canary:rules"}
    assert 0.12 < share < 0.38  # binomial(200, 0.25): ±3.3 sd
    assert stats["canary"]["games"]["production"] == arms.count("canary:production")
    assert stats["canary"]["payoff"]["rules"]["n"] == arms.count("canary:rules")


def test_league_seats_a_loaded_version_preferring_the_rated_strongest(inprocess, tmp_path):
    wd = tmp_path / "w"

    async def body(client, service):
        _install(service, *range(1, 9))
        wd.mkdir(exist_ok=True)
        ratings = {f"learned@{v}": {"ordinal": float(v == 2) * 10} for v in range(1, 9)}
        (wd / "ratings.json").write_text(json.dumps({"ratings": ratings}))
        seen = []
        for _ in range(60):
            r = await client.post("/v1/games", json={"game": GAME, "seats": {"0": "league"}})
            seen.append(r.json()["seats"]["0"]["version"])
        return seen, service.versions.versions()

    seen, loaded = inprocess(body, weights_dir=wd)
    assert set(seen) <= set(loaded)
    assert seen.count(2) > 10  # one of the two strongest, half the time
    assert any(v >= 5 for v in seen)  # and recent ones


def test_rules_recording_writes_parquet_episodes(inprocess, tmp_path):
    import pyarrow.parquet as pq

    async def body(client, service):
        r = await client.post(
            "/v1/games", json={"game": GAME, "seats": {"0": "rules"}, "record": "rules"}
        )
        return r.status_code

    assert inprocess(body) == 409  # no --offline-dir: not possible on this server

    async def record(client, service):
        both_rules = {"0": "rules", "1": "rules"}
        await play_hands_over_http(client, GAME, 20, lambda h: both_rules, record="rules")
        return service.rollout.offline.stats()

    stats = inprocess(record, offline_dir=tmp_path / "offline")
    files = list((tmp_path / "offline").glob("*.parquet"))
    assert len(files) == 1  # flushed at shutdown
    rows = pq.read_table(files[0]).to_pydict()
    assert len(rows["t"]) == stats["steps"] > 20
    assert stats["episodes"] <= 40
    last = [i for i, done in enumerate(rows["terminateds"]) if done]
    assert len(last) == stats["episodes"]
    # Zero-sum: the two seats' final rewards cancel out over the recorded hands.
    assert abs(sum(rows["rewards"])) < 1e-6
    assert all(
        np.asarray(m)[a] == 1.0 for m, a in zip(rows["action_mask"], rows["actions"], strict=True)
    )


def test_seat_mix_accepts_rollout_specs():
    import pytest

    from croupier.policies.seats import BadPolicySpec, parse_seat_mix

    assert parse_seat_mix("learned,league,canary,shadow@latest,production") == [
        "learned",
        "league",
        "canary",
        "shadow@latest",
        "production",
    ]
    with pytest.raises(BadPolicySpec):
        parse_seat_mix("league@3")


def test_bad_rollout_requests_change_nothing(inprocess):
    async def body(client, service):
        _install(service, 2)
        codes = [
            (await client.post("/v1/policies/promote", json={})).status_code,
            (await client.post("/v1/policies/promote", json={"version": -1})).status_code,
            (await client.post("/v1/policies/promote", json={"version": 2, "x": 1})).status_code,
            (
                await client.post(
                    "/v1/policies/promote",
                    json={"version": 2, "evidence": {"blob": "x" * 70_000}},
                )
            ).status_code,
            (
                await client.post(
                    "/v1/policies/rollback",
                    content=b"\xff",
                    headers={"content-type": "application/json"},
                )
            ).status_code,
            (
                await client.post("/v1/games", json={"game": GAME, "seats": {"0": "shadow@99"}})
            ).status_code,
            (
                await client.post("/v1/games", json={"game": GAME, "record": "everything"})
            ).status_code,
        ]
        return codes, service.rollout.channels.state(), service.games.created_total

    codes, channels, created = inprocess(body)
    # shadow@99: well-formed, but that version is not loaded (409); the rest malformed (422)
    assert codes == [422, 422, 422, 422, 422, 409, 422], codes
    assert channels["production"] is None and channels["events"] == []
    assert created == 0


def test_the_rollout_observes_only_recorded_and_shadow_seats(tmp_path):
    """What decides whether a rules seat's observation is built (`Decider._prepare`)."""
    from croupier.api.components import build_components
    from croupier.config import ServerConfig

    config = ServerConfig(game="leduc-holdem", data_dir=tmp_path, offline_dir=tmp_path / "off")
    service = build_components(config).service
    rollout = service.decider.rollout
    service.create_game("leduc-holdem", "plain", {"0": "rules", "1": "random"})
    service.create_game("leduc-holdem", "rec", {"0": "rules", "1": "random"}, record="rules")
    assert not rollout.observes("plain", "0") and not rollout.observes("nowhere", "0")
    assert rollout.observes("rec", "0") and not rollout.observes("rec", "1")
