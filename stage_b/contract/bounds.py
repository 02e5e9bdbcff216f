"""A number a user gives (a flag, a setting, a file's field), checked against its range: one message shape for all.
Pure (math)."""
from __future__ import annotations

import math

from qc_core.errors import UserError


def in_range(value, what: str, low: float, high: float, use: str, error: type[Exception] = UserError) -> float:
    """float(value) when it is a number from `low` to `high`; else `error` naming `what` and the value, ending with
    `use` (what to give instead, e.g. "a share from 0 to 1, e.g. 0.05")."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise error(f"{what} {value!r} is not a number; use {use}") from None
    if math.isnan(x) or not low <= x <= high:
        raise error(f"{what} {value!r} is out of range: use {use}")
    return x
