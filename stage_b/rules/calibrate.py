"""Calibration: from a model's validation (or held-out) predictions to the operating point record a QC owner signs.
Per mission the certified thresholds at the targets (stage_b.stats.thresholds, the rule stage_b.rules.operating_point
states), the review margin, the escape rate of auto-passed groups the live monitor holds work to, the p_fail profile
its drift test compares with, and the family-wise statement; the targets as the flags give them."""
from __future__ import annotations

import bisect
from typing import TypedDict

from stage_b.contract.verdict import FAIL, PASS
from stage_b.rules.operating_point import EVIDENCE, RULE, MissionPoint, OperatingPoint, decision_point
from stage_b.rules.point_check import OperatingPointError, check_promise, check_rate
from stage_b.rules.promise_texts import overkill_promise_text, promise_text
from stage_b.stats.certify import (
    DEFAULT_CONFIDENCE,
    check_confidence,
    effective_counts,
    groups_needed,
    upper_bound,
    upper_bound_weighted,
)
from stage_b.stats.metrics import PredictionRows, wilson
from stage_b.stats.thresholds import (
    bound_below,
    certified_fail_threshold,
    certified_threshold,
    family,
    pairs,
    pick_threshold,
    rates_at,
    review_margin,
    verdict_at,
    weight,
    weighted_below,
)


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
    fails, fail_weights, fail_running = weighted_below(points, FAIL)
    entry["miss_rate_upper"] = bound_below(fails, fail_weights, fail_running, threshold, confidence)
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
    passes, pass_weights, pass_running = weighted_below(points, PASS)
    entry.update({"auto_overkills": auto_overkills,
                  "overkill_rate_upper": (bound_below(passes, pass_weights, pass_running, threshold_fail, confidence,
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
    same quantity."""
    point = decision_point(entry, certified=True)
    passed = [pt for pt in points if (d := point.decide(pt[0])).automatic and d.verdict == PASS]
    weights = [weight(pt) for pt in passed]
    escapes = [weight(pt) for pt in passed if pt[1] == FAIL]
    total = sum(weights)
    return {"auto_passed": len(passed), "escapes": len(escapes), "rate": sum(escapes) / total if total else None,
            "upper": upper_bound_weighted(escapes, weights, confidence) if passed else 1.0}


def automation(points, entry: dict) -> dict:
    """How many of these groups the rule decides without review, with a 95% Wilson interval of the share."""
    point = decision_point(entry, entry["certified"])
    auto = sum(point.decide(p).automatic for p, _ in pairs(points))
    return {"validation_auto_decided": auto, "automation_share": auto / len(points) if points else None,
            "automation_share_ci95": wilson(auto, len(points))}


def points_of(predictions: PredictionRows) -> dict[str, list[tuple[float, str]]]:
    """(p_fail, expected) per mission from predictions that have a p_fail (groups not judged have none)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for p in predictions:
        if p.get("p_fail") is not None:
            out.setdefault(p["mission"], []).append((p["p_fail"], p["expected"]))
    return out


def fair_points_of(predictions: PredictionRows) -> tuple[dict[str, list[tuple]], dict[str, dict[str, int]]]:
    """({mission: [(p_fail, expected, weight)]}, {mission: {why left out: groups}}): the predictions a promise's bound
    may count (stage_b.rules.routes: fair evidence, weighted by 1 / the probability it was reviewed) and those it may
    not. A prediction without `evidence` (the validation split, every group of it labelled) counts with weight 1."""
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


def profile_of(predictions: PredictionRows) -> dict:
    """What the monitor's drift check compares live work with (stage_b.monitoring.monitor): the validation groups'
    p_fail values and how many groups have a summary that shows a defect (stage_b.contract.grounding)."""
    p_fails = sorted(round(p["p_fail"], 9) for p in predictions if p.get("p_fail") is not None)
    defect = sum(bool((p.get("grounding") or {}).get("defect_photos")) for p in predictions)
    return {"p_fail": p_fails, "defect_groups": defect, "groups": len(predictions)}


class Targets(TypedDict):
    """Target rates as the flags give them: a default and each mission's own (which always wins)."""
    default: float | None
    per_mission: dict[str, float]


def parse_targets(values: list[str] | None, flag: str = "--target_miss_rate") -> Targets | None:
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


def _per_mission(targets: Targets | None, missions: list[str], resolve, flag: str) -> dict[str, float | None]:
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


def build_operating_point(predictions: PredictionRows, missions: list[str], targets: Targets, *, review_share: float,
                          model: dict, adapters: list[dict], data: dict | None, resolve=None,
                          confidence: float = DEFAULT_CONFIDENCE, overkill_targets: Targets | None = None,
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
    points = {}
    for mission in missions:
        target = miss_targets[mission]
        assert target is not None   # every mission without one was refused above
        points[mission] = _mission_record(by_mission.get(mission, []), target, review_share, claim_confidence,
                                          overkill[mission], evidence, left_out.get(mission, {}),
                                          [p for p in predictions if p["mission"] == mission],
                                          (stage_a or {}).get(mission))
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    auto = sum(points[m].extra["validation_auto_decided"] for m in missions)
    certified = [m for m in missions if points[m].certified]
    overall = None
    if targets["default"] is not None:   # one bound over every mission's groups together: not a promise per mission
        overall = MissionPoint.of({**mission_point(pooled, targets["default"], review_share, claim_confidence,
                                                   overkill_targets["default"] if overkill_targets else None,
                                                   evidence),
                                   "missions_certified": [len(certified), len(missions)]})
    promised = len(certified) + sum(points[m].overkill_certified for m in missions if overkill_targets)
    fam["certified_claims"] = promised
    fam["certified_claims_hold_together"] = max(0.0, 1 - promised * (1 - claim_confidence))
    op = OperatingPoint(model=model, adapters=adapters, missions=points, rule=RULE, review_share=review_share,
                        confidence=confidence, family=fam, data=data, overall=overall, evidence=evidence,
                        automation={"validation_groups": len(pooled), "validation_auto_decided": auto,
                                    "automation_share": auto / len(pooled) if pooled else None,
                                    "automation_share_ci95": wilson(auto, len(pooled)),
                                    "certified_missions": certified},
                        keys=_CONTENT_KEYS)
    _check_promises(op, "the operating point just computed")
    return op.to_json()


# operating_point.json's keys in the order the file has always held them
_CONTENT_KEYS = ("format", "rule", "review_share", "confidence", "family", "model", "adapters", "data", "missions",
                 "overall", "evidence", "automation")


def _mission_record(points, target: float, share: float, confidence: float, target_overkill: float | None,
                    evidence: str, left_out: dict[str, int], predictions: PredictionRows, stage_a: dict | None
                    ) -> MissionPoint:
    """A mission's entry of operating_point.json as the typed point: mission_point's certified numbers, then how
    many of its groups the rule decides without review, the promise in the owner's words now that the automation is
    known, the evidence left out, the profile the drift check compares with and the Stage-A models it rests on."""
    entry = mission_point(points, target, share, confidence, target_overkill, evidence)
    entry = {**entry, **automation(points, entry)}
    return MissionPoint.of({**entry, "promise": promise_text(entry), "left_out": left_out,
                            "profile": profile_of(predictions), "stage_a": stage_a})


def _check_promises(op: OperatingPoint, where: str) -> None:
    """The judge's checks of the promises (check_promise: each follows from its own counts, the pooled one from the
    groups the missions name) on the point just computed: a computed file the reader would refuse stops the
    evaluation, never reaches a judge. Types and confidences hold by construction here."""
    for mission, point in op.missions.items():
        check_promise(point, f"{where}: {mission}")
    if op.overall is not None:
        named = sum(len((m.profile or {}).get("p_fail") or []) for m in op.missions.values())
        check_promise(op.overall, f"{where}: overall", evidence_groups=named)
