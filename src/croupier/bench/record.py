"""The rules' own record beside a strength curve, and the minutes the curve spent
significantly below it (`stats.minutes_below`): what each point of a curve stands for.

- An evaluation of a version (a point at `seconds` with `mean` and `ci95`) stands for the
  seconds from it to the next evaluation, the last one to the end of training: that version,
  or one trained from it, was what players met meanwhile (`evaluation_spans`).
- A window of training hands (`demo.window_means`: `from_s`, `to_s`, `payoff`, `ci95`) stands
  for the seconds it was played in (`window_spans`).
"""

from __future__ import annotations

from typing import Any

Span = tuple[float, float, float, float]  # from_s, to_s, mean, ci95

# What "minutes below" counts, written into each report beside the figure.
BELOW_TEST = (
    "a point counts as below when the 95% CI of its difference from the rules' record (its "
    "CI and the record's combined) lies wholly below 0; `below_resolution`: the median "
    "half-width of that test, the smallest dip a point shows"
)


def evaluation_spans(
    curve: list[dict[str, Any]],
    end_s: float,
    time_key: str = "seconds",
    mean_key: str = "mean",
    ci_key: str = "ci95",
) -> list[Span]:
    spans = []
    for i, p in enumerate(curve):
        start = p[time_key]
        to_s = curve[i + 1][time_key] if i + 1 < len(curve) else end_s
        spans.append((start, max(to_s, start), p[mean_key], p[ci_key]))
    return spans


def window_spans(windows: list[dict[str, Any]], end_s: float) -> list[Span]:
    return [
        (w["from_s"], min(w["to_s"], max(end_s, w["from_s"])), w["payoff"], w["ci95"])
        for w in windows
        if w.get("ci95") is not None
    ]
