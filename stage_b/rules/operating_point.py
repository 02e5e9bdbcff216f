"""From verdict probabilities to thresholds a QC owner can sign for. Pure (math/json, scipy through certify).

`p_fail` is the model's probability of the first line `不通过` against `通过`, from the log-probabilities of
both whole lines (stage_b.model.generate.VerdictEngine.verdict_logprobs), normalised over the two.

The rule, stated once here so that anyone can recompute it from predictions.jsonl (`MissionPoint.decide` applies it):
  - the verdict at threshold t is 不通过 iff p_fail >= t;
  - p_fail values closer than P_FAIL_TIE (2^-20) are ties (the same summaries scored twice differ by ~1e-8 in float32
    with another batch): validation p_fails are grouped into runs whose neighbours are at most 2 P_FAIL_TIE apart,
    and the candidates are each run's smallest value minus P_FAIL_TIE, plus 1.0 (which fails nothing but a p_fail
    of 1; left out when a validation p_fail is within P_FAIL_TIE of it). So no threshold separates ties and none
    lies within P_FAIL_TIE of a validation p_fail: a group scored again a little lower keeps its side;
  - the auto-pass threshold t is the largest candidate whose exact one-sided Clopper-Pearson upper bound, at the
    confidence C, of the validation miss rate (defective groups with p_fail < t, over defective groups) is <= the
    target R (stage_b.stats.certify). Such a t exists iff the mission has at least `fail_groups_needed` defective
    validation groups: then the mission is `certified`. When none does, t is the point rule (the largest
    candidate whose measured miss rate is <= R) so the file stays usable, and the mission is not certified;
  - a mission without defective validation groups has no miss rate: no threshold, not certified;
  - with a target overkill rate O, the auto-fail threshold t_fail is the smallest candidate whose bound on the
    overkill rate (good groups with p_fail >= t_fail, over good groups) is <= O, raised to t when below it; when no
    candidate certifies O, nothing is auto-failed (t_fail is None). Without O, t_fail = t (two-way decision);
  - the review margin m: the distances |p_fail - t| of the validation groups t gets wrong, sorted; m is the
    smallest distance that covers `review_share` of them, plus P_FAIL_TIE (0, no band, when t gets none wrong);
  - a group is decided automatically iff its mission is certified (or uncertified decisions are allowed),
    p_fail < t or p_fail >= t_fail, and |p_fail - t| > m; every other group needs a person's review, with the
    reasons why. The automation share is the share of groups decided automatically.
"""
from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from qc_core.errors import UserError
from qc_core.paths import resolved

from stage_b.contract.bounds import in_range
from stage_b.stats.certify import (DEFAULT_CONFIDENCE, CertificationError, check_confidence, effective_counts,
                                   groups_needed, upper_bound, upper_bound_weighted)
from stage_b.stats.metrics import wilson
from stage_b.contract.numbers import fmt_p, pct
from stage_b.contract.verdict import FAIL, PASS

OPERATING_POINT_FORMAT = 2
DEFAULT_REVIEW_SHARE = 0.8
# what a promise's groups are called, by the split it was certified on (data.split)
EVIDENCE = {"val": "validation", "held_out": "held-out (validation and reviewed work orders)"}
UNCALIBRATED_THRESHOLD = 0.5   # a mission with no threshold at all: the model's own choice, and always reviewed
RULE = ("verdict is 不通过 iff p_fail >= threshold; candidates: each run of validation p_fails within 2 x 2^-20 of "
        "one another (ties), its smallest minus 2^-20, and 1.0; threshold = the largest candidate whose exact "
        "one-sided Clopper-Pearson upper bound at `confidence` of the validation miss rate is <= target_miss_rate "
        "(certified), else the largest whose measured miss rate is (not certified); threshold_fail = the smallest "
        "whose bound on the overkill rate is <= target_overkill_rate (None: nothing auto-fails); a group is decided "
        "without review iff its mission is certified, p_fail < threshold or p_fail >= threshold_fail, and "
        "|p_fail - threshold| > review_margin")


class OperatingPointError(UserError):
    """An operating point that cannot be computed or used (names the file, mission or value)."""


def p_fail(logprobs: dict[str, float]) -> float:
    """P(不通过 line) / (P(不通过 line) + P(通过 line)) from the two lines' log-probabilities, without overflow."""
    diff = logprobs[PASS] - logprobs[FAIL]
    if diff > 0:
        e = math.exp(-diff)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(diff))


def verdict_at(p: float, threshold: float) -> str:
    return FAIL if p >= threshold else PASS


def check_rate(value, what: str) -> float:
    """A rate or threshold in [0, 1], or an error naming `what`."""
    return in_range(value, what, 0.0, 1.0, "a value from 0 to 1", OperatingPointError)


P_FAIL_TIE = 2.0 ** -20   # about 1e-6; a power of two, so thresholds and margins built from it are exact in binary


def candidate_thresholds(values) -> list[float]:
    """The thresholds the rule may pick over these validation p_fail values, ascending (module doc: ties)."""
    ordered = sorted(set(values))
    out = []
    for k, p in enumerate(ordered):
        if k == 0 or p - ordered[k - 1] > 2 * P_FAIL_TIE:   # the smallest value of a run of ties
            out.append(max(0.0, p - P_FAIL_TIE))
    if not ordered or ordered[-1] < 1.0 - P_FAIL_TIE:
        out.append(1.0)
    return out


def pairs(points) -> list[tuple[float, str]]:
    """(p_fail, expected) of points that may carry a weight as a third element (fair_points_of)."""
    return [(pt[0], pt[1]) for pt in points]


def weight(point) -> float:
    return point[2] if len(point) > 2 else 1.0


def rates_at(points, threshold: float) -> dict:
    """Miss and overkill at one threshold over (p_fail, expected[, weight]) points, counted (each group once), with
    95% Wilson intervals."""
    points = pairs(points)
    n_fail = sum(e == FAIL for _, e in points)
    n_pass = len(points) - n_fail
    misses = sum(e == FAIL and p < threshold for p, e in points)
    overkills = sum(e == PASS and p >= threshold for p, e in points)
    return {"threshold": threshold, "n": len(points), "n_fail": n_fail, "n_pass": n_pass,
            "misses": misses, "overkills": overkills,
            "miss_rate": misses / n_fail if n_fail else None, "miss_rate_ci95": wilson(misses, n_fail),
            "overkill_rate": overkills / n_pass if n_pass else None, "overkill_rate_ci95": wilson(overkills, n_pass)}


def curve(points) -> list[dict]:
    """The miss/overkill trade-off at every candidate threshold, from 1.0 down (miss falls, overkill rises)."""
    points = pairs(points)
    candidates = candidate_thresholds(p for p, _ in points)[::-1]
    fails = sorted(p for p, e in points if e == FAIL)
    passes = sorted(p for p, e in points if e == PASS)
    out = []
    for t in candidates:
        misses = _count_below(fails, t)
        overkills = len(passes) - _count_below(passes, t)
        out.append({"threshold": t, "miss_rate": misses / len(fails) if fails else None,
                    "overkill_rate": overkills / len(passes) if passes else None})
    return out


def _count_below(sorted_values: list[float], t: float) -> int:
    return bisect.bisect_left(sorted_values, t)


def pick_threshold(points, target_miss_rate: float) -> float | None:
    """The point rule's threshold: the largest candidate whose measured miss rate is <= the target; None when there
    is no fail group to measure a miss rate on."""
    if not any(pt[1] == FAIL for pt in points):
        return None
    return next(c["threshold"] for c in curve(points) if c["miss_rate"] <= target_miss_rate)


def picks_at(points, targets) -> list[tuple[float | None, dict | None]]:
    """For each miss-rate target, the point rule's threshold on these (p_fail, expected) points and the rates there
    ((None, None) without a fail group): report.md's curve table."""
    points = [tuple(pt) for pt in points]
    picked = [pick_threshold(points, target) for target in targets]
    return [(t, rates_at(points, t) if t is not None else None) for t in picked]


def _weighted_below(points, label: str) -> tuple[list[float], list[float], list[float]]:
    """(sorted p_fail, weights in that order, their running sums) of the points with this label."""
    chosen = sorted((pt[0], weight(pt)) for pt in points if pt[1] == label)
    running, total = [], 0.0
    for _, w in chosen:
        total += w
        running.append(total)
    return [p for p, _ in chosen], [w for _, w in chosen], running


def _bound_below(values, weights, running, t: float, confidence: float, above: bool = False) -> float:
    """The bound on the weighted share of these groups with p_fail < t (above: >= t)."""
    k = bisect.bisect_left(values, t)
    below = running[k - 1] if k else 0.0
    errors = (running[-1] - below) if above else below
    if all(w == 1 for w in weights):
        n_err = len(values) - k if above else k
        return upper_bound(n_err, len(values), confidence)
    return upper_bound_weighted([errors], weights, confidence)


def certified_threshold(points, target_miss_rate: float, confidence: float) -> float | None:
    """The largest candidate whose miss-rate bound at `confidence` is <= the target (module doc); None when none is.
    Points may carry weights (fair_points_of): the bound is then certify.upper_bound_weighted's."""
    fails, weights, running = _weighted_below(points, FAIL)
    if not fails:
        return None
    for t in candidate_thresholds(pt[0] for pt in points)[::-1]:
        if _bound_below(fails, weights, running, t, confidence) <= target_miss_rate:
            return t
    return None


def certified_fail_threshold(points, target_overkill_rate: float, confidence: float) -> float | None:
    """The smallest candidate whose overkill-rate bound at `confidence` is <= the target; None when none is."""
    passes, weights, running = _weighted_below(points, PASS)
    if not passes:
        return None
    for t in candidate_thresholds(pt[0] for pt in points):
        if _bound_below(passes, weights, running, t, confidence, above=True) <= target_overkill_rate:
            return t
    return None


def review_margin(points, threshold: float, share: float) -> float:
    """The rule's review margin (module doc)."""
    wrong = sorted(abs(p - threshold) for p, e in pairs(points) if verdict_at(p, threshold) != e)
    if not wrong:
        return 0.0
    return wrong[max(0, math.ceil(share * len(wrong)) - 1)] + P_FAIL_TIE   # the covered errors stay in under noise


NO_AUTOMATION = "no automation"   # what a certified rule that decides nothing without review is called


def automates_nothing(entry: dict) -> bool:
    """A certified rule that decided none of its validation groups without review: not called certified."""
    return bool(entry.get("certified")) and entry.get("validation_auto_decided") == 0


def promise_text(entry: dict) -> str:
    """The mission's promise in the one sentence a QC owner signs, the same words on every page (report.md, the
    operating point, the judge's summary and verdict lines, the review and monitor pages): both numbers of its one
    rule, the miss rate signed and the escape rate the monitor holds live work to, then what it rests on (`evidence`:
    validation, or held-out: validation and reviewed work orders). A certified rule that passes none of its groups
    without review is no automation, and says so instead of "certified"."""
    target, confidence = entry["target_miss_rate"], entry["confidence"]
    evidence = entry.get("evidence", "validation")
    if entry["certified"]:
        counted = (f"{entry['misses']} missed of {entry['n_fail']} defective {evidence} groups; miss-rate upper bound "
                   f"{pct(entry['miss_rate_upper'])}")
        if automates_nothing(entry):
            return (f"{NO_AUTOMATION}: people decide every group (the rule certified for a miss rate <= {pct(target)} "
                    f"with {pct(confidence)} confidence decides none of the {entry['n']} {evidence} groups without "
                    f"review; {counted})")
        escape = (entry.get("escape") or {}).get("upper")
        return (f"of defective work orders at most {pct(target)} pass without a person"
                + (f"; of the work orders passed without a person at most {pct(escape)} are defective"
                   if escape is not None else "")
                + f"; {pct(confidence)} sure ({counted})")
    needed = entry.get("fail_groups_needed")
    return (f"cannot promise a miss rate <= {pct(target)} with {pct(confidence)} confidence: "
            f"{entry['n_fail']} defective {evidence} group{'s' if entry['n_fail'] != 1 else ''}, "
            + (f"{needed} needed" if needed is not None else
               "no number is enough for a 0% target" if target <= 0 else "more than 10^9 would be needed"))


def overkill_promise_text(entry: dict) -> str | None:
    """The auto-fail side's promise in one sentence, when a target overkill rate was given."""
    target = entry.get("target_overkill_rate")
    if target is None:
        return None
    confidence, evidence = entry["confidence"], entry.get("evidence", "validation")
    if entry["overkill_certified"]:
        return (f"overkill rate of auto-failed groups <= {pct(target)} with {pct(confidence)} confidence "
                f"({entry['auto_overkills']} of {entry['n_pass']} good {evidence} groups auto-failed; upper bound "
                f"{pct(entry['overkill_rate_upper'])})")
    needed = entry.get("pass_groups_needed")
    return (f"cannot promise an overkill rate <= {pct(target)} with {pct(confidence)} confidence "
            f"({entry['n_pass']} good {evidence} groups, "
            + (f"{needed} needed" if needed is not None else
               "no number is enough for a 0% target" if target <= 0 else "more than 10^9 would be needed")
            + "): nothing is auto-failed, every group above the threshold goes to review")


def mission_point(points, target: float, share: float, confidence: float = DEFAULT_CONFIDENCE,
                  target_overkill: float | None = None, evidence: str = "validation") -> dict:
    """One mission's (or the pooled) entry of operating_point.json (module doc). `points`: (p_fail, expected) or
    (p_fail, expected, weight), the weight of fair evidence (fair_points_of); the bounds then weigh them
    (stage_b.stats.certify), the counts count each group once."""
    plain = pairs(points)
    n_fail = sum(e == FAIL for _, e in plain)
    n_pass = len(plain) - n_fail
    weighted = any(weight(pt) != 1 for pt in points)
    entry: dict = {"target_miss_rate": target, "confidence": confidence, "target_overkill_rate": target_overkill,
                   "weighted": weighted, "evidence": evidence}
    certified_t = certified_threshold(points, target, confidence) if n_fail else None
    threshold = certified_t if certified_t is not None else pick_threshold(points, target)
    entry["certified"] = certified_t is not None
    if not entry["certified"]:
        entry["fail_groups_needed"] = groups_needed(target, confidence)
    if threshold is None:
        entry.update({"threshold": None, "threshold_fail": None, "n": len(plain), "n_fail": 0, "n_pass": n_pass,
                      "misses": 0, "review_margin": 0.0, "overkill_certified": False,
                      "why_none": "no fail (审核不通过) group in validation, so no miss rate to hold to the target"})
        entry["promise"] = promise_text(entry)
        return entry
    at = rates_at(plain, threshold)
    entry.update(at)
    fails, fail_weights, fail_running = _weighted_below(points, FAIL)
    entry["miss_rate_upper"] = _bound_below(fails, fail_weights, fail_running, threshold, confidence)
    if weighted:   # what the weighted bound was computed from, so that a reader can recompute it (load_operating_point)
        k = bisect.bisect_left(fails, threshold)
        entry["miss_effective_counts"] = list(effective_counts(fail_weights[:k], fail_weights))
    threshold_fail: float | None
    if target_overkill is None:
        threshold_fail = threshold
    else:
        t_fail = certified_fail_threshold(points, target_overkill, confidence) if n_pass else None
        threshold_fail = None if t_fail is None else max(t_fail, threshold)
    entry["threshold_fail"] = threshold_fail
    auto_overkills = sum(e == PASS and threshold_fail is not None and p >= threshold_fail for p, e in plain)
    passes, pass_weights, pass_running = _weighted_below(points, PASS)
    entry.update({"auto_overkills": auto_overkills,
                  "overkill_rate_upper": (_bound_below(passes, pass_weights, pass_running, threshold_fail, confidence,
                                                       above=True) if passes and threshold_fail is not None
                                          else upper_bound(0, n_pass, confidence)),
                  "overkill_certified": (target_overkill is not None and threshold_fail is not None)})
    if target_overkill is not None and not entry["overkill_certified"]:
        entry["pass_groups_needed"] = groups_needed(target_overkill, confidence)
    margin = review_margin(plain, threshold, share)
    in_band = [(p, e) for p, e in plain if margin > 0 and abs(p - threshold) <= margin]
    entry.update({"review_margin": margin, "validation_needs_review": len(in_band),
                  "validation_errors_in_review": sum(verdict_at(p, threshold) != e for p, e in in_band)})
    entry["escape"] = escape_rate(points, entry, confidence)
    entry["promise"] = promise_text(entry)
    if target_overkill is not None:
        entry["overkill_promise"] = overkill_promise_text(entry)
    return entry


def escape_rate(points, entry: dict, confidence: float) -> dict:
    """The escape rate of auto-passed groups: of the groups the rule would pass without review (certified or not:
    the rate of the rule itself), the (weighted) share that is defective, with its upper bound at `confidence`. It is
    what a blind audit of auto-passed work measures (stage_b.monitoring.monitor), so live and certified numbers are the
    same
    quantity."""
    point = decision_point(entry, certified=True)
    passed = [pt for pt in points if (d := point.decide(pt[0])).automatic and d.verdict == PASS]
    weights = [weight(pt) for pt in passed]
    escapes = [weight(pt) for pt in passed if pt[1] == FAIL]
    total = sum(weights)
    return {"auto_passed": len(passed), "escapes": len(escapes), "rate": sum(escapes) / total if total else None,
            "upper": upper_bound_weighted(escapes, weights, confidence) if passed else 1.0}


@dataclass(frozen=True)
class Decision:
    """What the rule does with one group: the verdict line, and why a person must review it (empty: decided
    automatically). `mission_why`: reasons that send every group of the mission to review (no threshold, not
    certified), so the group was not chosen by its own score; `group_why`: reasons of this group's own p_fail."""
    verdict: str
    mission_why: tuple[str, ...] = ()
    group_why: tuple[str, ...] = ()

    @property
    def why(self) -> tuple[str, ...]:
        return self.mission_why + self.group_why

    @property
    def automatic(self) -> bool:
        return not self.why


@dataclass(frozen=True)
class MissionPoint:
    """One mission's decision point: an entry of operating_point.json's `missions` (or its pooled `overall`), what
    thresholds_for makes of a mission the file has no threshold for, or `--threshold T`'s (manual_point). The keys the
    rule and the promise checks read are fields; every other key of a file's entry (its rates, automation, left_out,
    …) is kept in `extra`, and `keys` is the entry's key order, so that to_json writes back the entry as it was read."""
    threshold: float | None        # None: no calibration at all (decide: the model's own choice, always reviewed)
    threshold_fail: float | None   # None: nothing is auto-failed
    review_margin: float
    certified: bool
    promise: str
    why_none: str | None = None    # why there is no threshold (with threshold None)
    source: str | None = None      # where the point came from (the file, "--threshold", "none"); not in the file
    confidence: float | None = None
    target_miss_rate: float | None = None
    target_overkill_rate: float | None = None
    overkill_certified: bool = False
    weighted: bool = False
    n_fail: int | None = None
    misses: int | None = None
    n_pass: int | None = None
    auto_overkills: int | None = None
    miss_effective_counts: list | None = None
    escape: dict | None = None     # the escape rate of auto-passed groups (escape_rate): what the monitor holds work to
    profile: dict | None = None    # the validation p_fails the monitor's drift check compares with (profile_of)
    stage_a: dict | None = None    # the Stage-A models the promise rests on and its evidence_through
    extra: dict = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, entry, where: str, evidence_groups: int | None = None) -> MissionPoint:
        """A file's mission entry, its types, ranges and promises checked; `where` ("FILE: MISSION") names it in
        every refusal. A key the rule reads that is missing is refused, never read as a default. `evidence_groups`:
        for the pooled `overall` entry, the groups the missions' profiles name together (its own profile is theirs)."""
        if not isinstance(entry, dict):
            raise OperatingPointError(f"{where}: the entry is {entry!r}, not an object; recompute the file")
        _number_or_none(entry.get("threshold"), f"{where}: threshold")
        _number_or_none(entry.get("threshold_fail"), f"{where}: threshold_fail")
        _number_or_none(entry.get("review_margin", 0.0), f"{where}: review_margin")
        if not isinstance(entry.get("certified"), bool):
            raise OperatingPointError(f"{where}: certified is {entry.get('certified')!r}, not true or false; "
                                      f"recompute the file")
        required = ENTRY_KEYS + (("why_none",) if entry.get("threshold") is None else ())
        missing = [key for key in required if key not in entry]
        if missing:
            raise OperatingPointError(f"{where}: no {', '.join(missing)} (a mission entry holds "
                                      f"{', '.join(ENTRY_KEYS)}, and why_none when threshold is null); recompute "
                                      f"the file with python -m stage_b.evaluate")
        check_promise(cls.of(entry), where, evidence_groups)
        return cls.of({**entry, **_promise_texts(entry, where)})

    @classmethod
    def of(cls, entry: dict) -> MissionPoint:
        """The point of an entry as mission_point writes it (unchecked: from_json checks a file's)."""
        typed = {name: entry[name] for name in _TYPED_ENTRY_KEYS if name in entry}
        return cls(**typed, extra={k: v for k, v in entry.items() if k not in typed}, keys=tuple(entry))

    def to_json(self) -> dict:
        """The entry as operating_point.json holds it: the keys it was read with, in their order."""
        names = self.keys or tuple(k for k in _TYPED_ENTRY_KEYS if getattr(self, k) is not None)
        return {k: self.extra[k] if k in self.extra else getattr(self, k) for k in names}

    def decide(self, p: float, allow_uncertified: bool = False) -> Decision:
        """The rule (module doc) for one group (threshold None: no calibration at all, the verdict is the model's own
        choice at UNCALIBRATED_THRESHOLD and the group is always reviewed)."""
        threshold = self.threshold
        if threshold is None:
            return Decision(verdict_at(p, UNCALIBRATED_THRESHOLD),
                            (f"no threshold for this mission ({self.why_none or self.promise or 'none'}): "
                             f"the verdict is the model's own choice (p_fail >= {UNCALIBRATED_THRESHOLD})",))
        mission_why, why = [], []
        if not self.certified and not allow_uncertified:
            mission_why.append(f"not certified: {self.promise or 'no promise for this mission'}")
        threshold_fail = self.threshold_fail
        if p >= threshold and (threshold_fail is None or p < threshold_fail):
            why.append(f"p_fail {fmt_p(p, threshold)} is in the review band: at or above the auto-pass threshold "
                       f"{fmt_p(threshold, p)} and " + (f"below the auto-fail threshold {fmt_p(threshold_fail, p)}"
                                                        if threshold_fail is not None else
                                                        "nothing is auto-failed (no certified overkill rate)"))
        margin = self.review_margin or 0.0
        if margin > 0 and abs(p - threshold) <= margin:
            why.append(f"p_fail {fmt_p(p, threshold)} is within {fmt_p(margin)} of the threshold "
                       f"{fmt_p(threshold, p)}")
        return Decision(verdict_at(p, threshold), tuple(mission_why), tuple(why))


def _promise_texts(entry: dict, where: str) -> dict:
    """The entry's promise sentences, recomputed from its own counts (promise_text): the text a verdict line, a page
    and a report print is never the file's words, which an edit could make say anything. An entry whose counts do not
    make a sentence keeps its own text, which must then be text."""
    out = {}
    for key, make in (("promise", promise_text), ("overkill_promise", overkill_promise_text)):
        if key not in entry:
            continue
        try:
            text = make(entry) if entry.get("threshold") is not None else None
        except (KeyError, TypeError, ValueError):
            text = None
        if text is None and entry.get("certified" if key == "promise" else "overkill_certified") is True:
            raise OperatingPointError(f"{where}: certified without the counts its {key} is stated from (target, "
                                      f"confidence, misses, groups, upper bound); recompute the file")
        if text is None and not isinstance(entry[key], (str, type(None))):
            raise OperatingPointError(f"{where}: {key} is {entry[key]!r}, not a sentence; recompute the file")
        if text is not None:
            out[key] = text
    return out


# what the rule reads of a file's mission entry, always written by mission_point: none may be missing
ENTRY_KEYS = ("threshold", "threshold_fail", "review_margin", "certified", "promise")
_TYPED_ENTRY_KEYS = tuple(f.name for f in fields(MissionPoint) if f.name not in ("extra", "keys"))


def decision_point(entry: dict, certified: bool) -> MissionPoint:
    """The point of an entry mission_point is building, to count which groups the rule decides without review (its
    promise, not written yet, only words the reasons, which counting does not read)."""
    return MissionPoint(entry["threshold"], entry["threshold_fail"], entry["review_margin"], certified, promise="")


@dataclass(frozen=True)
class OperatingPoint:
    """operating_point.json, read (load_operating_point) or as build_operating_point writes it. `model`, `adapters`
    and `missions` are what the judge needs and every file holds; the rest is what stage_b.evaluate writes besides
    (None in a file that lacks it: the monitor needs `confidence`, and says so). `keys`: the file's key order."""
    model: dict
    adapters: list
    missions: dict[str, MissionPoint]
    format: int = OPERATING_POINT_FORMAT
    rule: str | None = None
    review_share: float | None = None
    confidence: float | None = None
    family: dict | None = None
    data: dict | None = None
    overall: MissionPoint | None = None
    evidence: str | None = None
    automation: dict | None = None
    extra: dict = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, op, where) -> OperatingPoint:
        """The content of an operating point file, its types and ranges checked; `where` (the file) names it in
        every refusal."""
        fmt = op.get("format") if isinstance(op, dict) else None
        if fmt != OPERATING_POINT_FORMAT:
            why = (" (format 1 predates certified promises: its thresholds carry no miss-rate bound)" if fmt == 1
                   else "")
            raise OperatingPointError(f"{where} is not an operating point file of format {OPERATING_POINT_FORMAT} "
                                      f"(format {fmt!r}){why}; recompute it with python -m stage_b.evaluate "
                                      f"--target_miss_rate R --confidence C")
        if not isinstance(op.get("model"), dict) or not isinstance(op.get("adapters"), list) or \
                not all(isinstance(a, dict) for a in op["adapters"]):
            raise OperatingPointError(f"{where}: `model` must be an object and `adapters` a list of objects (as "
                                      f"stage_b.evaluate writes them); recompute the file")
        data = op.get("data")
        if data is not None and (not isinstance(data, dict) or not isinstance(data.get("selection", {}), dict)):
            raise OperatingPointError(f"{where}: `data` must be an object whose `selection` is an object (as "
                                      f"stage_b.evaluate writes it); recompute the file")
        if not isinstance(op.get("missions"), dict):
            raise OperatingPointError(f"{where}: `missions` must be an object of mission entries; recompute the file")
        missions = {m: MissionPoint.from_json(e, f"{where}: {m}") for m, e in op["missions"].items()}
        named = sum(len((m.profile or {}).get("p_fail") or []) for m in missions.values())
        overall = None if op.get("overall") is None else MissionPoint.from_json(op["overall"], f"{where}: overall",
                                                                                evidence_groups=named)
        check_confidences(op, where)
        typed = {k: op[k] for k in _TYPED_OP_KEYS if k in op}
        return cls(**{**typed, "missions": missions, "overall": overall},
                   extra={k: v for k, v in op.items() if k not in typed}, keys=tuple(op))

    def to_json(self) -> dict:
        """The file's content: the keys it was read with, in their order."""
        names = self.keys or tuple(k for k in _TYPED_OP_KEYS if getattr(self, k) is not None)
        return {k: self.extra[k] if k in self.extra else self._json_value(k) for k in names}

    def _json_value(self, key: str):
        if key == "missions":
            return {m: e.to_json() for m, e in self.missions.items()}
        if key == "overall":
            return None if self.overall is None else self.overall.to_json()
        return getattr(self, key)


_TYPED_OP_KEYS = tuple(f.name for f in fields(OperatingPoint) if f.name not in ("extra", "keys"))


def automation(points, entry: dict) -> dict:
    """How many of these groups the rule decides without review, with a 95% Wilson interval of the share."""
    point = decision_point(entry, entry["certified"])
    auto = sum(point.decide(p).automatic for p, _ in pairs(points))
    return {"validation_auto_decided": auto, "automation_share": auto / len(points) if points else None,
            "automation_share_ci95": wilson(auto, len(points))}


def points_of(predictions: list[dict]) -> dict[str, list[tuple[float, str]]]:
    """(p_fail, expected) per mission from predictions that have a p_fail (groups not judged have none)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for p in predictions:
        if p.get("p_fail") is not None:
            out.setdefault(p["mission"], []).append((p["p_fail"], p["expected"]))
    return out


def fair_points_of(predictions: list[dict]) -> tuple[dict[str, list[tuple]], dict[str, dict[str, int]]]:
    """({mission: [(p_fail, expected, weight)]}, {mission: {why left out: groups}}): the predictions a promise's bound
    may count (stage_b.rules.routes: fair evidence, weighted by 1 / the probability it was reviewed) and those it may
    not.
    A prediction without `evidence` (the validation split, every group of it labelled) counts with weight 1."""
    points: dict[str, list[tuple]] = {}
    left_out: dict[str, dict[str, int]] = {}
    for p in predictions:
        if p.get("p_fail") is None:
            continue
        evidence = p.get("evidence") or {}
        w = evidence.get("weight", 1.0)
        if w is None:
            why = evidence.get("why_not") or "not a fair sample"
            left_out.setdefault(p["mission"], {})
            left_out[p["mission"]][why] = left_out[p["mission"]].get(why, 0) + 1
            continue
        points.setdefault(p["mission"], []).append((p["p_fail"], p["expected"], float(w)))
    return points, left_out


def profile_of(predictions: list[dict]) -> dict:
    """What the monitor's drift check compares live work with (stage_b.monitoring.monitor): the validation groups'
    p_fail values
    and how many groups have a summary that shows a defect (stage_b.contract.grounding)."""
    p_fails = sorted(round(p["p_fail"], 9) for p in predictions if p.get("p_fail") is not None)
    defect = sum(bool((p.get("grounding") or {}).get("defect_photos")) for p in predictions)
    return {"p_fail": p_fails, "defect_groups": defect, "groups": len(predictions)}


def family(missions: list[str], sides: int, confidence: float, family_wise: bool) -> dict:
    """The confidence of all promises holding together, by Bonferroni's inequality: K claims each at confidence c
    hold jointly with probability >= 1 - K (1 - c). family_wise certifies each claim at c = 1 - (1 - C) / K, so that
    the family holds at C; otherwise each claim is at C and the family statement is the weaker 1 - K (1 - C)."""
    claims = len(missions) * sides
    per_claim = 1 - (1 - confidence) / claims if family_wise and claims else confidence
    return {"claims": claims, "sides": sides, "family_wise": family_wise, "per_claim_confidence": per_claim,
            "family_confidence": max(0.0, 1 - claims * (1 - per_claim))}


def parse_targets(values: list[str] | None, flag: str = "--target_miss_rate") -> dict | None:
    """`--target_miss_rate 0.05 BBU接地线检查=0.02` -> {"default": 0.05, "per_mission": {...}}; None if not given.
    A mission's own rate always wins over the default, in whatever order they are given."""
    if not values:
        return None
    default, per_mission = None, {}
    for value in values:
        if "=" in value:
            mission, rate = value.rsplit("=", 1)
            per_mission[mission.strip()] = check_rate(rate, f"{flag} for {mission.strip()}")
        elif default is None:
            default = check_rate(value, flag)
        else:
            raise OperatingPointError(f"{flag} takes one plain rate (the default) plus MISSION=RATE "
                                      f"overrides; got a second plain value {value!r}")
    return {"default": default, "per_mission": per_mission}


def _per_mission(targets: dict | None, missions: list[str], resolve, flag: str) -> dict[str, float | None]:
    """Each mission's target (its own, else the default; None without either); a target for a mission not scored
    here is an error, not ignored."""
    if targets is None:
        return {m: None for m in missions}
    own = {}
    for name, rate in targets["per_mission"].items():
        canonical = resolve(name) if resolve else name
        if canonical not in missions:
            raise OperatingPointError(f"{flag} names {name!r}, which is not among the missions scored "
                                      f"here ({', '.join(missions)})")
        own[canonical] = rate
    return {m: own.get(m, targets["default"]) for m in missions}


def build_operating_point(predictions: list[dict], missions: list[str], targets: dict, *, review_share: float,
                          model: dict, adapters: list[dict], data: dict | None, resolve=None,
                          confidence: float = DEFAULT_CONFIDENCE, overkill_targets: dict | None = None,
                          stage_a: dict | None = None, family_wise: bool = False) -> dict:
    """operating_point.json's content. `resolve` maps a mission name or alias in the targets to its canonical
    name (qc_core.missions). Only fair evidence enters it (fair_points_of); `stage_a` ({mission: {"models": [Stage-A
    identities], "evidence_through": latest reviewer decision time or None}}) names what the promise rests on;
    `family_wise` certifies each claim at the Bonferroni-adjusted confidence (family)."""
    confidence = check_confidence(confidence)
    fam = family(missions, 2 if overkill_targets else 1, confidence, family_wise)
    claim_confidence = fam["per_claim_confidence"]
    by_mission, left_out = fair_points_of(predictions)
    miss_targets = _per_mission(targets, missions, resolve, "--target_miss_rate")
    overkill = _per_mission(overkill_targets, missions, resolve, "--target_overkill_rate")
    missing_target = [m for m in missions if miss_targets[m] is None]
    if missing_target:
        raise OperatingPointError(f"no target miss rate for {', '.join(missing_target)}: give a default "
                                  f"(--target_miss_rate 0.05) or MISSION=RATE for each")
    evidence = EVIDENCE.get(str((data or {}).get("split")), "validation")
    entries = {}
    for mission in missions:
        points = by_mission.get(mission, [])
        target = miss_targets[mission]
        assert target is not None   # every mission without one was refused above
        entries[mission] = mission_point(points, target, review_share, claim_confidence,
                                         overkill[mission], evidence)
        entries[mission].update(automation(points, entries[mission]))
        if "promise" in entries[mission]:   # in the owner's words, now that the automation is known
            entries[mission]["promise"] = promise_text(entries[mission])
        entries[mission]["left_out"] = left_out.get(mission, {})
        entries[mission]["profile"] = profile_of([p for p in predictions if p["mission"] == mission])
        entries[mission]["stage_a"] = (stage_a or {}).get(mission)
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    auto = sum(entries[m]["validation_auto_decided"] for m in missions)
    certified = [m for m in missions if entries[m]["certified"]]
    overall = None
    if targets["default"] is not None:   # one bound over every mission's groups together: not a promise per mission
        overall = mission_point(pooled, targets["default"], review_share, claim_confidence,
                                (overkill_targets or {}).get("default"), evidence)
        overall["missions_certified"] = [len(certified), len(missions)]
    promised = len(certified) + sum(entries[m].get("overkill_certified", False) for m in missions
                                    if overkill_targets)
    fam["certified_claims"] = promised
    fam["certified_claims_hold_together"] = max(0.0, 1 - promised * (1 - claim_confidence))
    return {"format": OPERATING_POINT_FORMAT, "rule": RULE, "review_share": review_share, "confidence": confidence,
            "family": fam, "model": model, "adapters": adapters, "data": data, "missions": entries,
            "overall": overall, "evidence": evidence,
            "automation": {"validation_groups": len(pooled), "validation_auto_decided": auto,
                           "automation_share": auto / len(pooled) if pooled else None,
                           "automation_share_ci95": wilson(auto, len(pooled)),
                           "certified_missions": certified}}


JOINT_STATEMENT_AT = 0.5   # a joint confidence below this says nothing a QC owner could sign


def family_text(fam: dict, target_miss_rate: float | None = None) -> str:
    """The family statement in one sentence (report.md, monitor page): the promises' joint confidence (Bonferroni)
    when it is a statement (at least JOINT_STATEMENT_AT), else that there is none, and what --family_wise would take
    (its per-claim confidence and, at `target_miss_rate`, the defective groups per mission without a miss)."""
    n = fam.get("certified_claims", fam["claims"])
    if not n:
        return "no promise is certified"
    joint = fam.get("certified_claims_hold_together", fam.get("family_confidence"))
    how = (f"each certified at {pct(fam['per_claim_confidence'])} (--family_wise: the {fam['claims']} claims share "
           f"{pct(1 - (1 - fam['per_claim_confidence']) * fam['claims'])} by Bonferroni)" if fam["family_wise"] else
           f"each at {pct(fam['per_claim_confidence'])}")
    if joint is not None and joint >= JOINT_STATEMENT_AT:
        return (f"{n} certified promise{'s' if n != 1 else ''} ({how}) hold together with confidence at least "
                f"{pct(joint)} (Bonferroni)")
    per_claim, claims = fam["per_claim_confidence"], max(fam["claims"], 1)
    signed = 1 - (1 - per_claim) * claims if fam["family_wise"] else per_claim   # the confidence the owner asked for
    wanted = per_claim if fam["family_wise"] else 1 - (1 - signed) / claims
    needed = groups_needed(target_miss_rate, wanted) if target_miss_rate else None
    return (f"no joint statement: {n} certified promise{'s' if n != 1 else ''} ({how}) hold together with confidence "
            f"at least {pct(joint or 0.0)} (Bonferroni), which promises nothing together; each holds on its own. For "
            f"all to hold together at {pct(signed)}, --family_wise certifies each claim at {pct(wanted)}"
            + (f", which at a {pct(target_miss_rate)} miss-rate target needs {needed} defective groups per mission "
               f"without a miss" if needed else ""))


def _number_or_none(value, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OperatingPointError(f"{what} is {value!r}, not a number")
    return check_rate(value, what)


def load_operating_point(path) -> OperatingPoint:
    """An operating point file of this format, its types and ranges checked before anything loads."""
    path = Path(path)
    if not path.is_file():
        raise OperatingPointError(f"operating point file {path} does not exist; write one with python -m "
                                  f"stage_b.evaluate --target_miss_rate R, or pass --threshold T")
    try:
        op = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise OperatingPointError(f"cannot read operating point file {path}: {exc}") from None
    if isinstance(op, dict):   # checkpoint paths are stored relative to the file (qc_core.paths): named where it is now
        adapters = op.get("adapters")
        for c in [op.get("model"), *(adapters if isinstance(adapters, list) else [])]:
            if isinstance(c, dict) and isinstance(c.get("path"), str) and c["path"]:
                c["path"] = str(resolved(c["path"], path.parent))
    return OperatingPoint.from_json(op, path)


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
    if not point.certified and not point.overkill_certified:
        return
    try:
        confidence = check_confidence(point.confidence, f"{where}: confidence")
    except CertificationError as exc:
        raise OperatingPointError(f"{exc}; recompute the file") from None
    if point.certified:
        _check_miss_promise(point, confidence, where, evidence_groups)
    if point.overkill_certified:
        target = _number_or_none(point.target_overkill_rate, f"{where}: target_overkill_rate")
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
    target = _number_or_none(point.target_miss_rate, f"{where}: target_miss_rate")
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
        from scipy.stats import beta
        bound = 1.0 if n <= 0 or k >= n else float(beta.ppf(confidence, k + 1, n - k))
    else:
        bound = upper_bound(misses, n_fail, confidence)
    if bound > target + 1e-12:
        raise OperatingPointError(
            f"{where}: certified, but {misses} missed of {n_fail} defective groups bound the miss rate at "
            f"{pct(bound)} with {pct(confidence)} confidence, above its target {pct(target)} (at least "
            f"{groups_needed(target, confidence) or 'more than 10^9'} defective groups without a miss are needed): "
            f"the file was edited or forged; recompute it with python -m stage_b.evaluate")


def _check_counts_against_profile(point: MissionPoint, n_fail: int, where: str, evidence_groups: int | None) -> None:
    """A certified promise counts groups the file itself names: every group it counts has its p_fail in the entry's
    `profile` (profile_of: the evidence's p_fail values). More groups than that were never evidence (a forged count:
    `n_fail: 10^9, misses: 0`), and a certified entry without its profile cannot be checked: both refused."""
    profile = point.profile if evidence_groups is None else {"p_fail": [None] * evidence_groups}
    if not isinstance(profile, dict) or not isinstance(profile.get("p_fail"), list):
        raise OperatingPointError(f"{where}: certified without the profile of the groups it was certified on (their "
                                  f"p_fail values); recompute the file with python -m stage_b.evaluate")
    n_pass = point.n_pass if isinstance(point.n_pass, int) and not isinstance(point.n_pass, bool) else 0
    if n_fail + n_pass > len(profile["p_fail"]):
        raise OperatingPointError(f"{where}: certified on {n_fail} defective and {n_pass} good groups, but the file's "
                                  f"evidence names {len(profile['p_fail'])} (profile.p_fail): the counts were edited "
                                  f"or forged; recompute the file with python -m stage_b.evaluate")


def thresholds_for(op: OperatingPoint, path, missions: list[str], *, model: dict, adapters: list[dict],
                   fallback: float | None = None) -> dict[str, MissionPoint]:
    """{mission: decision point} for judging `missions` with this model (with `source` set).

    Refused: a file computed for another model or other adapters (compared by content fingerprint, so a moved
    folder is fine). A mission the file has no threshold for is judged all the same, every group to review:
    at `fallback` (--threshold) when given, else at the model's own choice; it never stops the other missions."""
    _check_same_checkpoints(op, path, model, adapters)
    out = {}
    for mission in missions:
        entry = op.missions.get(mission)
        if entry is not None and entry.threshold is not None:
            out[mission] = replace(entry, source=f"{path}")
            continue
        why = (entry.why_none or "no threshold") if entry is not None else \
            f"{path} has no entry for it (its missions: {', '.join(op.missions) or 'none'})"
        if fallback is not None:
            out[mission] = manual_point(fallback, f"{why}; --threshold {fallback} used")
        else:
            out[mission] = MissionPoint(threshold=None, threshold_fail=None, review_margin=0.0, certified=False,
                                        promise=f"no promise: {why}", why_none=why, source="none")
    return out


def _check_same_checkpoints(op: OperatingPoint, path, model: dict, adapters: list[dict]) -> None:
    """Refused: an operating point computed for another model or other adapters (by content fingerprint)."""
    problems = []
    if op.model.get("fingerprint") != model.get("fingerprint"):
        problems.append(f"it was computed for model {op.model.get('path')} and this is {model.get('path')}")
    theirs = [a.get("fingerprint") for a in op.adapters]
    if theirs != [a.get("fingerprint") for a in adapters]:
        problems.append(f"it was computed with adapters {[a.get('path') for a in op.adapters] or 'none'}"
                        f" and these are {[a.get('path') for a in adapters] or 'none'}")
    if problems:
        raise OperatingPointError(f"operating point {path} cannot be used: " + "; ".join(problems)
                                  + ". Recompute it for this model with python -m stage_b.evaluate "
                                    "--target_miss_rate R")


def manual_point(threshold: float, why: str = "a threshold given by hand (--threshold)") -> MissionPoint:
    """The decision point of `--threshold T`: a two-way verdict at T with no certified promise."""
    return MissionPoint(threshold=threshold, threshold_fail=threshold, review_margin=0.0, certified=False,
                        promise=f"no promise: {why}, not certified on validation groups", source="--threshold")
