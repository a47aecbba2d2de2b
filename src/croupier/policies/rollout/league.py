"""League seats: what a `league` seat plays, drawn per game from a population.

Two sampling schedules (`croupier serve --league-sampling`):
- `recent`: half the time one of the most recent loaded versions, half the time one of the
  strongest by the last league's ratings (`croupier eval --league`): a sparring partner near
  the learner's level;
- `fsp`: any loaded version, uniformly: fictitious play, where the learner answers the
  average of its past selves rather than its latest (which cycles in a game like poker).
  The server keeps one version per `--league-every` version numbers in memory besides the
  newest ones, so "loaded" spans the whole run.
Either way `--league-rules-share` of the league seats are played by the game's rules instead
(a fixed point of reference in the population: the opponent a studio's players meet today),
and `--league-best-response-share` by the exact best response to the newest version (a game
small enough to walk whole: `policies/best_response.py`), once its first table is ready.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from croupier.policies.seats import BEST_RESPONSE

log = logging.getLogger(__name__)

RATINGS_FILE = "ratings.json"
LEAGUE_RECENT = 4
LEAGUE_STRONGEST = 2
SAMPLINGS = ("recent", "fsp")


@dataclass(frozen=True)
class LeagueSampling:
    """How `league` seats are drawn (the server's `--league-sampling`, `--league-rules-share`)."""

    sampling: str = "recent"
    rules_share: float = 0.0
    best_response_share: float = 0.0

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"league sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if not (isinstance(self.rules_share, int | float) and 0.0 <= self.rules_share <= 1.0):
            raise ValueError(
                f"league rules share must be between 0 and 1, got {self.rules_share!r}"
            )
        share = self.best_response_share
        if not (isinstance(share, int | float) and 0.0 <= share <= 1.0 - self.rules_share):
            raise ValueError(
                "league best-response share must be between 0 and 1 less the rules share, "
                f"got {share!r}"
            )


class LeaguePool:
    def __init__(
        self,
        weights_dir: Path | None,
        rng: np.random.Generator,
        sampling: LeagueSampling | None = None,
    ):
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self._rng = rng  # the rollout's own: one stream for canary draws and league picks
        self.sampling = sampling or LeagueSampling()
        self._ratings: dict[str, float] = {}
        self._ratings_mtime = 0.0

    def draw(self, loaded: list[int], best_response: bool = False) -> int | str | None:
        """A league seat's opponent: a loaded version, None for the game's rules, or
        `BEST_RESPONSE` (only when `best_response`: the server has a table to play)."""
        rules, br = self.sampling.rules_share, self.sampling.best_response_share
        if rules or br:
            u = self._rng.random()
            if u < rules:
                return None
            if best_response and u < rules + br:
                return BEST_RESPONSE
        if self.sampling.sampling == "fsp":
            return int(loaded[int(self._rng.integers(len(loaded)))])
        return self.version(loaded)

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
