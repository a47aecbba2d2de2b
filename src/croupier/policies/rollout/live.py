"""The live arena: a match table from the games the engine really plays.

At `end` the server knows which policy played every seat and every seat's payoff; that is all
this table uses, so it works for any game, one croupier has never seen included, with no
simulator. One row per (player, the other seats' players):

    player "frozen@12", opponents ["rules"]: games 840, mean +0.41, std 2.9, ci95 0.20

A player is a seat's policy with its version resolved: every seat that played a fixed version
N (`learned` pinned at N, `frozen@N`, `production`, a canary or league seat) is `frozen@N`, one
name for one policy, and `frozen@N:greedy` when it played the argmax (a tuned seat, a tier's:
`frozen@N:temp=2:rules=0.4`); `learned@latest` (its
version moves), `rules` and `random` are themselves, a search seat its spec in full.
The table only grows by games (a version's weights never change, so old games stay evidence);
it is bounded in rows (the least recently played row goes first) and, with a weights dir, saved
to `live_arena.json` beside `promotions.jsonl` at most every `SAVE_EVERY_S` and at shutdown, so
a restart keeps it (a crash loses at most the last interval's games).

Its rows are the evidence `croupier promote --auto --evidence live` reads (fleet-wide, by
merging the servers' rows: `arena/promote_live.py`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from croupier.files import write_atomic
from croupier.policies.seats import SeatPolicy, tuning_suffix
from croupier.stats import Z95, Mean

log = logging.getLogger(__name__)

LIVE_FILE = "live_arena.json"
MAX_ROWS = 4096  # a row is ~100 bytes; players x opponent sets seen, least recent dropped
SAVE_EVERY_S = 10.0
# Rows saved as (count, mean, sum of squared deviations): `stats.Mean`'s own numbers. A file
# without it holds (count, sum, sum of squares), read and converted.
ROW_FORMAT = 2


def player_of(policy: SeatPolicy) -> str:
    """The one name of the policy a seat played (the table's row and column names); a greedy
    seat (`…:greedy`) plays another policy than the sampling one: its own name."""
    if policy.uses_model and policy.version is not None:
        name = f"frozen@{policy.version}"
    elif policy.kind == "learned":
        name = "learned@latest"
    elif policy.search is not None:  # a search seat (a tier's too): its settings in full
        return policy.search.spec()
    else:
        name = policy.kind
    # A tuned seat (a tier: `:temp=T`, `:rules=P`) plays yet another policy: its own name,
    # never mixed into the plain version's evidence (`promote --evidence live` reads that).
    return name + tuning_suffix(policy.greedy, policy.temperature, policy.rules_share)


def row_dict(player: str, opponents: tuple[str, ...], cell: Mean) -> dict[str, Any]:
    """One published row: games, mean payoff, sample std (so servers' rows merge) and CI."""
    std = math.sqrt(cell.var)
    return {
        "player": player,
        "opponents": list(opponents),
        "games": cell.n,
        "mean": cell.mean,
        "std": std,
        "ci95": Z95 * std / math.sqrt(cell.n) if cell.n else 0.0,
    }


Key = tuple[str, tuple[str, ...]]


class LiveArena:
    def __init__(self, weights_dir: Path | None = None, max_rows: int = MAX_ROWS):
        self.path = Path(weights_dir) / LIVE_FILE if weights_dir else None
        self.max_rows = max_rows
        self._rows: OrderedDict[Key, Mean] = OrderedDict()
        self.games = 0
        self._saved_at = time.monotonic()
        self._dirty = False
        # Saving a full table (4,096 rows, ~330 KB) took ~24 ms (json ~10, fsyncs ~8): written
        # off the event loop, one write at a time, from a copy taken on it (~1 ms).
        self._writer: ThreadPoolExecutor | None = None
        self._load()

    # --- recording (every `end`, on the event loop) --------------------------------------

    def add_game(self, plan: Mapping[str, SeatPolicy], payoffs: Mapping[str, float]) -> None:
        """One ended game: every seat's payoff into its (player, opponents) row."""
        players = {seat: player_of(p) for seat, p in plan.items()}
        names = sorted(players.values())
        for seat, player in players.items():
            opponents = list(names)
            opponents.remove(player)  # one of its kind: the others are the opponents
            key = (player, tuple(opponents))
            cell = self._rows.get(key)
            if cell is None:
                cell = self._rows[key] = Mean()
                while len(self._rows) > self.max_rows:
                    self._rows.popitem(last=False)
            else:
                self._rows.move_to_end(key)
            cell.add(float(payoffs[seat]))
        self.games += 1
        self._dirty = True
        if self.path is not None and time.monotonic() - self._saved_at > SAVE_EVERY_S:
            self.save(wait=False)

    # --- views ---------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """Every row, most games first."""
        items = sorted(self._rows.items(), key=lambda kv: -kv[1].n)
        return [row_dict(player, opponents, cell) for (player, opponents), cell in items]

    def table(self) -> dict[str, Any]:
        return {"games": self.games, "persisted": self.path is not None, "rows": self.rows()}

    # --- persistence ---------------------------------------------------------------------

    def save(self, wait: bool = True) -> None:
        """Write the table atomically: on a writer thread (`wait=False`, while games end), or
        now, after any write in flight (at shutdown). A failure is logged only: the table is
        evidence, not a reason to fail a game's `end`."""
        self._saved_at = time.monotonic()
        if self.path is None or not self._dirty:
            if wait and self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
            return
        data = {
            "games": self.games,
            "format": ROW_FORMAT,
            "rows": [[p, o, c.n, c.mean, c.m2] for (p, o), c in self._rows.items()],
        }
        self._dirty = False
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="live-arena")
        done = self._writer.submit(self._write, self.path, data)
        if wait:
            done.result()
            self._writer.shutdown(wait=True)
            self._writer = None

    @staticmethod
    def _write(path: Path, data: dict[str, Any]) -> None:
        try:
            write_atomic(path, orjson.dumps(data))  # ~10x json's speed: it holds the GIL
        except OSError as e:
            log.warning("cannot save the live arena to %s: %s", path, e)

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            read = _mean if data.get("format") == ROW_FORMAT else _mean_from_sums
            rows = [
                ((str(p), tuple(str(x) for x in o)), read(int(n), float(a), float(b)))
                for p, o, n, a, b in data["rows"]
            ]
            games = int(data["games"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable %s: %s", self.path, e)
            return
        self._rows = OrderedDict(rows[-self.max_rows :])
        self.games = games
        log.info("live arena: %d games, %d rows from %s", games, len(rows), self.path)


def _mean(n: int, mean: float, m2: float) -> Mean:
    m = Mean()
    m.n, m.mean, m.m2 = n, mean, m2
    return m


def _mean_from_sums(n: int, total: float, squares: float) -> Mean:
    """A row saved before `ROW_FORMAT` (count, sum, sum of squares)."""
    mean = total / n if n else 0.0
    return _mean(n, mean, max(0.0, squares - n * mean * mean))
