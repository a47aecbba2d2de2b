"""League seats: a frozen opponent drawn from the recent and the strongest loaded versions."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

RATINGS_FILE = "ratings.json"
LEAGUE_RECENT = 4
LEAGUE_STRONGEST = 2


class LeaguePool:
    def __init__(self, weights_dir: Path | None, rng: np.random.Generator):
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self._rng = rng  # the rollout's own: one stream for canary draws and league picks
        self._ratings: dict[str, float] = {}
        self._ratings_mtime = 0.0

    def version(self, loaded: list[int]) -> int:
        """A frozen opponent: half the time one of the most recent versions, half the time one
        of the strongest by the last league's ratings (`croupier eval --league`)."""
        recent = loaded[-LEAGUE_RECENT:]
        ratings = self._read_ratings()
        rated = sorted(
            (v for v in loaded if _rating(ratings, v) is not None),
            key=lambda v: _rating(ratings, v),
            reverse=True,
        )[:LEAGUE_STRONGEST]
        pool = rated if rated and self._rng.random() < 0.5 else recent
        return int(pool[int(self._rng.integers(len(pool)))])

    def _read_ratings(self) -> dict[str, float]:
        """{player: ordinal} from `<weights-dir>/ratings.json`, re-read when it changes."""
        if self.weights_dir is None:
            return {}
        path = self.weights_dir / RATINGS_FILE
        try:
            mtime = path.stat().st_mtime
            if mtime != self._ratings_mtime:
                table = json.loads(path.read_text())["ratings"]
                self._ratings = {str(k): float(v["ordinal"]) for k, v in table.items()}
                self._ratings_mtime = mtime
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable %s: %s", path, e)
            self._ratings_mtime = time.time()
        return self._ratings


def _rating(ratings: dict[str, float], version: int) -> float | None:
    """A version's ordinal: `frozen@N` (`learned@N` in ratings files written before the name
    was unified)."""
    found = ratings.get(f"frozen@{version}")
    return found if found is not None else ratings.get(f"learned@{version}")
