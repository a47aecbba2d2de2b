"""Weights retention: production, every promoted version and every version a live game is
pinned to stay; besides them the newest K and one per N version numbers."""

from __future__ import annotations

import pytest

from croupier.games.leduc import LeducAdapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.policies.retention import Retention
from croupier.policies.rollout import Channels
from croupier.policies.weights_file import version_of

SPEC = ModelSpec("ppo", [8])


def _on_disk(folder) -> set[int]:
    return {v for p in folder.glob("v*.npz") if (v := version_of(p)) is not None}


def _install(versions: PolicyVersions, *numbers: int) -> None:
    weights = versions.weights()
    for v in numbers:
        assert versions.install(v, {k: w + 0.001 * v for k, w in weights.items()})


def test_retention_rule() -> None:
    rule = Retention(keep_last=3, keep_every=10)
    # numbers jump (the learner's update counter): one per bucket of 10, the first in it
    versions = [1, 4, 9, 12, 13, 25, 31, 33, 34, 36]
    assert rule.kept(versions) == {1, 12, 25, 31, 33, 34, 36}
    assert rule.kept(versions, referenced={4, 99}) == {1, 4, 12, 25, 31, 33, 34, 36}
    assert Retention(keep_last=2).kept(versions) == {34, 36}
    with pytest.raises(ValueError):
        Retention(keep_last=0)


def test_disk_keeps_history_production_and_versions_live_games_pin(tmp_path) -> None:
    versions = PolicyVersions(
        LeducAdapter(), SPEC, keep=2, weights_dir=tmp_path, retention=Retention(3, 10)
    )
    pinned_by_game = {5}
    versions.in_use = lambda: set(pinned_by_game)
    _install(versions, 2, 5)
    versions.retain(2)  # production (the channel pins it)
    _install(versions, *range(6, 30))
    # newest 3, one per 10 (2 is the first of 0..9, 10 and 20 theirs), production 2, game's 5
    assert _on_disk(tmp_path) == {2, 5, 10, 20, 27, 28, 29}
    # in memory: the newest `keep`, plus what is referenced (a pinned game stays on its version)
    assert versions.versions() == [2, 5, 28, 29]
    assert versions.resolve(5)[0] == 5
    pinned_by_game.clear()  # the game ended: 5 may go now
    _install(versions, 31)
    assert 5 not in _on_disk(tmp_path) and 5 not in versions.versions()


def test_every_promoted_version_stays_on_disk(tmp_path) -> None:
    """Past the rollback history (8 deep) a promoted version leaves memory, not the disk."""
    versions = PolicyVersions(LeducAdapter(), SPEC, weights_dir=tmp_path)
    channels = Channels(versions, tmp_path)
    for v in range(1, 13):
        _install(versions, v)
        channels.promote(v)
    assert _on_disk(tmp_path / "channels") == set(range(1, 13))
    assert 1 not in channels.history and 1 not in versions._pinned  # released: evictable


def test_games_pinning_every_new_version_hold_at_most_the_cap(inprocess, leduc_states, tmp_path):
    """The review's probe, scaled down: an engine keeps one game open per new version (12 of
    them). Only the newest `--max-pinned-versions` (3) pins are held, in memory and on disk;
    an older pin is served by the nearest newer version kept, which its answer and episode
    name; `/healthz` says how many versions are pinned and how many of them are not held."""
    state = leduc_states[0]

    async def body(client, service):
        versions, games = service.versions, []
        for v in range(1, 13):
            _install(versions, v)
            seats = {"0": "learned", "1": "rules"}
            created = await client.post("/v1/games", json={"game": "leduc-holdem", "seats": seats})
            assert created.json()["seats"]["0"]["version"] == v  # pinned at creation
            games.append(created.json()["game_id"])
        url = f"/v1/games/{games[0]}/decide"
        first = await client.post(url, json={"seat": "0", "state": state})
        health = (await client.get("/healthz")).json()
        metrics = (await client.get("/metrics")).text
        return first.json(), versions.versions(), _on_disk(tmp_path / "weights"), health, metrics

    first, loaded, on_disk, health, metrics = inprocess(
        body, game="leduc-holdem", data_dir=tmp_path, keep_versions=2, weights_keep_last=2,
        max_pinned_versions=3,
    )  # fmt: skip
    assert {10, 11, 12} <= set(loaded) and len(loaded) <= 2 + 3, loaded  # 13 before the cap
    assert {10, 11, 12} <= on_disk and len(on_disk) <= 2 + 3, on_disk
    assert first["policy"] == "learned" and first["fallback"] is False
    assert first["version"] in loaded and first["version"] > 1  # version 1 is not held
    assert health["versions_pinned"] == 12 and health["versions_pinned_not_held"] == 9
    assert "croupier_versions_pinned 12.0" in metrics
