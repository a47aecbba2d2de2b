"""The trainer's progress record: one JSON line per training iteration in
`<checkpoint-dir>/progress.jsonl` (written by `trainer/run.py`), what its numbers are computed
from, and its one-line text. Read here without importing the trainer (RLlib): the demo and the
benchmarks follow a trainer running in another process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROGRESS = "progress.jsonl"


def last_progress(path: Path) -> dict[str, Any] | None:
    """The last iteration's record, or None before the first (or without the file)."""
    try:
        lines = path.read_text().strip().splitlines()
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None


def lag_summary(histogram: dict[int, int]) -> dict[str, float]:
    """Mean, p50, p90 and max of an ingest-lag histogram {lag: episodes}."""
    total = sum(histogram.values())
    if not total:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    lags = sorted(histogram)

    def quantile(q: float) -> float:
        seen = 0
        for lag in lags:
            seen += histogram[lag]
            if seen >= q * total:
                return float(lag)
        return float(lags[-1])

    mean = sum(lag * n for lag, n in histogram.items()) / total
    return {"mean": mean, "p50": quantile(0.5), "p90": quantile(0.9), "max": float(lags[-1])}


def trained_share(stats: dict[str, Any]) -> float | None:
    """Of the episodes that left the trainer's queue (or were refused for lag), the share
    handed to the learner; None before any did."""
    sampled = stats.get("episodes_sampled", 0)
    lost = sum(
        stats.get(k, 0)
        for k in ("episodes_dropped_stale", "episodes_dropped_backlog", "episodes_dropped_lag")
    )
    return sampled / (sampled + lost) if sampled + lost else None


def histogram_delta(now: dict[int, int], before: dict[int, int]) -> dict[int, int]:
    """What a lag histogram gained since `before` (this iteration's episodes)."""
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0) > 0}


def per_hand(stats: dict[str, Any], last: tuple[int, float]) -> float | None:
    """Payoff per hand over the hands received since `last` (hands, payoff summed)."""
    hands = stats.get("hands_received", 0) - last[0]
    return (stats.get("hand_payoff_received", 0.0) - last[1]) / hands if hands > 0 else None


def format_progress(p: dict[str, Any]) -> str:
    ret, per_hand = p.get("episode_return_mean"), p.get("payoff_per_hand")
    entropy = p.get("policy_entropy")
    return (
        f"iter {p['iteration']:4d}  version {p['version']:5d}  "
        f"{p['env_steps_per_s']:7.0f} steps/s  steps {p['env_steps']:9d}  "
        f"lag p50/p90 {p['lag']['p50']:.0f}/{p['lag']['p90']:.0f}  "
        f"return {ret if ret is None else round(ret, 3)}  "
        f"per hand {per_hand if per_hand is None else round(per_hand, 3)}  "
        + ("" if entropy is None else f"entropy {entropy:.3f}  ")
        + f"servers {p['connected_servers']}"
        + _runners_text(p.get("runners"))
        + _anchor_text(p.get("rules_anchor"))
    )


def _anchor_text(anchor: dict[str, Any] | None) -> str:
    """`  KL to the rules 0.012 (coeff 0.45)`: the rules anchor's term in the last update."""
    if not anchor or "kl" not in anchor:
        return ""
    return f"  KL to the rules {anchor['kl']:.4f} (coeff {anchor.get('kl_coeff', 0.0):.3g})"


def _runners_text(runners: list[dict[str, Any]] | None) -> str:
    """`  runners 2 on 2 nodes`: where the remote runners are (none: the driver's link)."""
    if not runners:
        return ""
    nodes = {r["node_id"] for r in runners}
    return f"  runners {len(runners)} on {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
