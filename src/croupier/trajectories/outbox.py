"""Finished episodes waiting for the trainer: a bounded in-memory queue.

Bounded so a long trainer outage never grows the server's memory without limit; what falls off
the old end is counted, never silent.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from croupier.trajectories.recorder import episode_len


class EpisodeOutbox:
    def __init__(self, max_episodes: int = 50_000):
        if max_episodes < 1:
            raise ValueError("max_episodes must be at least 1")
        self.max_episodes = max_episodes
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()  # the link client drains it from its own thread
        self.put_total = 0
        self.dropped = 0
        self.shipped = 0
        self._steps = 0

    def put(self, episode: dict[str, Any]) -> None:
        with self._lock:
            self._queue.append(episode)
            self._steps += episode_len(episode)
            self.put_total += 1
            while len(self._queue) > self.max_episodes:
                self._steps -= episode_len(self._queue.popleft())
                self.dropped += 1

    def take(self, max_episodes: int | None = None) -> list[dict[str, Any]]:
        """Remove and return up to `max_episodes` of the oldest episodes."""
        with self._lock:
            n = len(self._queue) if max_episodes is None else min(max_episodes, len(self._queue))
            out = [self._queue.popleft() for _ in range(n)]
            self._steps -= sum(episode_len(e) for e in out)
            return out

    def requeue(self, episodes: list[dict[str, Any]]) -> None:
        """Put back episodes a failed send did not deliver (at the front, oldest first)."""
        with self._lock:
            for e in reversed(episodes):
                self._queue.appendleft(e)
                self._steps += episode_len(e)
            while len(self._queue) > self.max_episodes:
                self._steps -= episode_len(self._queue.popleft())
                self.dropped += 1

    def mark_shipped(self, n: int) -> None:
        with self._lock:
            self.shipped += n

    def oldest(self) -> dict[str, Any] | None:
        """The episode that has waited longest (None when nothing waits)."""
        with self._lock:
            return self._queue[0] if self._queue else None

    @property
    def pending_episodes(self) -> int:
        return len(self._queue)

    @property
    def pending_steps(self) -> int:
        return self._steps

    def stats(self) -> dict[str, int]:
        return {
            "pending": len(self._queue),
            "pending_steps": self._steps,
            "recorded": self.put_total,
            "shipped": self.shipped,
            "dropped": self.dropped,
        }
