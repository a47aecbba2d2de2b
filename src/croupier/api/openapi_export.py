"""The HTTP API's OpenAPI document, as committed in `docs/openapi.json` for engine teams that
generate a client in their own language (`croupier openapi --out docs/openapi.json`)."""

from __future__ import annotations

import json

from croupier.api.app import create_app
from croupier.config import ServerConfig


def openapi_json() -> str:
    """Stable text: sorted keys, two-space indent, trailing newline (diffs stay readable)."""
    app = create_app(ServerConfig())
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
