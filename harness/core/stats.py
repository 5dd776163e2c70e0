"""The statistics of repeated attempts, as pure functions of pass counts (docs/evaluation.md, "Attempts
and statistics", gives the same formulas with an example).

Instance i of m has n_i graded attempts, c_i of them resolved; p_i = c_i / n_i.

- **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1, the unbiased
  estimator): 1 - C(n_i - c_i, k) / C(n_i, k) for each instance, averaged over the instances; pass@1 is
  the mean of the p_i.
- **pass@1's 95% interval**: Wilson's score interval around p̄ = mean p_i, computed with the effective
  sample size of a clustered sample (each instance a cluster of its attempts; Kish's design effect):
  n_eff = p̄(1 - p̄) / (s² / m), with s² = Σ (p_i - p̄)² / m, kept within [m, Σ n_i] (m when p̄ is 0 or 1,
  where s² says nothing). Attempts at one instance are not independent trials: they add information
  only as far as they disagree. With one attempt per instance s² = p̄(1 - p̄), so n_eff = m and the
  interval is Wilson's for Σ c_i of m.
- **B - A, paired by instance**: d_i = p_i(B) - p_i(A); the difference is mean d_i, its 95% interval a
  normal (CLT) one over the instances after Agresti and Min's (2005) adjustment: a tie and two half
  pairs of difference +1 and -1 are added (weights 1, 1/2, 1/2; W = m + 2), so d' = Σ d_i / W,
  v = (Σ d_i² + 1) / W - d'², and the interval is d' ± z·sqrt(v / W). For single attempts it is their
  interval for the difference of matched proportions (0.5 added to each cell of the 2x2 table), which
  never has width 0 and covers better than the plain Wald interval with few instances.

z = 1.959963984540054, the standard normal's 97.5% quantile. Nothing here is random: the same counts
give the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Z95 = 1.959963984540054
WILSON = "wilson"                       # one attempt per instance
WILSON_CLUSTERED = "wilson-clustered"   # several: the effective n of instances as clusters
PAIRED = "paired-clt-agresti-min"

Verdict = Literal["better", "worse", "no significant difference"]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def as_list(self, digits: int = 6) -> list[float]:
        return [round(self.low, digits), round(self.high, digits)]


@dataclass(frozen=True)
class PassAt1:
    """pass@1 of an evaluation with its 95% interval, the method and the sample size it used."""

    value: float
    interval: Interval
    effective_n: float
    method: str


@dataclass(frozen=True)
class Difference:
    """B - A over `instances` paired instances: the mean pass rates, their difference and its 95% interval."""

    instances: int
    mean_a: float
    mean_b: float
    difference: float
    interval: Interval
    method: str = PAIRED

    @property
    def verdict(self) -> Verdict:
        if self.interval.low > 0:
            return "better"
        if self.interval.high < 0:
            return "worse"
        return "no significant difference"


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k for one instance of `n` attempts, `c` resolved (needs 1 <= k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass@k of an evaluation: the mean over its instances, `counts` holding (n, c) each; None when
    there is no instance or one has fewer than k attempts."""
    if not counts or any(n < k for n, _ in counts):
        return None
    return math.fsum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def wilson(p: float, n: float, z: float = Z95) -> Interval:
    """Wilson's score interval for a proportion `p` observed over `n` (> 0) trials."""
    if n <= 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"Wilson's interval needs n > 0 and 0 <= p <= 1; got p={p}, n={n}")
    z2 = z * z
    scale = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return Interval(max(0.0, center - half), min(1.0, center + half))


def pass_at_1(counts: Sequence[tuple[int, int]], z: float = Z95) -> PassAt1 | None:
    """pass@1 of `counts` ((n, c) per instance, each n >= 1) with its interval; None without instances."""
    if not counts:
        return None
    rates = [c / n for n, c in counts]
    m, total = len(rates), sum(n for n, _ in counts)
    mean = math.fsum(rates) / m
    spread = math.fsum((p - mean) ** 2 for p in rates) / m
    if mean * (1.0 - mean) <= 0.0:
        effective = float(m)
    elif spread <= 0.0:
        effective = float(total)
    else:
        effective = min(float(total), max(float(m), mean * (1.0 - mean) / (spread / m)))
    method = WILSON if total == m else WILSON_CLUSTERED
    return PassAt1(mean, wilson(mean, effective, z), effective, method)


def paired_difference(pairs: Sequence[tuple[float, float]], z: float = Z95) -> Difference | None:
    """B - A over `pairs` ((p_A, p_B) per instance); None without pairs."""
    if not pairs:
        return None
    m = len(pairs)
    diffs = [b - a for a, b in pairs]
    weight = m + 2.0
    adjusted = math.fsum(diffs) / weight
    variance = max(0.0, (math.fsum(d * d for d in diffs) + 1.0) / weight - adjusted * adjusted)
    half = z * math.sqrt(variance / weight)
    mean_a = math.fsum(a for a, _ in pairs) / m
    mean_b = math.fsum(b for _, b in pairs) / m
    return Difference(m, mean_a, mean_b, math.fsum(diffs) / m,
                      Interval(max(-1.0, adjusted - half), min(1.0, adjusted + half)))
