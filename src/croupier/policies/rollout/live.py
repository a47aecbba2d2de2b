"""The live arena: a match table from the games the engine really plays.

At `end` the server knows which policy played every seat and every seat's payoff; that is all
this table uses, so it works for any game, one croupier has never seen included, with no
simulator. One row per (player, the other seats' players):

    player "frozen@12", opponents ["rules"]: games 840, mean +0.41, std 2.9, ci95 0.20

A player is a seat's policy with its version resolved: every seat that played a fixed version
N (`learned` pinned at N, `frozen@N`, `production`, a canary or league seat) is `frozen@N`, one
name for one policy; `learned@latest` (its version moves), `rules` and `random` are themselves.
The table only grows by games (a version's weights never change, so old games stay evidence);
it is bounded in rows (the least recently played row goes first) and, with a weights dir, saved
to `live_arena.json` beside `promotions.jsonl` at most every `SAVE_EVERY_S` and at shutdown, so
a restart keeps it (a crash loses at most the last interval's games).

`compare(a, b)` is the evidence `croupier promote --auto --evidence live` reads (fleet-wide, by
merging the servers' rows): A's payoff minus B's against the same opponents.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croupier.files import write_atomic
from croupier.policies.seats import SeatPolicy
from croupier.stats import Z95

log = logging.getLogger(__name__)

LIVE_FILE = "live_arena.json"
MAX_ROWS = 4096  # a row is ~100 bytes; players x opponent sets seen, least recent dropped
SAVE_EVERY_S = 10.0
Z95_ONE_SIDED = 1.645


def player_of(policy: SeatPolicy) -> str:
    """The one name of the policy a seat played (the table's row and column names)."""
    if policy.uses_model and policy.version is not None:
        return f"frozen@{policy.version}"
    if policy.kind == "learned":
        return "learned@latest"
    return policy.kind


@dataclass(slots=True)
class Cell:
    """Games, sum and sum of squares of one row's payoffs (mergeable across servers)."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x

    def merge(self, other: Cell) -> None:
        self.n += other.n
        self.total += other.total
        self.squares += other.squares

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def var(self) -> float:
        """Sample variance (0 for fewer than two games)."""
        if self.n < 2:
            return 0.0
        return max(0.0, (self.squares - self.n * self.mean**2) / (self.n - 1))

    @classmethod
    def of(cls, n: int, mean: float, std: float) -> Cell:
        """Back from a published row (games, mean, sample std): what the fleet merges."""
        return cls(n, n * mean, (n - 1) * std * std + n * mean * mean if n else 0.0)


def row_dict(player: str, opponents: tuple[str, ...], cell: Cell) -> dict[str, Any]:
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
        self._rows: OrderedDict[Key, Cell] = OrderedDict()
        self.games = 0
        self._saved_at = time.monotonic()
        self._dirty = False
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
                cell = self._rows[key] = Cell()
                while len(self._rows) > self.max_rows:
                    self._rows.popitem(last=False)
            else:
                self._rows.move_to_end(key)
            cell.add(float(payoffs[seat]))
        self.games += 1
        self._dirty = True
        if self.path is not None and time.monotonic() - self._saved_at > SAVE_EVERY_S:
            self.save()

    # --- views ---------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """Every row, most games first."""
        items = sorted(self._rows.items(), key=lambda kv: -kv[1].n)
        return [row_dict(player, opponents, cell) for (player, opponents), cell in items]

    def table(self) -> dict[str, Any]:
        return {"games": self.games, "persisted": self.path is not None, "rows": self.rows()}

    # --- persistence ---------------------------------------------------------------------

    def save(self) -> None:
        """Write the table (a few hundred KB at most) atomically; a failure is logged only:
        the table is evidence, not a reason to fail a game's `end`."""
        self._saved_at = time.monotonic()
        if self.path is None or not self._dirty:
            return
        data = {
            "games": self.games,
            "rows": [[p, list(o), c.n, c.total, c.squares] for (p, o), c in self._rows.items()],
        }
        try:
            write_atomic(self.path, json.dumps(data))
            self._dirty = False
        except OSError as e:
            log.warning("cannot save the live arena to %s: %s", self.path, e)

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            rows = [
                ((str(p), tuple(str(x) for x in o)), Cell(int(n), float(t), float(s)))
                for p, o, n, t, s in data["rows"]
            ]
            games = int(data["games"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable %s: %s", self.path, e)
            return
        self._rows = OrderedDict(rows[-self.max_rows :])
        self.games = games
        log.info("live arena: %d games, %d rows from %s", games, len(rows), self.path)


# --- evidence: one player against another, from one server's rows or a fleet's -------------


def merge_rows(tables: Iterable[Iterable[Mapping[str, Any]]]) -> dict[Key, Cell]:
    """Published rows (`LiveArena.rows()`) of several servers, summed per row."""
    merged: dict[Key, Cell] = {}
    for rows in tables:
        for row in rows:
            key = (str(row["player"]), tuple(row["opponents"]))
            cell = Cell.of(int(row["games"]), float(row["mean"]), float(row["std"]))
            merged.setdefault(key, Cell()).merge(cell)
    return merged


def compare(rows: Mapping[Key, Cell], a: str, b: str) -> dict[str, Any]:
    """A's mean payoff minus B's against the same opponents, pooled over every opponent set
    both met (weights n_a*n_b/(n_a+n_b), the usual stratified two-sample weights: each
    stratum's difference is unbiased, so the pooled one is, whatever the opponents' mix).
    Games are independent (not paired), so each stratum's variance is var_a/n_a + var_b/n_b.
    Head-to-head games (A against B) are not used: without the per-game pairing their
    difference has no honest variance, and a game that is not zero-sum would mislead."""
    strata = []
    for (player, opponents), cell_a in rows.items():
        if player != a or cell_a.n < 2:
            continue
        cell_b = rows.get((b, opponents))
        if cell_b is None or cell_b.n < 2:
            continue
        strata.append((opponents, cell_a, cell_b))
    weight = diff = var = 0.0
    games_a = games_b = 0
    per_opponents = []
    for opponents, ca, cb in strata:
        w = ca.n * cb.n / (ca.n + cb.n)
        d = ca.mean - cb.mean
        v = ca.var / ca.n + cb.var / cb.n
        weight += w
        diff += w * d
        var += w * w * v
        games_a += ca.n
        games_b += cb.n
        per_opponents.append(
            {"opponents": list(opponents), "games": [ca.n, cb.n], "diff": d, "se": math.sqrt(v)}
        )
    if not weight:
        return {"a": a, "b": b, "games": [0, 0], "diff": None, "se": None, "strata": []}
    se = math.sqrt(var) / weight
    return {
        "a": a,
        "b": b,
        "games": [games_a, games_b],
        "diff": diff / weight,
        "se": se,
        "ci95": Z95 * se,
        "strata": per_opponents,
    }
