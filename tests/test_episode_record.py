"""The episode record is versioned, and a spool written by an earlier version stays readable.

Two stored spools: `spool_v0` (RLlib's `SingleAgentEpisode.get_state()` layout, written before
croupier had its own record) and `spool_v1` (record version 1). Both must be read by the current
code, turned into the same records, and taken by the trainer.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from croupier.games.leduc import LeducAdapter
from croupier.trainer.episodes import EpisodeRejected, validate_episode
from croupier.trajectories import codec
from croupier.trajectories.record import (
    RECORD_VERSION,
    RecordError,
    from_legacy_state,
    read_record,
    record_id,
)
from croupier.trajectories.recorder import SeatRecorder
from croupier.trajectories.spool import EpisodeSpool

FIXTURES = Path(__file__).parent / "fixtures"
ADAPTER = LeducAdapter()


def _open_copy(name: str, tmp_path: Path) -> tuple[EpisodeSpool, list[dict]]:
    """The stored spool, copied (opening it writes its WAL), and what it should hold."""
    shutil.copy(FIXTURES / name / "spool.sqlite3", tmp_path / "spool.sqlite3")
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    return EpisodeSpool(tmp_path / "spool.sqlite3"), expected


@pytest.mark.parametrize("name", ["spool_v0", "spool_v1"])
def test_a_spool_written_by_an_earlier_version_is_read_and_trained_on(name, tmp_path):
    spool, expected = _open_copy(name, tmp_path)
    assert spool.recovered == len(expected) == 12
    taken = spool.take()
    assert spool.stats()["corrupt"] == 0
    assert [r["id"] for r in taken] == [e["id"] for e in expected]
    for record, want in zip(taken, expected, strict=True):
        assert record["record"] in (1, RECORD_VERSION)  # v1 is read as it is (a subset of v2)
        assert record["actions"].tolist() == want["actions"]
        assert record["rewards"].tolist() == pytest.approx(want["rewards"])
        assert record["versions"] == want["versions"]
        assert record["terminated"] is want["terminated"] and record["truncated"] is False
        assert float(record["obs"].sum()) == pytest.approx(want["obs_sum"])
        assert record["obs"].shape == (want["steps"] + 1, ADAPTER.obs_size)
        assert record["game_id"].startswith("fixture-") and record["seat"] == "0"
        episode = validate_episode(record, ADAPTER.obs_size, ADAPTER.num_actions)
        assert len(episode) == want["steps"] and episode.is_done
        assert episode.get_return() == pytest.approx(sum(want["rewards"]))
    # The same episodes acked away: the ids the server sends are the ones it stored.
    assert spool.ack([r["id"] for r in taken]) == 12
    spool.close()


def test_the_old_layout_is_migrated_field_by_field(tmp_path):
    """Every field the old layout carried lands in its place in the record."""
    shutil.copy(FIXTURES / "spool_v0" / "spool.sqlite3", tmp_path / "s.sqlite3")
    body = sqlite3.connect(tmp_path / "s.sqlite3").execute("SELECT body FROM episodes").fetchone()
    old = codec.decode_value(body[0])
    assert "id_" in old and "_observation_space" in old  # really the old layout
    new = from_legacy_state(old)
    np.testing.assert_array_equal(new["obs"], old["observations"]["data"]["observations"])
    np.testing.assert_array_equal(new["mask"], old["observations"]["data"]["action_mask"])
    np.testing.assert_array_equal(
        new["logits"], old["extra_model_outputs"]["action_dist_inputs"]["data"]
    )
    np.testing.assert_array_equal(new["logp"], old["extra_model_outputs"]["action_logp"]["data"])
    assert new["start_time"] == old["_start_time"] and new["policy"] == "learned"
    assert record_id(old) == record_id(new) == old["id_"]
    with pytest.raises(RecordError):
        from_legacy_state({**old, "t_started": 1})  # the old trainer refused these too


def _record() -> dict:
    rec = SeatRecorder("g", "0", "learned")
    obs, mask = ADAPTER.terminal_observation()
    rec.add_decision(obs, mask, 0, -0.5, np.zeros(ADAPTER.num_actions, np.float32), 3)
    record = rec.close(1.0, ADAPTER.terminal_observation())
    assert record is not None
    return record


def test_a_newer_record_version_is_refused_not_half_read(tmp_path):
    with pytest.raises(RecordError, match="newer"):
        read_record({**_record(), "record": RECORD_VERSION + 1})
    with pytest.raises(EpisodeRejected, match="newer"):
        validate_episode(
            {**_record(), "record": RECORD_VERSION + 1}, ADAPTER.obs_size, ADAPTER.num_actions
        )
    for bad in ({**_record(), "record": True}, {**_record(), "record": 0}, [1, 2], "x"):
        with pytest.raises(RecordError):
            read_record(bad)
    # In a spool: counted as corrupt and dropped, the readable ones still taken.
    spool = EpisodeSpool(tmp_path / "s.sqlite3")
    good = _record()
    spool.put_many([{**_record(), "record": RECORD_VERSION + 1}, good])
    assert [r["id"] for r in spool.take()] == [good["id"]]
    assert spool.stats()["corrupt"] == 1


def test_extra_per_step_arrays_travel_through_the_spool_untouched(tmp_path):
    """Room for later policies (candidate features of varying count per step): named arrays
    in `extra` are stored and read back as they were; the trainer ignores names it does not
    use."""
    record = _record()
    features = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)  # padded candidates
    counts = np.asarray([5, 2], np.int64)
    record["extra"] = {"candidate_features": features, "candidate_count": counts}
    spool = EpisodeSpool(tmp_path / "s.sqlite3")
    spool.put(record)
    (back,) = spool.take()
    np.testing.assert_array_equal(back["extra"]["candidate_features"], features)
    np.testing.assert_array_equal(back["extra"]["candidate_count"], counts)
    assert len(validate_episode(back, ADAPTER.obs_size, ADAPTER.num_actions)) == 1
