"""The decisions-by-label counter keeps a bounded set of labels whatever the seats' tunings."""

from __future__ import annotations

from croupier.sessions.labels import (
    FROZEN_OLDER,
    LABELS_PER_KIND,
    MAX_KINDS,
    DecisionCounts,
    kind_of,
)


def count(labels: DecisionCounts, label: str) -> None:
    try:
        labels.counts[label] += 1
    except KeyError:
        labels.count_new(label)


def test_kind_is_the_name_before_the_first_colon_or_at() -> None:
    assert kind_of("frozen@12:temp=0.5") == "frozen"
    assert kind_of("production:rules=0.2") == "production"
    assert kind_of("tier:3") == "tier"
    assert kind_of("search:depth=2@7") == "search"
    assert kind_of("learned@latest:greedy") == "learned"
    assert kind_of("best-response") == "best-response"


def test_any_suffix_folds_into_its_kind_past_the_bound() -> None:
    labels = DecisionCounts()
    counts = labels.counts
    n = 5_000
    for i in range(n):
        count(labels, f"production:temp={1 + i / 10_000:g}")
        count(labels, f"search:rollouts={i}")  # a seat kind this module never heard of
        count(labels, "rules")
    assert counts["production:other"] == counts["search:other"] == n - LABELS_PER_KIND
    assert counts["rules"] == n
    assert len(counts) == 2 * (LABELS_PER_KIND + 1) + 1
    assert sum(counts.values()) == 3 * n


def test_newer_versions_take_the_oldest_versions_place() -> None:
    labels = DecisionCounts()
    counts = labels.counts
    for v in range(1, 101):
        count(labels, f"frozen@{v}")
        count(labels, f"frozen@{v}:temp={1 + v / 100:g}")
    count(labels, "frozen@3")  # an old version again: with the old ones
    held = [k for k in counts if k[len("frozen@")].isdigit()]
    assert len(held) == LABELS_PER_KIND
    assert {int(k[7:].partition(":")[0]) for k in held} == set(range(93, 101))
    assert counts[FROZEN_OLDER] == 200 - LABELS_PER_KIND + 1
    assert sum(counts.values()) == 201


def test_the_oldest_version_in_more_tunings_counts_as_other() -> None:
    labels = DecisionCounts()
    counts = labels.counts
    for i in range(1_000):
        count(labels, f"frozen@7:temp={1 + i / 10_000:g}")
    assert counts["frozen:other"] == 1_000 - LABELS_PER_KIND
    assert len(counts) == LABELS_PER_KIND + 1


def test_kinds_themselves_are_bounded() -> None:
    labels = DecisionCounts()
    counts = labels.counts
    for i in range(MAX_KINDS + 10):
        count(labels, f"kind{i}")
    assert counts["other"] == 10 and len(counts) == MAX_KINDS + 1
