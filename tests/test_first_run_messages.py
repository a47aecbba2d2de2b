"""What a first run on a new game prints, as docs/your-game.md has a newcomer run it: the
trainer says why it starts untrained at its default log level, `croupier score` plays and
posts with an admin key alone and answers a refused key with one line (not a traceback), and
the arena names a four-seat game's duplicate sets as what they are, and a server that logged
its trainer link failing logs it coming up."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from croupier.arena.arena import MatchResult
from croupier.cli import app
from croupier.dashboard.score import score_loop
from croupier.games.registry import load_adapter
from croupier.trainer.run import Trainer, TrainOptions
from tests.helpers.servers import ThreadServer

ADMIN = "admin-key-for-the-score-test-0123"


def test_the_trainer_says_why_it_starts_untrained_at_its_default_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`croupier train` logs at warning by default: the reason must show there."""
    game = "tests.test_cards:Toy"  # a declared game with neither a rules bot nor a simulator
    trainer = Trainer(TrainOptions(game=game, checkpoint_dir=tmp_path))
    with caplog.at_level(logging.WARNING, logger="croupier.trainer.run"):
        assert trainer._start_from_rules(load_adapter(game), spec=None) is False
    assert "no rules-anchored start: toy has no rules bot" in caplog.text


def test_the_arena_names_a_four_seat_games_duplicate_sets() -> None:
    def result(hands: int, sets: int) -> MatchResult:
        return MatchResult("hearts", "learned", "rules", {}, hands, sets, 0.0, 0.0,
                           0.5, 0.0, 0.5, 1.0, 1.0, 0)  # fmt: skip

    assert "400 hands (100 duplicate sets of 4 hands)" in result(400, 100).format()
    assert "400 hands (200 duplicate pairs)" in result(400, 200).format()


def test_score_plays_and_posts_with_an_admin_key_and_refusals_are_one_line() -> None:
    with ThreadServer(admin_keys=[ADMIN]) as server:
        url = server.url
        results = asyncio.run(
            score_loop(url, "leduc-holdem", 20, None, admin_key=ADMIN, report=lambda r: None)
        )
        assert len(results) == 1 and results[0].hands >= 20
        refused = CliRunner().invoke(app, ["score", "--url", url, "--hands", "20"], env={})
    assert refused.exit_code == 1, refused.output
    assert "error: HTTP 401" in refused.output and "Traceback" not in refused.output


def test_a_server_logs_its_link_coming_up_after_it_logged_the_link_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At the default level (warning) a server that logged "connection refused" while its
    trainer was still starting also logs the link coming up, and the same failure after
    that is logged again."""
    import socket
    import threading

    from croupier.config import ServerConfig
    from croupier.link.client import TrainerLink
    from croupier.policies.learned import PolicyVersions
    from croupier.trajectories.spool import EpisodeSpool
    from tests.conftest import free_port, wait_for
    from tests.helpers.link import answer_handshake

    adapter = load_adapter("leduc-holdem")
    versions = PolicyVersions(adapter)
    port = free_port()  # nothing listens there yet: refused
    link = TrainerLink(ServerConfig(trainer=f"127.0.0.1:{port}"), versions,
                       EpisodeSpool(tmp_path / "spool.sqlite3"))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="croupier.link.client"):
        link.start()
        try:
            wait_for(lambda: link.errors >= 2, 10, 0.05, "refused connections")
            assert caplog.text.count("trainer link 127.0.0.1") == 1  # a repeat stays quiet
            listener = socket.create_server(("127.0.0.1", port))

            def one_session() -> None:  # a handshake, then the connection closes
                conn, _ = listener.accept()
                with conn:
                    state = {"rl_module": versions.weights(0), "weights_seq_no": 0}
                    answer_handshake(conn, versions, adapter, state)

            trainer = threading.Thread(target=one_session, daemon=True)
            trainer.start()
            wait_for(lambda: link.connects >= 1, 15, 0.05, "the link")
            trainer.join(10)
            listener.close()  # refused again
            wait_for(lambda: caplog.text.count("trainer link 127.0.0.1") >= 2, 15, 0.05,
                     "the refusal after the link was up")  # fmt: skip
        finally:
            link.stop()
    lines = [r.getMessage() for r in caplog.records]
    up = [i for i, m in enumerate(lines) if m.startswith("trainer link up")]
    assert len(up) == 1, lines
    assert any("trainer link 127.0.0.1" in m for m in lines[: up[0]]), lines
    assert any("trainer link 127.0.0.1" in m for m in lines[up[0] + 1 :]), lines
