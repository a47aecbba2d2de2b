"""The trainer's progress record: one JSON line per training iteration in
`<checkpoint-dir>/progress.jsonl` (written by `trainer/run.py`). Read here without importing
the trainer (RLlib): the demo and the benchmarks follow a trainer running in another process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROGRESS = "progress.jsonl"


def last_progress(path: Path) -> dict[str, Any] | None:
    """The last iteration's record, or None before the first (or without the file)."""
    try:
        lines = path.read_text().strip().splitlines()
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None
