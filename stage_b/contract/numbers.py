"""How probabilities, thresholds and rates are printed. Pure (no imports): a p_fail and the threshold it is compared
with never print alike when the verdict depends on which is larger, and two different thresholds in one table never
print alike either."""
from __future__ import annotations


def fmt_p(x: float | None, other: float | None = None) -> str:
    """A probability with 3 significant figures, or as many more as it takes to tell it from `other` (so a p_fail
    and its threshold never print alike when the verdict depends on which is larger)."""
    if x is None:
        return "n/a"
    digits = 3
    while other is not None and x != other and digits < 17 and f"{x:.{digits}g}" == f"{other:.{digits}g}":
        digits += 1
    return f"{x:.{digits}g}"


def fmt_distinct(values) -> list[str]:
    """Each value as fmt_p writes it, with as many significant figures as it takes for different values to print
    differently (two thresholds 1e-4 apart are never both "0.982" in one table row)."""
    shown = [v for v in values if v is not None]
    digits = 3
    while digits < 17 and len({f"{v:.{digits}g}" for v in shown}) < len(set(shown)):
        digits += 1
    return ["n/a" if v is None else f"{v:.{digits}g}" for v in values]


def pct1(x: float | None) -> str:
    """A share with one decimal (12.3%: counts of groups and decisions, the reports' rates); n/a for None."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def pct(x: float | None) -> str:
    """A rate as a percentage with 3 significant figures (a promise's target, confidence and bound); n/a for None."""
    return "n/a" if x is None else f"{100 * x:.3g}%"
