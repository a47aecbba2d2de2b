"""Arena results for the dashboard's learning curve: payoff of each version against a yardstick.

A result is one JSON object (the `ArenaResult` model): which version played, against what, over
how many hands, its mean payoff per hand and the 95% CI half-width. They reach the server two
ways: `POST /v1/arena/results` (admin key), or a JSON-lines file the server is started with
(`croupier serve --arena-results FILE`), which it re-reads whenever the file changes and to
which posted results are appended.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from croupier.api.schemas import integer

log = logging.getLogger(__name__)

MAX_RESULTS = 10_000


class ArenaResult(BaseModel):
    # strict: numbers must be JSON numbers (no `false` or "0.5" taken for one), as the schema
    # says; integers still fill float fields.
    model_config = ConfigDict(strict=True)

    version: Annotated[integer(ge=0), Field(description="The weights version that played")]
    payoff: Annotated[float, Field(allow_inf_nan=False, description="Mean payoff per hand")]
    ci95: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    hands: integer(ge=1) = 1  # type: ignore[valid-type]
    opponent: Annotated[str, Field(min_length=1, max_length=64)] = "rules"
    time: Annotated[
        float | None, Field(allow_inf_nan=False, description="Unix time; default: on arrival")
    ] = None


class ArenaResults:
    """Results in memory (newest `MAX_RESULTS`), mirrored from/to an optional JSONL file."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self._posted: list[ArenaResult] = []
        self._from_file: list[ArenaResult] = []
        self._file_mtime: float | None = None
        self._lock = threading.Lock()

    def add(self, results: list[ArenaResult]) -> None:
        stamped = [
            r if r.time is not None else r.model_copy(update={"time": time.time()}) for r in results
        ]
        with self._lock:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    for r in stamped:
                        f.write(r.model_dump_json() + "\n")
            else:
                self._posted.extend(stamped)
                del self._posted[:-MAX_RESULTS]

    def all(self) -> list[ArenaResult]:
        with self._lock:
            self._reload()
            return sorted(self._posted + self._from_file, key=lambda r: (r.version, r.time or 0))

    def _reload(self) -> None:
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            self._from_file, self._file_mtime = [], None
            return
        if mtime == self._file_mtime:
            return
        results = []
        # "\n" only: str.splitlines also splits at U+2028, U+0085 ..., which JSON leaves as is
        for i, line in enumerate(self.path.read_text().split("\n")):
            if not line.strip():
                continue
            try:
                results.append(ArenaResult.model_validate(json.loads(line)))
            except (ValueError, ValidationError) as e:
                log.warning("%s line %d skipped: %s", self.path, i + 1, e)
        self._from_file, self._file_mtime = results[-MAX_RESULTS:], mtime
