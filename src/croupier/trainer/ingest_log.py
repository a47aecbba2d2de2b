"""The trainer's durable record of the episodes it has settled: de-duplication across restarts.

Servers deliver at least once and keep an episode until it is acknowledged. The trainer
acknowledges an episode only once it is *settled*: a learner update that used it has completed
(`trained`), or it was dropped by policy (`stale`, `backlog`, `lag`: counted) or refused
(`rejected`). Its id is written here (and flushed to the OS, which keeps it through a SIGKILL)
before the ack leaves, so an episode a server sends again after a restart is either in the log
(settled: dropped as a duplicate, and acked again) or was never acknowledged (and is taken
now). An episode waiting in the trainer's inbox, or in an update that has not completed, is in
no log: a trainer killed then gets it again from its server.

One line per id: `<id>\t<outcome>`. `accepted` is the outcome logs written before acks waited
for training hold (an episode taken into the inbox); it still reads as settled. The file is
compacted to the newest `keep` ids when it grows past twice that.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter, OrderedDict
from pathlib import Path

from croupier.files import write_atomic

OUTCOMES = ("trained", "stale", "backlog", "lag", "rejected", "accepted")
# The outcomes that are drops by policy (counted), as against trained or refused.
DROPPED = ("stale", "backlog", "lag")
# What an episode id may be: a line here is `<id>\t<outcome>`, so a tab, newline or other
# control character in an id would write a line of the peer's choosing. Servers make uuid hex.
SAFE_EPISODE_ID = re.compile(r"[A-Za-z0-9._~:-]{1,128}")


class IngestLog:
    def __init__(self, path: Path | None, keep: int = 200_000):
        self.path = path
        self.keep = keep
        self.ids: OrderedDict[str, str] = OrderedDict()
        self._lines = 0
        self._lock = threading.Lock()
        self._file = None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            for episode_id, outcome in read_ingest_log(path):
                self.ids[episode_id] = outcome
                self.ids.move_to_end(episode_id)
                self._lines += 1
            self._trim()
        self._file = path.open("a", encoding="utf-8")
        if path.stat().st_size and not _ends_with_newline(path):
            self._file.write("\n")  # a line torn by a crash must not swallow the next one

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def record(self, entries: list[tuple[str, str]]) -> None:
        """Remember these (id, outcome) pairs; on disk before this returns. An id that is not
        a safe one (`SAFE_EPISODE_ID`) is not remembered: no line is ever forged."""
        entries = [(i, o) for i, o in entries if SAFE_EPISODE_ID.fullmatch(i)]
        if not entries:
            return
        with self._lock:
            for episode_id, outcome in entries:
                self.ids[episode_id] = outcome
            self._trim()
            if self._file is None:
                return
            self._file.write("".join(f"{i}\t{o}\n" for i, o in entries))
            self._file.flush()
            self._lines += len(entries)
            if self._lines > 2 * self.keep:
                self._compact()

    def _trim(self) -> None:
        while len(self.ids) > self.keep:
            self.ids.popitem(last=False)

    def _compact(self) -> None:
        assert self.path is not None and self._file is not None
        self._file.close()
        lines = "".join(f"{i}\t{o}\n" for i, o in self.ids.items())
        write_atomic(self.path, lines, tmp=self.path.with_suffix(".tmp"))
        self._file = self.path.open("a", encoding="utf-8")
        self._lines = len(self.ids)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_ingest_log(path: Path) -> list[tuple[str, str]]:
    """Every (id, outcome) line of a log, in order (a torn last line is skipped)."""
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            episode_id, sep, outcome = line.rstrip("\n").partition("\t")
            if sep and outcome in OUTCOMES:
                out.append((episode_id, outcome))
    return out


def outcome_counts(path: Path) -> Counter[str]:
    """How many distinct ids a log holds per outcome."""
    return Counter(dict(read_ingest_log(path)).values())
