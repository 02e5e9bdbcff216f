"""The escape rate's live bound (stage_b.monitoring.monitor): a confidence sequence. Pure (scipy on first use).

The live bound: a confidence sequence, valid however often it is looked at (Robbins 1970, "Statistical methods
related to the law of the iterated logarithm", Ann. Math. Statist. 41(5); Howard, Ramdas, McAuliffe & Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)). For k escapes in n audited
auto-passed groups, the beta-binomial mixture martingale against a rate p is

    M_n(p) = B(α + k, β + n - k) / B(α, β) / (p^k (1 - p)^(n - k)),

a nonnegative martingale with mean 1 when p is the true rate, so by Ville's inequality P(some day M_n(p) >= 2/δ)
<= δ/2 with δ = 1 - C. The set {p : M_n(p) < 2/δ} is an interval [lower, upper] that covers the true rate on every
day at once with probability >= 1 - δ/2; each day's bounds are intersected with the previous days' (still valid). The
prior Beta(α = 1, β = (1 - r) / r) has mean r, fixed by the promise before any audit.

A cumulative bound is slow to see a change after many good days (a new camera on day 40), so each day's audits are
also tested alone: the exact Clopper-Pearson lower bound of that day's escape rate at confidence 1 - δ_d, with
δ_d = (δ/2) 6 / (π² d²) on the d-th day. These sum to δ/2 over all days (a union bound), so the cumulative sequence
and every day's test together wrongly exceed a true rate at most with probability δ. tests/test_monitor.py checks this
by simulation (many 60-day runs at the promised rate: the share of runs ever withdrawn stays <= δ).
"""
from __future__ import annotations

import functools
import math

MAX_AUDITS_NEEDED = 100_000


def prior_for(promise: float) -> tuple[float, float]:
    """Beta(1, (1 - r) / r): mean r, the promised rate (module doc)."""
    r = min(max(promise, 1e-6), 1 - 1e-6)
    return 1.0, max((1 - r) / r, 1e-6)


def log_mixture(k: int, n: int, p: float, prior: tuple[float, float]) -> float:
    """log M_n(p), the beta-binomial mixture martingale against rate p after k escapes in n draws."""
    betaln = _betaln()
    a, b = prior
    if p <= 0.0:
        return math.inf if k > 0 else betaln(a, b + n) - betaln(a, b)
    if p >= 1.0:
        return math.inf if k < n else betaln(a + n, b) - betaln(a, b)
    return betaln(a + k, b + n - k) - betaln(a, b) - k * math.log(p) - (n - k) * math.log1p(-p)


@functools.cache
def _betaln():
    from scipy.special import betaln   # imported on first use: the command's start stays light
    return betaln


def excludes(k: int, n: int, p: float, prior: tuple[float, float], delta: float) -> bool:
    """Whether the confidence sequence after (k, n) leaves rate p out: M_n(p) >= 2/δ (its share δ/2 of δ)."""
    return log_mixture(k, n, p, prior) >= -math.log(delta / 2)


@functools.lru_cache(maxsize=65536)   # the planner and the bench ask for the same counts again and again
def cs_bounds(k: int, n: int, prior: tuple[float, float], delta: float) -> tuple[float, float]:
    """[lower, upper] = {p : M_n(p) < 2/δ} (an interval around k / n), by bisection to 1e-12."""
    if n == 0:
        return 0.0, 1.0
    centre = k / n

    def edge(inside: float, outside: float) -> float:
        if not excludes(k, n, outside, prior, delta):
            return outside
        for _ in range(40):   # to 2^-40 of [0, 1]
            mid = (inside + outside) / 2
            if excludes(k, n, mid, prior, delta):
                outside = mid
            else:
                inside = mid
        return inside
    return edge(centre, 0.0), edge(centre, 1.0)


@functools.lru_cache(maxsize=65536)
def audits_needed(k: int, n: int, promise: float, prior: tuple[float, float], delta: float) -> int | None:
    """How many more audited auto-passed groups without an escape bring the upper bound to the promise (None: no
    number does within MAX_AUDITS_NEEDED)."""
    if cs_bounds(k, n, prior, delta)[1] <= promise:
        return 0

    def confirms(more: int) -> bool:
        # log M(p) is convex in p with its minimum at the centre k / n: above the centre the set ends below the
        # promise exactly when the promise itself is excluded (one evaluation instead of a bisection)
        return k / (n + more) <= promise and excludes(k, n + more, promise, prior, delta)
    low, high = 0, 1
    while not confirms(high):
        low, high = high, high * 2
        if high > MAX_AUDITS_NEEDED:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if confirms(mid) else (mid, high)
    return high
