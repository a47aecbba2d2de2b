"""What the rules decided, written as offline episodes RLlib's offline API reads (`croupier
pretrain`): Parquet files of one row per step, no pickle anywhere.

Columns (one row per decision; an episode is one seat's hand):
    eps_id str, t int64, obs list<float32>, action_mask list<float32>, actions int64,
    rewards float32 (0, the seat's payoff on its last step), new_obs, new_action_mask,
    terminateds bool, truncateds bool
`obs`/`action_mask` are the two halves of the module's Dict observation; the pretrain
pre-learner (`trainer/pretrain.py`) puts them back together.

The directory is bounded in bytes (`max_bytes`, the files this writer names, those found there
at start included): past it the oldest files are deleted, and counted (`files_dropped`), as the
spool drops its oldest episodes; without it any engine could fill the disk with `record: rules`
games.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

ROWS_PER_FILE = 20_000
FILE_GLOB = "rules-*.parquet"  # the files this writer names (`_flush_locked`)

SCHEMA = pa.schema(
    [
        ("eps_id", pa.string()),
        ("t", pa.int64()),
        ("obs", pa.list_(pa.float32())),
        ("action_mask", pa.list_(pa.float32())),
        ("actions", pa.int64()),
        ("rewards", pa.float32()),
        ("new_obs", pa.list_(pa.float32())),
        ("new_action_mask", pa.list_(pa.float32())),
        ("terminateds", pa.bool_()),
        ("truncateds", pa.bool_()),
    ]
)


class OfflineWriter:
    """Buffers recorded episodes and writes them as Parquet parts into `directory`."""

    def __init__(
        self,
        directory: Path,
        terminal: tuple[np.ndarray, np.ndarray],
        rows_per_file: int = ROWS_PER_FILE,
        max_bytes: int = 1 << 30,
    ):
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.terminal = terminal
        self.rows_per_file = rows_per_file
        self._rows: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
        self._lock = threading.Lock()
        self.episodes = 0
        self.steps = 0
        self.files = 0
        self.max_bytes = max_bytes
        self.files_dropped = 0
        self._bound()  # what an earlier run left counts too

    def add_episode(
        self,
        game_id: str,
        seat: str,
        steps: list[tuple[np.ndarray, np.ndarray, int]],
        payoff: float,
    ) -> None:
        eps_id = f"{game_id}:{seat}:{uuid.uuid4().hex[:8]}"
        n = len(steps)
        with self._lock:
            rows = self._rows
            for t, (obs, mask, action) in enumerate(steps):
                last = t == n - 1
                new_obs, new_mask = self.terminal if last else steps[t + 1][:2]
                rows["eps_id"].append(eps_id)
                rows["t"].append(t)
                rows["obs"].append(np.asarray(obs, np.float32))
                rows["action_mask"].append(np.asarray(mask, np.float32))
                rows["actions"].append(int(action))
                rows["rewards"].append(float(payoff) if last else 0.0)
                rows["new_obs"].append(np.asarray(new_obs, np.float32))
                rows["new_action_mask"].append(np.asarray(new_mask, np.float32))
                rows["terminateds"].append(last)
                rows["truncateds"].append(False)
            self.episodes += 1
            self.steps += n
            if len(rows["t"]) >= self.rows_per_file:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def stats(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "episodes": self.episodes,
            "steps": self.steps,
            "files": self.files,
            "files_dropped": self.files_dropped,
            "max_bytes": self.max_bytes,
            "buffered_steps": len(self._rows["t"]),
        }

    def _flush_locked(self) -> None:
        if not self._rows["t"]:
            return
        columns = {
            name: (
                pa.array([list(map(float, a)) for a in values], type=SCHEMA.field(name).type)
                if isinstance(SCHEMA.field(name).type, pa.ListType)
                else pa.array(values, type=SCHEMA.field(name).type)
            )
            for name, values in self._rows.items()
        }
        table = pa.table(columns, schema=SCHEMA)
        name = f"rules-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.directory / f".{name}.tmp"
        pq.write_table(table, tmp)
        tmp.rename(self.directory / name)  # readers never see half a file
        self.files += 1
        self._rows = {name: [] for name in SCHEMA.names}
        self._bound()

    def _bound(self) -> None:
        """Delete the oldest files while the directory's holds more than `max_bytes`."""
        files = []
        for path in self.directory.glob(FILE_GLOB):
            try:
                stat = path.stat()
            except FileNotFoundError:  # deleted meanwhile (a pretrain run tidying up)
                continue
            files.append((stat.st_mtime_ns, path.name, stat.st_size, path))
        files.sort()
        total = sum(f[2] for f in files)
        for _, _, size, path in files:
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            self.files_dropped += 1
            log.warning("offline episodes %s deleted: the directory is past %d bytes",
                        path.name, self.max_bytes)  # fmt: skip
