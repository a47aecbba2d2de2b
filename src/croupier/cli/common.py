"""What every command module shares: the `croupier` Typer app, help laid out for a pipe,
logging, and writing a text to stdout or a file."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import typer
import typer.rich_utils

# Help sent to a pipe or a file (not a terminal) is laid out by rich at 80 columns, where the
# longest option names (`--rules-anchor-release --no-rules-anchor-release`) take half of it and
# each description wraps to a word or two a line; at 120 they read. COLUMNS or TERMINAL_WIDTH,
# when set, still decide.
if typer.rich_utils.MAX_WIDTH is None and "COLUMNS" not in os.environ and not sys.stdout.isatty():
    typer.rich_utils.MAX_WIDTH = 120

app = typer.Typer(
    help="Serve, record and train RLlib policies behind a card game's decision API.",
    no_args_is_help=True,
    add_completion=False,
)


def echo_or_write(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(message)s")


def side_map(text: str, flag: str) -> dict[str, str]:
    """`landlord=learned,peasant=rules` as {side: policy}; a clear usage error otherwise."""
    try:
        return dict(part.split("=", 1) for part in (x.strip() for x in text.split(",")))
    except ValueError:
        raise typer.BadParameter("expected side=policy,...", param_hint=flag) from None
