"""Small statistics shared by the engine, the arena, rollout and the benchmarks."""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.96  # two-sided 95% normal quantile


def ci95(std: float, n: int) -> float:
    """Half-width of the 95% confidence interval of a mean of `n` samples with sample std `std`
    (normal approximation); 0.0 for no samples."""
    return Z95 * std / math.sqrt(n) if n else 0.0


def win_rate_ci(wins: int, n: int) -> tuple[float, float]:
    """Win rate and its 95% CI half-width (normal approximation; NaN for no games)."""
    p = wins / n if n else float("nan")
    return p, ci95(math.sqrt(p * (1 - p)), n) if n else float("nan")


class Mean:
    """Count, mean and 95% CI half-width of a stream of numbers."""

    __slots__ = ("n", "total", "squares")

    def __init__(self) -> None:
        self.n, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x

    def to_dict(self) -> dict[str, Any]:
        if not self.n:
            return {"n": 0, "mean": None, "ci95": None}
        mean = self.total / self.n
        var = max(0.0, (self.squares - self.n * mean * mean) / (self.n - 1)) if self.n > 1 else 0
        return {"n": self.n, "mean": mean, "ci95": ci95(math.sqrt(var), self.n)}
