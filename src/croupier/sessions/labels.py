"""Decisions counted by seat label, with a bounded set of labels.

The labels are `/healthz`'s `decisions`, `/metrics`' `croupier_decisions_total{policy}` and a
series each in the dashboard's history, so every distinct label an engine can make costs the
server memory and every scrape bytes for good. A seat's label carries its tuning (`:temp=T`,
`:rules=P`, `:greedy`) and its version (`frozen@N`), both chosen by the engine: 20,000 games
with distinct temperatures once made 40,000 labels, a 2.7 MB `/metrics` and a 1.3 MB keyless
`/healthz`. So each seat kind (the label's name before its first `:` or `@`: `frozen`,
`production`, `tier`, `search`, …) keeps at most `LABELS_PER_KIND` labels apart:

- a `frozen@N…` label past the bound takes the place of the oldest version's label when its
  version is newer (that label's count folds into `frozen@older`), and counts under
  `frozen@older` when its version is older: the newest versions stay apart as they come;
- any other label past the bound counts under `<kind>:other`.

Nothing is lost from the totals; a label's count only ever moves into its kind's fold.
"""

from __future__ import annotations

LABELS_PER_KIND = 16
# Seat kinds come from the spec grammar (a dozen); a bound anyway, should a kind ever be
# built from what an engine sends.
MAX_KINDS = 32
FROZEN_OLDER = "frozen@older"
OTHER_KIND = "other"  # the label of every kind past MAX_KINDS
_FROZEN = "frozen@"


def kind_of(label: str) -> str:
    """The seat kind a label belongs to: its name before the first `:` or `@`."""
    end = len(label)
    for sep in (":", "@"):
        at = label.find(sep)
        if 0 <= at < end:
            end = at
    return label[:end]


def frozen_version(label: str) -> int | None:
    """N of a `frozen@N…` label, else None."""
    if not label.startswith(_FROZEN):
        return None
    digits = label[len(_FROZEN) :].partition(":")[0]
    return int(digits) if digits.isdigit() else None


class DecisionCounts:
    """Decisions by label, in `counts` (a plain dict). Count with `counts[label] += 1` and, on
    a `KeyError` (a label not counted yet, or one folded), `count_new(label)`: the seen label's
    update stays one plain-dict operation on the decide path (a dict subclass's cost ~100 ns
    more: CPython specialises subscripts of exact dicts only)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._held: dict[str, list[str]] = {}  # kind -> its labels counted apart

    def count_new(self, label: str) -> None:
        kind = kind_of(label)
        held = self._held.get(kind)
        if held is None:
            if len(self._held) >= MAX_KINDS:
                self._add(OTHER_KIND)
                return
            held = self._held[kind] = []
        counts = self.counts
        if len(held) < LABELS_PER_KIND:
            held.append(label)
            counts[label] = 1
            return
        version = frozen_version(label)
        versioned = [(v, held_label) for held_label in held
                     if (v := frozen_version(held_label)) is not None]  # fmt: skip
        if version is None or not versioned:
            self._add(f"{kind}:{OTHER_KIND}")
            return
        oldest_version, oldest = min(versioned)
        if version > oldest_version:
            held.remove(oldest)
            self._add(FROZEN_OLDER, counts.pop(oldest))
            held.append(label)
            counts[label] = 1
        elif version < oldest_version:
            self._add(FROZEN_OLDER)
        else:  # the oldest version held, in one more tuning
            self._add(f"{kind}:{OTHER_KIND}")

    def _add(self, label: str, n: int = 1) -> None:
        self.counts[label] = self.counts.get(label, 0) + n
