"""Finished episodes waiting for the trainer: a durable queue in SQLite (WAL mode).

`end` writes each episode here before it answers; an episode leaves only when the trainer
acknowledges its id, which it does once it has trained it or dropped it by policy
(at-least-once: after a reconnect everything unacknowledged is sent again, and the trainer
drops ids it has settled). A restarted server finds its backlog on disk.

Writes happen off the event loop: `write` hands episodes to a writer thread (`SpoolWriter`) and
returns a future the caller awaits, resolved once they are committed, so `end` still answers
only after its episodes are durable; episodes that arrive while a commit runs go together in
the next one (a group commit). Measured: ~118 µs of event-loop time per episode written
inline (~340 µs once the spool was full, with its delete), docs/operations.md.

The spool is bounded by episodes and by bytes, checked before each insert: to make room the
oldest episodes are deleted, in chunks (down to 0.1% below the bound: one DELETE per ~50
writes at the default bound, not one per write), and counted as dropped, so a long trainer
outage never fills the disk or the memory. An episode that could never leave (bigger than the
spool's byte bound, or than the link's largest message: `max_episode_bytes`) is refused before
anything is deleted for it, and counted (`refused_too_big`): before, a 577 MiB episode was
inserted first, took the spool past its bound and evicted every other episode, and was then
dropped unsendable.
Bodies are episode records (`croupier.trajectories.record`) in msgpack
(`croupier.trajectories.codec`, the link's encoding too), read back with a decoder that never
unpickles. Bodies of the layout before the record (spools written by older versions) are
migrated as they are read.

Three threads use it: the writer (`put_many`, fed by the event loop's `write`), the link
client (`take`, `ack`, `rewind`) and the event loop's views; one lock serialises them, and
everything slow (encoding, decoding) happens outside it.

Why ~490 lines in one module: the queue and its writer thread share one lock and one set of
counters; the record format is `trajectories/record.py`, its encoding `trajectories/codec.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from croupier.trajectories import codec
from croupier.trajectories.record import RecordError, read_record, record_len

log = logging.getLogger(__name__)

SPOOL_FILE = "spool.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id TEXT NOT NULL UNIQUE,
    steps INTEGER NOT NULL,
    nbytes INTEGER NOT NULL,
    body BLOB NOT NULL
)
"""


class EpisodeSpool:
    def __init__(
        self,
        path: Path | None = None,
        max_episodes: int = 50_000,
        max_bytes: int = 1 << 30,
        max_episode_bytes: int | None = None,
    ):
        """`path`: the SQLite file (None: an in-memory database, for tests and experiments).
        `max_episode_bytes`: the largest encoded episode the link can ship (None: no trainer,
        so only `max_bytes` bounds one)."""
        if max_episodes < 1 or max_bytes < 1 or (max_episode_bytes or 1) < 1:
            raise ValueError("the spool bounds must be at least 1")
        self.path = path
        self.max_episodes = max_episodes
        self.max_bytes = max_bytes
        self.max_episode_bytes = min(max_bytes, max_episode_bytes or max_bytes)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            check_same_thread=False,
            isolation_level=None,  # autocommit: each statement is its own transaction
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives the process being killed (it is in the WAL file);
            # only a power loss can take the last commits. FULL would fsync every `end`.
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._lock = threading.Lock()
        count, nbytes, steps = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(nbytes), 0), COALESCE(SUM(steps), 0) FROM episodes"
        ).fetchone()
        self._count, self._bytes, self._steps = int(count), int(nbytes), int(steps)
        # Everything at or below the cursor has been sent on the current connection.
        self._cursor = 0
        self._unsent_count, self._unsent_steps = self._count, self._steps
        self.recovered = self._count  # found on disk at startup
        self.put_total = 0
        self.shipped = 0
        self.acked = 0
        self.dropped = 0
        self.corrupt = 0
        self.too_big = 0  # over the trainer's message limit on its own: never sendable
        self.refused_too_big = 0  # never spooled: over `max_episode_bytes`
        self.put_seconds = 0.0
        self.put_calls = 0  # writes (transactions): `end:batch` writes many episodes in one
        self._writer: SpoolWriter | None = None

    # --- off the event loop --------------------------------------------------------------

    def write(self, episodes: list[dict[str, Any]]) -> asyncio.Future[None]:
        """Queue episodes for the writer thread (from the event loop); await the future
        returned: it is done once they are committed (or has the write's error)."""
        return self._writer_thread().write(episodes)

    def write_later(self, episodes: list[dict[str, Any]]) -> None:
        """Queue episodes for the writer thread; nobody waits for the commit (an episode cut
        mid-game: no answer depends on it)."""
        self._writer_thread().write_later(episodes)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued write is committed; False if that took past `timeout_s`."""
        return self._writer is None or self._writer.flush(timeout_s)

    def _writer_thread(self) -> SpoolWriter:
        if self._writer is None:
            self._writer = SpoolWriter(self)
        return self._writer

    # --- the server's side ---------------------------------------------------------------

    def put(self, episode: dict[str, Any]) -> None:
        self.put_many([episode])

    def put_many(self, episodes: list[dict[str, Any]]) -> None:
        """Write episodes in one transaction: one commit (the costly part) however many."""
        if not episodes:
            return
        self.put_calls += 1
        t0 = time.perf_counter()
        # Encoded before taking the lock: the link thread's reads need not wait for msgpack.
        rows = [(str(ep["id"]), record_len(ep), codec.encode_value(ep)) for ep in episodes]
        fits = [row for row in rows if len(row[2]) <= self.max_episode_bytes]
        for episode_id, _, body in rows:
            if len(body) > self.max_episode_bytes:
                log.warning("episode %s refused: %d bytes, over the %d a spooled episode may "
                            "have", episode_id, len(body), self.max_episode_bytes)  # fmt: skip
        with self._lock:
            self.refused_too_big += len(rows) - len(fits)
            self._db.execute("BEGIN")
            try:
                for episode_id, steps, body in fits:
                    # Room first, then the insert: the spool never holds more than its bounds,
                    # not even inside this transaction. (An id already here is ignored below;
                    # the room made for it stays free: ids are fresh uuids, so it never is.)
                    self._make_room(len(body))
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO episodes (episode_id, steps, nbytes, body) "
                        "VALUES (?, ?, ?, ?)",
                        (episode_id, steps, len(body), body),
                    )
                    if cur.rowcount == 1:
                        self._count += 1
                        self._bytes += len(body)
                        self._steps += steps
                        self._unsent_count += 1
                        self._unsent_steps += steps
                        self.put_total += 1
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._reload_counts()
                raise
            finally:
                self.put_seconds += time.perf_counter() - t0

    def _reload_counts(self) -> None:
        """After a rolled-back write (disk full, say): the counts again from what is stored."""
        count, nbytes, steps = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(nbytes), 0), COALESCE(SUM(steps), 0) FROM episodes"
        ).fetchone()
        self._count, self._bytes, self._steps = int(count), int(nbytes), int(steps)
        unsent, unsent_steps = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(steps), 0) FROM episodes WHERE seq > ?",
            (self._cursor,),
        ).fetchone()
        self._unsent_count, self._unsent_steps = int(unsent), int(unsent_steps)

    def _make_room(self, nbytes: int) -> None:
        """Room for one more episode of `nbytes` (at most `max_bytes`): where it would pass a
        bound, delete the oldest down to 0.1% below it, in chunks, so a full spool runs a
        DELETE every ~50 writes (at the default 50,000) instead of one in each (a one-row
        delete was most of a full spool's ~340 µs write)."""
        if self._count < self.max_episodes and self._bytes + nbytes <= self.max_bytes:
            return
        count_to = self.max_episodes - 1 - self.max_episodes // 1000
        bytes_to = self.max_bytes - nbytes - self.max_bytes // 1000
        while self._count > count_to or self._bytes > bytes_to:
            excess = max(self._count - count_to, 1)
            rows = self._db.execute(
                "DELETE FROM episodes WHERE seq IN "
                "(SELECT seq FROM episodes ORDER BY seq LIMIT ?) RETURNING seq, steps, nbytes",
                (min(excess, 1000),),
            ).fetchall()
            if not rows:
                return
            self._forget(rows)
            self.dropped += len(rows)

    def _forget(self, rows: list[tuple[int, int, int]]) -> None:
        for seq, steps, nbytes in rows:
            self._count -= 1
            self._bytes -= nbytes
            self._steps -= steps
            if seq > self._cursor:
                self._unsent_count -= 1
                self._unsent_steps -= steps

    # --- the link's side -----------------------------------------------------------------

    def take(
        self, max_episodes: int | None = None, max_bytes: int | None = None
    ) -> list[dict[str, Any]]:
        """The oldest episodes not yet sent on this connection (they stay until acked): at
        most `max_episodes`, and as many as fit in `max_bytes` of stored bodies (one at
        least). An episode bigger than `max_bytes` on its own can never be sent: it is
        dropped here, before being read back, and counted as `too_big`."""
        limit = -1 if max_episodes is None else max_episodes
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, steps, body FROM episodes WHERE seq > ? ORDER BY seq LIMIT ?",
                (self._cursor, limit),
            ).fetchall()
            if max_bytes is not None:
                rows = self._fit(rows, max_bytes)
            if rows:
                self._cursor = rows[-1][0]
                self._unsent_count -= len(rows)
                self._unsent_steps -= sum(r[1] for r in rows)
        episodes, corrupt = [], []
        for seq, _, body in rows:
            try:
                episodes.append(read_record(codec.decode_value(body)))
            except (codec.DecodeError, RecordError):
                corrupt.append(seq)  # a damaged row: drop it (counted), never crash the link
        if corrupt:
            self._delete_corrupt(corrupt)
        return episodes

    def _delete_corrupt(self, seqs: list[int]) -> None:
        with self._lock:
            marks = ",".join("?" * len(seqs))
            rows = self._db.execute(
                f"DELETE FROM episodes WHERE seq IN ({marks}) "  # noqa: S608 - marks only
                "RETURNING seq, steps, nbytes",
                seqs,
            ).fetchall()
            # Already counted as sent by take(): only the totals change.
            for _, steps, nbytes in rows:
                self._count -= 1
                self._bytes -= nbytes
                self._steps -= steps
            self.corrupt += len(rows)

    def _fit(self, rows: list[Any], max_bytes: int) -> list[Any]:
        """The leading `rows` whose bodies fit in `max_bytes` together (one at least); rows
        too big on their own among them are deleted and counted (lock held)."""
        kept, big, total = [], [], 0
        for row in rows:
            size = len(row[2])
            if size > max_bytes:
                big.append(row[0])
                continue
            if kept and total + size > max_bytes:
                break
            kept.append(row)
            total += size
        if big:
            marks = ",".join("?" * len(big))
            deleted = self._db.execute(
                f"DELETE FROM episodes WHERE seq IN ({marks}) "  # noqa: S608 - marks only
                "RETURNING seq, steps, nbytes",
                big,
            ).fetchall()
            self._forget(deleted)  # still past the cursor: the unsent counts drop too
            self.too_big += len(deleted)
        return kept

    def drop_too_big(self, episode_ids: list[str]) -> int:
        """Episodes the link could not fit in any message (taken already): deleted, counted."""
        with self._lock:
            rows: list[tuple[int, int, int]] = []
            for episode_id in episode_ids:
                rows += self._db.execute(
                    "DELETE FROM episodes WHERE episode_id = ? RETURNING seq, steps, nbytes",
                    (str(episode_id),),
                ).fetchall()
            self._forget(rows)
            self.too_big += len(rows)
        return len(rows)

    def rewind(self) -> None:
        """A new connection: everything not acknowledged is due again."""
        with self._lock:
            self._cursor = 0
            self._unsent_count, self._unsent_steps = self._count, self._steps

    def ack(self, episode_ids: list[str]) -> int:
        """The trainer has these: delete them. Returns how many were still here."""
        if not episode_ids:
            return 0
        ids = [str(i) for i in episode_ids]
        deleted: list[tuple[int, int, int]] = []
        with self._lock:
            for start in range(0, len(ids), 500):  # SQLite's variable limit
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                deleted += self._db.execute(
                    f"DELETE FROM episodes WHERE episode_id IN ({marks}) "  # noqa: S608 - marks only
                    "RETURNING seq, steps, nbytes",
                    chunk,
                ).fetchall()
            self._forget(deleted)
            self.acked += len(deleted)
        return len(deleted)

    def mark_shipped(self, n: int) -> None:
        with self._lock:
            self.shipped += n

    def requeue(self, episodes: list[dict[str, Any]]) -> None:
        """A send failed: the connection is gone, and the next one starts from the oldest."""
        self.rewind()

    # --- views ---------------------------------------------------------------------------

    def oldest(self) -> dict[str, Any] | None:
        """The episode that has waited longest (None when the spool is empty)."""
        with self._lock:
            row = self._db.execute("SELECT body FROM episodes ORDER BY seq LIMIT 1").fetchone()
        if row is None:
            return None
        try:
            return read_record(codec.decode_value(row[0]))
        except (codec.DecodeError, RecordError):
            return None

    @property
    def pending_episodes(self) -> int:
        return self._unsent_count

    @property
    def pending_steps(self) -> int:
        return self._unsent_steps

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "pending": self._unsent_count,  # not yet sent on the current connection
                "pending_steps": self._unsent_steps,
                "in_flight": self._count - self._unsent_count,  # sent, not yet acknowledged
                "spooled": self._count,
                "spooled_bytes": self._bytes,
                # The bounds, so an alert reads the fill as a share (--spool-max-episodes/-mb).
                "max_episodes": self.max_episodes,
                "max_bytes": self.max_bytes,
                "recorded": self.put_total,
                "recovered": self.recovered,
                "shipped": self.shipped,
                "acked": self.acked,
                "dropped": self.dropped,
                "corrupt": self.corrupt,
                "too_big": self.too_big,
                "refused_too_big": self.refused_too_big,
                "put_seconds": self.put_seconds,  # spool writes' time, all together
                "put_us_mean": 1e6 * self.put_seconds / max(self.put_total, 1),
                "durable": self.path is not None,
            }

    def close(self) -> None:
        """Commit what is queued, stop the writer, close the database."""
        if self._writer is not None:
            self._writer.stop()
        with self._lock:
            self._db.close()


class SpoolWriter:
    """The spool's writer thread: commits queued episodes in group commits, and resolves each
    waiter's future on its own event loop.

    Why a thread: SQLite's commit (and a full spool's delete) was ~118-340 µs per episode on
    the event loop, during which no decision was answered. `sqlite3` releases the GIL while
    SQLite works, so the loop runs meanwhile; a waiter costs the loop one future and one
    wake-up. Encoding (msgpack) happens here too."""

    def __init__(self, spool: EpisodeSpool):
        self.spool = spool
        # (episodes, (loop, future) or None), oldest first.
        self._queue: deque[tuple[list[dict[str, Any]], Any]] = deque()
        self._cv = threading.Condition()
        self._busy = False
        self._stopping = False
        self.commits = 0  # group commits (one transaction each)
        self._thread = threading.Thread(target=self._run, daemon=True, name="spool-writer")
        self._thread.start()

    def write(self, episodes: list[dict[str, Any]]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if not episodes:
            future.set_result(None)
            return future
        self._put(episodes, (loop, future))
        return future

    def write_later(self, episodes: list[dict[str, Any]]) -> None:
        if episodes:
            self._put(episodes, None)

    def _put(self, episodes: list[dict[str, Any]], waiter: Any) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError("the spool is closed")
            self._queue.append((episodes, waiter))
            self._cv.notify_all()

    def flush(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._queue or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue:
                    return  # stopping, and everything is written
                items = list(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                self.spool.put_many([e for episodes, _ in items for e in episodes])
                self.commits += 1
                _resolve([waiter for _, waiter in items if waiter is not None], None)
            except Exception:
                # One bad write must not fail the others grouped with it: each on its own.
                for episodes, waiter in items:
                    error: BaseException | None = None
                    try:
                        self.spool.put_many(episodes)
                        self.commits += 1
                    except Exception as e:  # its waiter gets it (the route answers 5xx)
                        error = e
                    if waiter is not None:
                        _resolve([waiter], error)
            with self._cv:
                self._busy = False
                self._cv.notify_all()


def _resolve(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]],
             error: BaseException | None) -> None:  # fmt: skip
    """Finish the waiters' futures on their loops: one wake-up per loop, not per future."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for loop, future in waiters:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
            loop.call_soon_threadsafe(_finish, futures, error)


def _finish(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in futures:
        if future.done():  # the request went away (cancelled)
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
