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
    """Count, mean and 95% CI half-width of a stream of numbers.

    Welford's running mean and sum of squared deviations (`m2`), merged by Chan et al.'s
    formula: a sum of squares overflows float64 at |x| ~1e154 (1e200 payoffs made every
    statistic built on it raise), and `squares - n * mean**2` loses every digit when the mean is
    large against the spread. These stay within a few ulps of the true values for any finite
    inputs whose deviations fit a float64, and never raise: an overflow saturates to inf."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def merge(self, other: Mean) -> None:
        if not other.n:
            return
        n = self.n + other.n
        delta = other.mean - self.mean
        self.mean += delta * (other.n / n)
        self.m2 += other.m2 + delta * delta * (self.n * other.n / n)
        self.n = n

    @classmethod
    def of(cls, n: int, mean: float, std: float) -> Mean:
        """Back from a published summary (count, mean, sample std), to be merged."""
        m = cls()
        if n:
            m.n, m.mean, m.m2 = n, mean, (n - 1) * std * std
        return m

    def since(self, earlier: Mean) -> Mean:
        """The numbers added after `earlier` (a snapshot of this stream): Chan's merge
        solved for the later part."""
        out = Mean()
        out.n = self.n - earlier.n
        if out.n <= 0:
            return Mean()
        out.mean = (self.total - earlier.total) / out.n
        delta = out.mean - earlier.mean
        out.m2 = max(0.0, self.m2 - earlier.m2 - delta * delta * earlier.n * out.n / self.n)
        return out

    @property
    def total(self) -> float:
        return self.n * self.mean

    @property
    def var(self) -> float:
        """Sample variance (0 for fewer than two numbers)."""
        return max(0.0, self.m2 / (self.n - 1)) if self.n >= 2 else 0.0

    def to_dict(self) -> dict[str, Any]:
        if not self.n:
            return {"n": 0, "mean": None, "ci95": None}
        return {"n": self.n, "mean": self.mean, "ci95": ci95(math.sqrt(self.var), self.n)}


def stratified_difference(strata: list[tuple[Mean, Mean]]) -> tuple[float, float, float] | None:
    """Mean of A minus mean of B pooled over strata (A and B met the same conditions within
    each), its standard error and its effective sample size (the sum of the weights: n/2 for
    n samples on each side); None without a stratum. Weights n_a*n_b/(n_a+n_b), the
    usual stratified two-sample weights: each stratum's difference is unbiased, so the pooled
    one is, whatever the mix of strata. Samples are independent (not paired): a stratum's
    variance is var_a/n_a + var_b/n_b."""
    weight = diff = var = 0.0
    for a, b in strata:
        w = a.n * b.n / (a.n + b.n)
        weight += w
        diff += w * (a.mean - b.mean)
        var += w * w * (a.var / a.n + b.var / b.n)
    if not weight:
        return None
    return diff / weight, math.sqrt(var) / weight, weight


def mixture_boundary(n: float, n_tuned: float, alpha: float = 0.05) -> float:
    """The z a running mean must pass at (effective) sample size `n` for an always-valid
    two-sided test of level `alpha`: Robbins' normal-mixture boundary. For Brownian motion W,
    P(exists n: |W(n)|/sqrt(n) >= this) <= alpha (Ville's inequality on the mixture
    martingale), at every n, however often one looks; a standardized mean of independent
    samples is asymptotically such a W (so: asymptotic, as a CLT interval is). `n_tuned` is
    where it is tightest (mixing variance rho^2 chosen for it, Howard et al. 2021): ~3.03 for
    alpha 0.05 there, ~3.6 at a hundred times that, against a fixed look's 1.96."""
    log_a = 2 * math.log(1 / alpha)
    x = (log_a + math.log(1 + log_a)) * n / n_tuned  # rho^2 * n
    return math.sqrt((1 + 1 / x) * (math.log(1 + x) + log_a))


def significantly_below(mean: float, ci: float, record: float, record_ci: float = 0.0) -> bool:
    """A measurement is significantly below `record` when the 95% CI of its difference from
    it lies wholly below 0: the two half-widths combined, as for independent hands (a record
    without a CI: the measurement's CI's upper bound below it)."""
    return mean - record + math.hypot(ci, record_ci) < 0


def minutes_below(
    spans: list[tuple[float, float, float, float]], record: float, record_ci: float = 0.0
) -> float:
    """Minutes a strength curve spent significantly below `record` (the rules' own record,
    measured to `record_ci`): the summed length of the spans (from_s, to_s, mean, ci95) whose
    measurement was (`significantly_below`). Each curve says what a point stands for: a
    window of training hands covers the seconds it was played in; an evaluation of a
    version, the seconds from it to the next evaluation. A point too wide to tell a dip
    never counts: `below_resolution` says how deep a dip must be to be seen."""
    seconds = sum(
        max(0.0, to_s - from_s)
        for from_s, to_s, mean, ci in spans
        if significantly_below(mean, ci, record, record_ci)
    )
    return seconds / 60.0


def below_resolution(
    spans: list[tuple[float, float, float, float]], record_ci: float = 0.0
) -> float | None:
    """How far below the record a point of the curve must lie to count in `minutes_below`:
    the median half-width of the test (a point's CI and the record's combined). A curve of
    100-hand points (+-0.045) spends "0.0 minutes below" through a dip of 0.03 unseen; more
    hands a point (`--eval-games`) narrow it as 1 / sqrt(hands). None without points."""
    widths = sorted(math.hypot(ci, record_ci) for *_, ci in spans)
    return widths[len(widths) // 2] if widths else None
