"""The small things a newcomer hit (issue 17, point 6): a one-line error for an unknown game,
`train --help` naming the adapter form and readable when piped, the Kuhn example's results by
player."""

from __future__ import annotations

import random

import pytest
from typer.testing import CliRunner

from croupier.cli import app


def test_engine_with_an_unknown_game_says_so_in_one_line() -> None:
    result = CliRunner().invoke(app, ["engine", "--game", "chess", "--hands", "1"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown game 'chess'" in lines[0], result.output


def test_train_help_names_the_adapter_form() -> None:
    result = CliRunner().invoke(app, ["train", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "pkg.module:Adapter" in result.output


@pytest.mark.integration  # a `croupier` process: help is laid out for its own stdout
def test_help_sent_to_a_pipe_keeps_its_descriptions_readable() -> None:
    """Outside a terminal rich would lay help out at 80 columns: a word or two a line."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    env["PYTHONPATH"] = os.pathsep.join(["src", env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "croupier", "train", "--help"], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if "--rules-entropy-boost" in x)
    assert "An entropy bonus over the algorithm's own" in line, done.stdout


def test_kuhn_play_groups_results_by_player_not_policy(monkeypatch) -> None:
    """`learned,learned` is two players (the first always wins 1 here): two entries, each with
    every hand, whichever seat the player sat in."""
    import examples.kuhn.play as kuhn

    def play_hand(url: str, seats: list[str], rng: random.Random) -> list[float]:
        first_in_seat_0 = seats[0] == "learned#A"
        return [1.0, -1.0] if first_in_seat_0 else [-1.0, 1.0]

    monkeypatch.setattr(kuhn, "play_hand", play_hand)
    result = kuhn.play("http://unused", 10, ["learned#A", "learned#B"], tables=2)
    assert result == {
        "0:learned#A": {"hands": 10, "mean": 1.0},
        "1:learned#B": {"hands": 10, "mean": -1.0},
    }
