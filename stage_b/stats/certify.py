"""Promises a QC owner can sign: exact one-sided Clopper-Pearson bounds on a rate measured on validation groups.
Pure (math and scipy.special only).

A miss rate measured as k misses in n defective validation groups is a point estimate; what can be promised is its
upper bound: the largest true rate that would still show k or fewer misses in n groups with probability
1 - confidence. The beta quantile gives it exactly (scipy.special.betaincinv, the inverse of the regularized incomplete
beta function: the same numbers as scipy.stats.beta.ppf, equal on every k < n < 400 at nine confidences, at a third of
the import time, which every command that reads an operating point pays):

    upper(k, n, C) = Beta.ppf(C, k + 1, n - k) = betaincinv(k + 1, n - k, C)
                     (1.0 when k == n, and when n == 0: nothing was measured)

With no miss it is 1 - (1 - C) ** (1 / n), so a promise "rate <= R with confidence C" needs at least
ceil(ln(1 - C) / ln(1 - R)) groups without an error (59 for 5% at 95%, 45 for 5% at 90%, 8 for 20% at 80%).
The same bound serves the overkill rate (good groups auto-failed over good groups).

Weighted evidence (audited groups drawn with probability a count 1/a times, stage_b.rules.routes): the rate is the
Horvitz-Thompson ratio of weighted errors to weighted groups, and its bound is the same beta quantile at the
effective counts of Korn & Graubard (1998, "Confidence intervals for proportions with small expected number of
positive counts estimated from survey data", Survey Methodology 24(2)): n_eff = (sum w)^2 / sum w^2 and
k_eff = rate x n_eff. With every weight 1 these are k and n, and the bound is the exact one above; with unequal
weights it is their approximation, whose coverage tests/test_fair_evidence.py checks by simulation.
"""
from __future__ import annotations

import math

from qc_core.errors import UserError

DEFAULT_CONFIDENCE = 0.9
_MAX_NEEDED = 10 ** 9


class CertificationError(UserError):
    """A confidence or target that no promise can be made with (names the value)."""


MIN_CONFIDENCE = 0.5   # below it a "promise" is likelier false than true: an alpha typed where a confidence belongs


def check_confidence(value, what: str = "--confidence") -> float:
    """A confidence from 0.5 to below 1 (1 needs infinitely many groups; below 0.5 a promise is likelier false than
    true, and 0.05 is almost always an alpha typed where its confidence 0.95 belongs)."""
    try:
        c = float(value)
    except (TypeError, ValueError):
        raise CertificationError(f"{what} {value!r} is not a number; use a confidence between 0 and 1, "
                                 f"e.g. 0.9") from None
    if math.isnan(c) or not 0.0 < c < 1.0:
        raise CertificationError(f"{what} {value!r} is out of range: use a confidence strictly between 0 and 1 "
                                 f"(0.9 means the promise holds in 9 of 10 validation sets)")
    if c < MIN_CONFIDENCE:
        raise CertificationError(f"{what} {value!r} is below {MIN_CONFIDENCE}: a promise at that confidence is "
                                 f"likelier "
                                 f"false than true. Did you mean {1 - c:g} (an error rate of {c:g} is a confidence of "
                                 f"{1 - c:g})?")
    return c


def upper_bound(errors: int, n: int, confidence: float) -> float:
    """Exact one-sided Clopper-Pearson upper bound at `confidence` of a rate with `errors` out of `n`."""
    if not 0 <= errors <= n:
        raise UserError(f"errors {errors} out of n {n}")
    return beta_upper(errors, n, confidence)


def beta_upper(k: float, n: float, confidence: float) -> float:
    """The Clopper-Pearson upper bound at counts that may be effective (non-whole) ones: 1.0 when n <= 0 or k >= n."""
    if n <= 0 or k >= n:
        return 1.0
    from scipy.special import betaincinv   # imported on first use: a command's start stays light
    return float(betaincinv(k + 1, n - k, confidence))


def groups_needed(rate: float, confidence: float) -> int | None:
    """The smallest number of validation groups with no error whose bound is within `rate`; None when no number
    is enough (a rate of 0) or the number is beyond any validation set (over _MAX_NEEDED: a rate of 1e-300)."""
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return None
    closed = math.log1p(-confidence) / math.log1p(-rate) if math.log1p(-rate) != 0 else math.inf
    if not math.isfinite(closed) or closed > _MAX_NEEDED:
        return None
    n = max(1, math.ceil(closed))
    while upper_bound(0, n, confidence) > rate and n < _MAX_NEEDED:   # floating point on the closed form
        n += 1
    while n > 1 and upper_bound(0, n - 1, confidence) <= rate:
        n -= 1
    return n


def certified(errors: int, n: int, rate: float, confidence: float) -> bool:
    """The promise `true rate <= rate` holds at `confidence` (nothing is certified on zero groups)."""
    return n > 0 and upper_bound(errors, n, confidence) <= rate


def effective_counts(error_weights: list[float], weights: list[float]) -> tuple[float, float]:
    """(k_eff, n_eff) of weighted evidence (module doc): `weights` of every group, `error_weights` of those in error."""
    total, squares = sum(weights), sum(w * w for w in weights)
    if total <= 0:
        return 0.0, 0.0
    n_eff = total * total / squares
    return sum(error_weights) / total * n_eff, n_eff


def upper_bound_weighted(error_weights: list[float], weights: list[float], confidence: float) -> float:
    """The bound at the effective counts; exactly upper_bound(k, n, C) when every weight is 1."""
    k, n = effective_counts(error_weights, weights)
    if n <= 0 or k >= n:
        return 1.0
    if all(w == 1 for w in weights):
        return upper_bound(round(k), round(n), confidence)
    return beta_upper(k, n, confidence)
