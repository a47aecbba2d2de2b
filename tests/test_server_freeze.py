"""A hung server costs only its own games, with real processes: two `croupier serve`, 64 routed
leduc tables (a third through the per-server batch queues), one server SIGSTOPped for 80 s mid-
play and SIGCONTed (loopback only; the run is bounded and SIGCONTs on every way out). The fast
checks of the same pieces, in process: tests/test_slow_server.py."""

from __future__ import annotations

import pytest

from croupier.bench.freeze import run_server_freeze
from croupier.client import Deadlines

pytestmark = [pytest.mark.system, pytest.mark.long]  # ~2.5 min: `make test-long`


def test_one_frozen_server_of_two_leaves_the_fleet_playing_and_fails_no_decision():
    report = run_server_freeze(games=64, freeze_at_s=15, freeze_s=80, seconds=110)
    print(f"\nserver freeze: {report.to_dict()}")
    assert report.frozen_games_at_freeze > 0  # it was frozen mid-hand
    # No failure reached a table: each call the frozen server held moved to the other.
    assert report.errors == 0, report.error_samples
    # The healthy server's share kept playing, and the frozen server's games moved to it.
    assert report.during_over_before >= 0.4, report.hands_per_s
    assert report.failover["circuits_opened"] >= 1 and report.failover["games_moved"] >= 1
    # Each frozen call waited one deadline, then its game moved (a resume is milliseconds).
    assert report.longest_wait_s <= Deadlines().total_s, report.longest_wait_s
    # Thawed, a probe found it answering again: new games reach it.
    assert report.failover["circuits_closed"] >= 1, report.failover
    assert report.hands_after_per_s > 0
