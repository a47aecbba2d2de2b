"""What a first run on a new game prints, as docs/your-game.md has a newcomer run it: the
trainer says why it starts untrained at its default log level, `croupier score` plays and
posts with an admin key alone and answers a refused key with one line (not a traceback), and
the arena names a four-seat game's duplicate sets as what they are."""

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
