"""The `croupier` command line: one function per command, each only parsing and wiring,
in one module per stage it drives: `serving` (serve, engine, status, openapi, export,
settings-doc), `training` (train, tune, pretrain), `arena` (eval, score, promote, tiers); the
`bench` commands are `croupier.bench.cli`. `serve` and `train` take their options from the
settings models in config.py, the others' few options stay beside their code."""

from __future__ import annotations

from croupier.bench.cli import bench_app

# isort: off
# Imported for their commands, which register on `app` in this order (the help lists them so).
from croupier.cli import serving, training, arena  # noqa: F401

# isort: on
from croupier.cli.common import app
from croupier.cli.serving import settings_markdown
from croupier.cli.training import duration_s, train_options

app.add_typer(arena.tiers_app, name="tiers")
app.add_typer(bench_app, name="bench")

__all__ = ["app", "duration_s", "main", "settings_markdown", "train_options"]


def main() -> None:
    app()
