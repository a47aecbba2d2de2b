"""Which weights versions stay on disk (and in memory) when a new one arrives.

Kept, always: the versions something still refers to — production and its rollback history
(pinned by the channel), and every version a live game is pinned to (`learned` seats pinned at
creation, `frozen@N`, shadow seats). Then a history: the newest `keep_last`, plus, with
`keep_every` N, one version per N version numbers (the first at or past each multiple of N:
version numbers are the learner's update counter and jump, so "every Nth file" would depend on
how often the trainer pushed). Every promoted version is kept besides, in the channel's own
folder (`<weights-dir>/channels/`), for as long as the weights dir lives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Retention:
    keep_last: int = 8
    keep_every: int = 0  # 0: no periodic history

    def __post_init__(self) -> None:
        if self.keep_last < 1 or self.keep_every < 0:
            raise ValueError("keep_last must be at least 1 and keep_every at least 0")

    def kept(self, versions: Iterable[int], referenced: Iterable[int] = ()) -> set[int]:
        """The versions of `versions` to keep; the rest may be deleted."""
        ordered = sorted(set(versions))
        keep = set(ordered[-self.keep_last :])
        if self.keep_every:
            buckets: set[int] = set()
            for v in ordered:
                if v // self.keep_every not in buckets:
                    buckets.add(v // self.keep_every)
                    keep.add(v)
        return keep | (set(referenced) & set(ordered))
