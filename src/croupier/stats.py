"""Small statistics shared by the engine, the arena, rollout and the benchmarks."""

from __future__ import annotations

import math

Z95 = 1.96  # two-sided 95% normal quantile


def ci95(std: float, n: int) -> float:
    """Half-width of the 95% confidence interval of a mean of `n` samples with sample std `std`
    (normal approximation); 0.0 for no samples."""
    return Z95 * std / math.sqrt(n) if n else 0.0
