"""Episodes the trainer has taken and not yet sampled: bounded, newest first, staleness-checked.

Reader threads `put` what they accepted; `sample()` `take`s. A `take` returns the newest
waiting episodes up to `sample_max_steps` env steps (one at least): a learner update never
grows with a backlog (which would make the next backlog bigger), and a backlog (a trainer
outage's spool) is trained over the next updates with room. What is more than
`max_sample_lag` versions old by then is dropped, counted; so is what exceeds
`backlog_max_steps` in memory (see docs/trainer-lifecycle.md). Each drop is reported to
`on_drop` (episodes, "stale" or "backlog"), outside the lock: the runner logs and acks them
as settled, so that recorded = trained + counted drops. With `fresh_lag`, nothing is taken
while every waiting episode is more than that many versions old: a backlog is trained beside
fresh games, never alone (a trainer restarted after the games stopped otherwise trained it
update after update, each on older data, and pushed the worse policy).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from croupier.link.server import LinkCounters

# How many of the newest arrivals `_has_fresh` looks at.
_FRESH_SCAN = 256


class EpisodeInbox:
    def __init__(
        self,
        counters: LinkCounters,
        sample_max_steps: int | None = None,
        max_sample_lag: int | None = None,
        backlog_max_steps: int | None = None,
        fresh_lag: int | None = None,
        on_drop: Callable[[list[SingleAgentEpisode], str], None] | None = None,
    ):
        self.counters = counters
        self.on_drop = on_drop
        self.sample_max_steps = sample_max_steps
        self.max_sample_lag = max_sample_lag
        self.backlog_max_steps = backlog_max_steps
        self.fresh_lag = fresh_lag
        # (episode, the oldest version that played it), oldest arrival first.
        self._items: deque[tuple[SingleAgentEpisode, int]] = deque()
        self.steps = 0  # env steps waiting
        self.last_arrival: float | None = None  # monotonic; None: none yet
        self._cv = threading.Condition()

    def put(self, accepted: list[tuple[SingleAgentEpisode, int]]) -> None:
        steps = sum(len(e) for e, _ in accepted)
        with self._cv:
            if accepted:
                self.last_arrival = time.monotonic()
            self._items.extend(accepted)
            self.steps += steps
            dropped = self._bound_backlog()
            self._cv.notify_all()
        if dropped and self.on_drop is not None:
            self.on_drop(dropped, "backlog")

    def wait_for_steps(self, steps: int, timeout_s: float, version: int | None = None) -> bool:
        """Block until `steps` env steps are waiting (with `version`: fresh ones among them,
        see `fresh_lag`), or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self.steps < steps or (version is not None and not self._has_fresh(version)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cv.wait(remaining)
            return True

    def wake(self) -> None:
        """Wake every waiter (to see a stop request)."""
        with self._cv:
            self._cv.notify_all()

    def take(self, version: int) -> tuple[list[SingleAgentEpisode], int]:
        """The newest waiting episodes up to `sample_max_steps` env steps (one at least),
        skipping and dropping those more than `max_sample_lag` versions behind `version`.

        Newest first: the learner always gets the freshest data it can (PPO learns markedly
        worse from data a few versions old, docs/off-policy.md), and what it cannot take now
        waits for an update with room, i.e. an outage's backlog is trained as soon as the
        learner is faster than the games, each update still bounded (unbounded, PPO ran
        away: a bigger sample, a longer update, a bigger backlog: 11 updates in 3 minutes
        instead of ~100). When the games outpace the learner for good, the staleness bound
        decides what is lost, and counts it."""
        max_lag = self.max_sample_lag
        stale_steps = 0
        stale: list[SingleAgentEpisode] = []
        episodes: list[SingleAgentEpisode] = []
        steps = 0
        with self._cv:
            if max_lag is not None:
                # The oldest arrivals are (near enough) the oldest versions: drop from there.
                while self._items and version - self._items[0][1] > max_lag:
                    episode, _ = self._items.popleft()
                    stale.append(episode)
                    stale_steps += len(episode)
            cap = self.sample_max_steps
            # Fresh games waiting: take them and, up to the cap, the backlog behind them.
            fresh = self._has_fresh(version)
            while fresh and self._items:
                if cap is not None and episodes and steps + len(self._items[-1][0]) > cap:
                    break
                episode, played = self._items.pop()
                if max_lag is not None and version - played > max_lag:
                    stale.append(episode)
                    stale_steps += len(episode)
                    continue
                episodes.append(episode)
                steps += len(episode)
            self.steps -= steps + stale_steps
        if stale:
            self.counters.add("episodes_dropped_stale", len(stale))
            self.counters.add("steps_dropped_stale", stale_steps)
            if self.on_drop is not None:
                self.on_drop(stale, "stale")
        return episodes, steps

    def _has_fresh(self, version: int) -> bool:
        """Whether an episode played within `fresh_lag` versions of `version` waits. Looks at
        the newest arrivals only (a bounded scan under the lock): fresh games arrive last.
        Holds `_cv`."""
        if self.fresh_lag is None:
            return bool(self._items)
        return any(
            version - played <= self.fresh_lag
            for _, played in itertools.islice(reversed(self._items), _FRESH_SCAN)
        )

    def _bound_backlog(self) -> list[SingleAgentEpisode]:
        """Drop the oldest waiting episodes past `backlog_max_steps` (a memory bound: each
        waiting episode is a Python object of a few KB); returns them. Holds `_cv`."""
        bound = self.backlog_max_steps
        if bound is None or self.steps <= bound:
            return []
        dropped: list[SingleAgentEpisode] = []
        dropped_steps = 0
        while self._items and self.steps - dropped_steps > bound:
            episode, _ = self._items.popleft()
            dropped.append(episode)
            dropped_steps += len(episode)
        self.steps -= dropped_steps
        self.counters.add("episodes_dropped_backlog", len(dropped))
        self.counters.add("steps_dropped_backlog", dropped_steps)
        return dropped
