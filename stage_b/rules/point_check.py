"""The checks an operating point's values pass before anything decides with them, and the error that names what fails:
ranges and types, promises that must follow from their own counts (Clopper-Pearson, recomputed: a file edited to
promise more is refused), the confidences of the family statement, and the fields live monitoring reads."""
from __future__ import annotations

import math
from typing import Protocol

from qc_core.errors import UserError
from stage_b.contract.bounds import in_range
from stage_b.contract.numbers import pct
from stage_b.stats.certify import CertificationError, beta_upper, check_confidence, groups_needed, upper_bound



class MissionPoint(Protocol):
    """What these checks read of a mission's point: stage_b.rules.operating_point.MissionPoint is one. Stated here as a
    protocol so that this module depends on no record module (the record imports these checks, not the other way)."""
    @property
    def threshold(self) -> float | None: ...
    @property
    def threshold_fail(self) -> float | None: ...
    @property
    def certified(self) -> bool: ...
    @property
    def confidence(self) -> float | None: ...
    @property
    def target_miss_rate(self) -> float | None: ...
    @property
    def target_overkill_rate(self) -> float | None: ...
    @property
    def overkill_certified(self) -> bool: ...
    @property
    def weighted(self) -> bool: ...
    @property
    def n_fail(self) -> int | None: ...
    @property
    def misses(self) -> int | None: ...
    @property
    def n_pass(self) -> int | None: ...
    @property
    def auto_overkills(self) -> int | None: ...
    @property
    def miss_effective_counts(self) -> list | None: ...
    @property
    def escape(self) -> dict | None: ...
    @property
    def profile(self) -> dict | None: ...
    @property
    def stage_a(self) -> dict | None: ...


class OperatingPointError(UserError):
    """An operating point that cannot be computed or used (names the file, mission or value)."""


def check_rate(value, what: str) -> float:
    """A rate or threshold in [0, 1], or an error naming `what`."""
    return in_range(value, what, 0.0, 1.0, "a value from 0 to 1", OperatingPointError)


def rate_or_none(value, what: str) -> float | None:
    """None, or a rate or threshold in [0, 1]; anything else (a text, true or false) is an error naming `what`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OperatingPointError(f"{what} is {value!r}, not a number")
    return check_rate(value, what)


def _count(value, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OperatingPointError(f"{where}: {key} is {value!r}, not a count; recompute the file")
    return value


def check_promise(point: MissionPoint, where: str, evidence_groups: int | None = None) -> None:
    """A mission entry's promises recomputed from its own counts: `certified` and `overkill_certified` must follow from
    them at the entry's confidence and targets, and the auto-fail threshold may not be below the auto-pass one. A file
    edited or forged to promise more than its counts support is refused, naming what does not follow."""
    t, t_fail = point.threshold, point.threshold_fail
    if t is not None and t_fail is not None and t_fail < t:
        raise OperatingPointError(f"{where}: threshold_fail {t_fail!r} is below threshold {t!r}: groups between them "
                                  f"would be auto-failed and auto-passed at once; recompute the file")
    check_live_fields(point, where)
    for key in ("target_miss_rate", "target_overkill_rate"):   # a target is a rate, certified or not
        rate_or_none(getattr(point, key), f"{where}: {key}")
    if not point.certified and not point.overkill_certified:
        return
    try:
        confidence = check_confidence(point.confidence, f"{where}: confidence")
    except CertificationError as exc:
        raise OperatingPointError(f"{exc}; recompute the file") from None
    if point.certified:
        _check_miss_promise(point, confidence, where, evidence_groups)
    if point.overkill_certified:
        target = rate_or_none(point.target_overkill_rate, f"{where}: target_overkill_rate")
        n_pass, over = _count(point.n_pass, "n_pass", where), _count(point.auto_overkills, "auto_overkills", where)
        if target is None or t_fail is None or over > n_pass or (
                not point.weighted and upper_bound(over, n_pass, confidence) > target + 1e-12):
            raise OperatingPointError(f"{where}: overkill_certified does not follow from its counts ({over} of "
                                      f"{n_pass} good groups auto-failed, target {target!r}); recompute the file")


def check_confidences(op: dict, where: str) -> None:
    """The confidences the live guard holds promises at (stage_b.monitoring.monitor: the family's per-claim one, else
    the file's):
    numbers strictly between 0 and 1, or absent. A NaN would hold every promise at no confidence at all."""
    values = [("confidence", op.get("confidence"))]
    family = op.get("family")
    if family is not None:
        if not isinstance(family, dict):
            raise OperatingPointError(f"{where}: family is {family!r}, not an object; recompute the file")
        values.append(("family.per_claim_confidence", family.get("per_claim_confidence")))
    for what, value in values:
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                  or not 0.0 < value < 1.0):   # a NaN fails 0 < x
            raise OperatingPointError(f"{where}: {what} {value!r} is not a confidence between 0 and 1; recompute "
                                      f"the file")


def check_live_fields(point: MissionPoint, where: str) -> None:
    """The fields the live guard reads (stage_b.monitoring.monitor): `escape` (counts and a bound that is a rate) and
    `profile`
    (p_fail values and counts). A value that is not what the guard can hold live work to is refused at load: a NaN
    bound, say, would otherwise mean a promise that never breaks."""
    escape = point.escape
    if escape is not None:
        if not isinstance(escape, dict):
            raise OperatingPointError(f"{where}: escape is {escape!r}, not an object; recompute the file")
        passed, escapes = escape.get("auto_passed"), escape.get("escapes")
        upper = escape.get("upper")
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (passed, escapes)) \
                or int(escapes or 0) > int(passed or 0) or not isinstance(upper, (int, float)) \
                or isinstance(upper, bool) \
                or not 0.0 <= upper <= 1.0:   # a NaN fails 0 <= x
            raise OperatingPointError(f"{where}: escape {escape!r} is not the escape rate's counts and bound (whole "
                                      f"auto_passed >= escapes >= 0, upper from 0 to 1); recompute the file")
    stage_a = point.stage_a
    if stage_a is not None and (not isinstance(stage_a, dict) or not isinstance(stage_a.get("models", []), list)
                                or not all(isinstance(m, str) for m in stage_a.get("models", []))
                                or not isinstance(stage_a.get("evidence_through"), (str, type(None)))):
        raise OperatingPointError(f"{where}: stage_a {stage_a!r} is not the Stage-A models (texts) and "
                                  f"evidence_through (an ISO time or null) the promise rests on; recompute the file")
    profile = point.profile
    if profile is not None:
        ok = isinstance(profile, dict) and isinstance(profile.get("groups"), int) and isinstance(
            profile.get("defect_groups"), int) and 0 <= profile["defect_groups"] <= profile["groups"] and isinstance(
            profile.get("p_fail"), list) and all(isinstance(p, (int, float)) and not isinstance(p, bool)
                                                 and 0.0 <= p <= 1.0 for p in profile["p_fail"])
        if not ok:
            raise OperatingPointError(f"{where}: profile is not the validation p_fail values and counts the drift "
                                      f"test reads; recompute the file")


def _check_miss_promise(point: MissionPoint, confidence: float, where: str, evidence_groups: int | None) -> None:
    """`certified` follows from the entry's misses of its defective groups (their effective counts when weighted)."""
    target = rate_or_none(point.target_miss_rate, f"{where}: target_miss_rate")
    if target is None or point.threshold is None:
        raise OperatingPointError(f"{where}: certified without a target miss rate and a threshold; recompute "
                                  f"the file")
    n_fail, misses = _count(point.n_fail, "n_fail", where), _count(point.misses, "misses", where)
    if misses > n_fail:
        raise OperatingPointError(f"{where}: {misses} misses of {n_fail} defective groups; recompute the file")
    _check_counts_against_profile(point, n_fail, where, evidence_groups)
    if point.weighted:
        k, n = (point.miss_effective_counts or [None, None])
        # an effective sample size (Kish) never exceeds the groups it is made of
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                   for x in (k, n)) or k > n or n > n_fail + 1e-9:
            raise OperatingPointError(f"{where}: a weighted promise whose effective counts "
                                      f"{point.miss_effective_counts!r} are not at most its {n_fail} defective groups "
                                      f"(finite, missed <= counted); recompute the file")
        bound = beta_upper(k, n, confidence)
    else:
        bound = upper_bound(misses, n_fail, confidence)
    if bound > target + 1e-12:
        raise OperatingPointError(
            f"{where}: certified, but {misses} missed of {n_fail} defective groups bound the miss rate at "
            f"{pct(bound)} with {pct(confidence)} confidence, above its target {pct(target)} (at least "
            f"{groups_needed(target, confidence) or 'more than 10^9'} defective groups without a miss are needed): "
            f"the file was edited or forged; recompute it with group-qc evaluate")


def _check_counts_against_profile(point: MissionPoint, n_fail: int, where: str, evidence_groups: int | None) -> None:
    """A certified promise counts groups the file itself names: every group it counts has its p_fail in the entry's
    `profile` (profile_of: the evidence's p_fail values). More groups than that were never evidence (a forged count:
    `n_fail: 10^9, misses: 0`), and a certified entry without its profile cannot be checked: both refused."""
    profile = point.profile if evidence_groups is None else {"p_fail": [None] * evidence_groups}
    if not isinstance(profile, dict) or not isinstance(profile.get("p_fail"), list):
        raise OperatingPointError(f"{where}: certified without the profile of the groups it was certified on (their "
                                  f"p_fail values); recompute the file with group-qc evaluate")
    n_pass = point.n_pass if isinstance(point.n_pass, int) and not isinstance(point.n_pass, bool) else 0
    if n_fail + n_pass > len(profile["p_fail"]):
        raise OperatingPointError(f"{where}: certified on {n_fail} defective and {n_pass} good groups, but the file's "
                                  f"evidence names {len(profile['p_fail'])} (profile.p_fail): the counts were edited "
                                  f"or forged; recompute the file with group-qc evaluate")
