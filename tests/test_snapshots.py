"""`bench/curve.py` `Snapshots`: the served versions copied as a run goes, minute 0 being the
first version served (a trainer distilling the rules' clone first serves nothing for a while)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from croupier.bench.curve import Snapshots

pytestmark = pytest.mark.unit


def _serve(weights: Path, version: int) -> None:
    (weights / f"v{version}.weights").write_bytes(b"w" * version)
    (weights / "latest.json").write_text(
        json.dumps({"version": version, "file": f"v{version}.weights", "spec": {}})
    )


def test_minute_0_is_the_first_version_served_and_each_version_is_copied(tmp_path):
    weights, folder = tmp_path / "weights", tmp_path / "snapshots"
    weights.mkdir()
    with Snapshots(weights, folder, every_s=0.2) as snaps:
        time.sleep(1.5)  # nothing served yet: nothing taken, and no clock running
        assert snaps.taken == []
        _serve(weights, 1)
        time.sleep(1.2)
        _serve(weights, 2)
        time.sleep(0.6)
    first, last = snaps.taken[0], snaps.taken[-1]
    assert first["seconds"] == 0.0 and first["version"] == 1
    assert last["version"] == 2 and 1.0 < last["seconds"] < 3.0  # not counting the 1.5 s wait
    seconds = [s["seconds"] for s in snaps.taken]
    assert seconds == sorted(seconds) and len(seconds) >= 4
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        {s["file"] for s in snaps.taken}
    )  # one copy per version, its bytes the served file's
    assert (folder / last["file"]).read_bytes() == b"ww"
