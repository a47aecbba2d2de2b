"""The HTTP API's OpenAPI documents, as published in `docs/openapi/<game>.json` for engine teams
that generate a client in their own language (`croupier openapi --game G --out FILE`).

A server plays one game, and its document is that game's: the game's name, seats, state,
action and payoff types (`croupier.api.contract`). So there is one document per game; the
built-in games' are published side by side (`PUBLISHED`), and a server serves its own at
`/openapi.json`."""

from __future__ import annotations

import json
from pathlib import Path

from croupier.api.app import create_app
from croupier.config import ServerConfig

# The games whose documents are committed under docs/openapi/ (the vector game's depends on
# its sizes: `croupier openapi --game vector --obs-size N --num-actions M`).
PUBLISHED = ("leduc-holdem", "uno", "doudizhu")
DOCS_DIR = Path("docs/openapi")


def openapi_json(game: str = "leduc-holdem", **config: object) -> str:
    """Stable text: sorted keys, two-space indent, trailing newline (diffs stay readable)."""
    app = create_app(ServerConfig(game=game, **config))  # type: ignore[arg-type]
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


def published_path(root: Path, game: str) -> Path:
    return root / DOCS_DIR / f"{game}.json"
