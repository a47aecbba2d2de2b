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
