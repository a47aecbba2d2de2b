"""The `best-response` seat: the exact best response to the newest version a server holds,
for a game small enough to walk whole (its simulator lists its deals: Kuhn, Leduc).

The best exploiter there is of the version: per information set, the action that wins the
most against the version's own probabilities (`games/tree.py` `best_response_actions`, the
same computation as `croupier eval --exploitability`). A learner that plays it descends its
own exploitability (exploitability descent, Lockhart et al. 2019: in two-player zero-sum
games the policy itself, not an average, converges): what a league's `--league-best-response-
share` seats give it.

Recomputed when a newer version is loaded, off the event loop (a thread): the version's
probabilities on the tree's distinct states (Leduc: 1,872, one forward) and a pass per seat,
~40 ms of CPU for Leduc (1.5 s more once, to build the tree). Until the first table is ready
the seat is unavailable (a league seat draws a version instead); a table answers for the
version it was computed from until the next one is ready.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from croupier.games.base import GameAdapter
from croupier.games.tree import GameTree, TooLarge, game_tree, state_key
from croupier.policies.distribution import version_policy
from croupier.policies.learned import PolicyVersions

log = logging.getLogger(__name__)


class BestResponseSeat:
    """The best response to the newest version of `versions` (see the module doc)."""

    def __init__(self, game: str, adapter: GameAdapter, versions: PolicyVersions):
        self.game = game
        self.adapter = adapter
        self.versions = versions
        self._tree: GameTree | None = None
        self._problem: str | None = None  # why this game has no best response seat
        self._table: dict[str, Any] = {}
        self.version: int | None = None  # the version the table answers
        self.wins: list[float] = []  # the table's win per hand against it, per seat
        self.computed = 0  # tables computed so far
        self.missed = 0  # states not in the table (the rules answered them)
        self._busy = threading.Lock()

    def problem(self) -> str | None:
        """Why the seat cannot be served on this game (None: it can). Builds the tree once."""
        if self._tree is None and self._problem is None:
            try:
                self._tree = game_tree(self.game)
            except (TooLarge, ValueError) as e:
                self._problem = (
                    f"best-response needs a game small enough to walk whole (its simulator "
                    f"lists its deals, as Kuhn's and Leduc's do): {e}"
                )
        return self._problem

    @property
    def ready(self) -> bool:
        return self.version is not None

    def refresh(self, wait: bool = False) -> None:
        """Start computing the best response to the newest version, unless the table already
        answers it or a computation runs (`wait`: compute it here, now)."""
        latest = self.versions.latest
        if latest == self.version or not self._busy.acquire(blocking=wait):
            return
        if wait:
            self._compute(latest)
            return
        threading.Thread(target=self._compute, args=(latest,), daemon=True).start()

    def _compute(self, version: int) -> None:
        try:
            if self.problem() is not None:
                return
            tree = self._tree
            assert tree is not None
            t0 = time.process_time()
            probs = tree.slot_probs(version_policy(self.adapter, self.versions, version))
            table, wins = tree.best_response_actions(probs)
            self._table, self.version, self.wins = table, version, wins  # one swap each
            self.computed += 1
            log.info(
                "best response to version %d: wins %s a hand by seat (%.0f ms of CPU; %d "
                "states answered by the rules so far)", version,
                " / ".join(f"{w:+.3f}" for w in wins), 1000 * (time.process_time() - t0),
                self.missed,
            )  # fmt: skip
        except Exception:  # a failed table leaves the last one serving
            log.exception("best response to version %d failed", version)
        finally:
            self._busy.release()

    def act(self, state: dict[str, Any]) -> Any | None:
        """The best response's action in `state` (None: a state the tree does not hold)."""
        action = self._table.get(state_key(state))
        if action is None:
            self.missed += 1
        return action
