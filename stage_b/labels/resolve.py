"""From the decisions log to labels, per group: each reviewer's latest decision counts (a later line replaces an earlier
one only when it continues its history); definite decisions that disagree are a conflict, labelling nothing; `unsure`
labels nothing; a decided group becomes a Stage-A record with its label and the review that decided it.

An adjudication (a log line with `adjudication`: {"reason"}, written only by the review app when a lead settles a
conflict; an export's line never becomes one) settles its group: the latest adjudication's decision is the label,
whatever the reviewers decided, and the group keeps it beside the reviewers' decisions (`adjudication`). It is not a
reviewer's decision: agreement and the reviewer table never count it. Look-alike spellings of a reviewer's name are
one reviewer (stage_b.labels.persons)."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict, cast

from qc_core.records import StageARecord, image_key, utc_now
from stage_b.contract.verdict import FAIL, FILE_LABELS, PASS
from stage_b.labels.decision_lines import FUTURE_SLACK, OLDEST, decided_at_time
from stage_b.labels.persons import ANONYMOUS, canonical_names
from stage_b.rules.routes import GROUP, REVIEW

# what a label keeps of a Stage-A source record: the record's own fields, nothing a file named as a source adds
LABEL_RECORD_FIELDS = ("group_id", "mission", "images", "per_image", "model", "created_at", "adapters", "input_dir",
                       "model_fingerprint")


def _order(d: dict) -> datetime:
    """A logged decision's time for ordering; a line logged before times were checked sorts first."""
    return decided_at_time(d.get("decided_at")) or OLDEST


def _continues(longer: list, shorter: list) -> bool:
    """Whether the page's history `longer` holds `shorter`'s last change before a change of its own: the page appends
    each change to a group's history (dropping the oldest past 100), so such a history was written after the other."""
    last = shorter[-1]
    at = [k for k, change in enumerate(longer) if change == last]
    return bool(at) and at[-1] < len(longer) - 1


def replaces(new: dict, old: dict) -> bool:
    """Whether one reviewer's decision `new` on a group replaces their decision `old`: by the page's own sequence
    first (a decision whose history continues the other's was made after it on that page, whatever either clock says:
    a clock set back, or one stamped ahead within the slack, cannot make a correction lose), else by decided_at, where
    times within FUTURE_SLACK of each other (a clock ahead of the other by minutes) go to the line logged later."""
    h_new, h_old = new.get("history") or [], old.get("history") or []
    if h_new and h_old and h_new != h_old:
        if _continues(h_new, h_old):
            return True
        if _continues(h_old, h_new):
            return False
    # two browsers' clocks: within the slack a clock may be ahead by, the line logged later (the correction) wins
    return _order(new) >= _order(old) - FUTURE_SLACK


def review_of(source_record: dict, decisions: list[dict], below: dict[str, dict] | None = None,
              census: dict[str, int] | None = None, adjudication: dict | None = None) -> dict:
    """The `review` record a label carries (stage_b.rules.routes): how the group reached a person, read from the verdict
    line the decision's source file holds (never from the export), when and by whom it was decided, and whether it
    may certify: not when the reviewers who gave the label are all below the agreement bar for its mission (`below`:
    stage_b.labels.agreement.quality's, for the mission) and no two of them agree on it. A Stage-A or prediction
    source, or a
    verdict line written before routes, has no route: not a fair sample. A group of a review band carries its band
    and `band_census`: whether every group of the band has a label (`census`: {band id: groups labelled})."""
    is_verdict = "p_fail" in source_record and "verdict" in source_record
    route = source_record.get("route") if is_verdict else None
    band = next((d["source"]["band"] for d in sorted(decisions, key=_order, reverse=True)
                 if isinstance(d.get("source", {}).get("band"), dict)), None)
    out = {"route": route, "review_scope": source_record.get("review_scope") if route else None,
           "audit_probability": source_record.get("audit_probability") if route else None,
           **({"band": band, "band_census": bool(census and census.get(band.get("id")) == band.get("groups"))}
              if band and route == REVIEW and source_record.get("review_scope") == GROUP else {}),
           "decided_at": max([d["decided_at"] for d in decisions]
                             + ([adjudication["decided_at"]] if adjudication else []), default=None),
           "reviewers": sorted({d["reviewer"] for d in decisions})}
    if adjudication:   # a lead settled a conflict, with a reason: two people at least stand behind the label
        out["adjudicated"] = {k: adjudication[k] for k in ("by", "decision", "reason", "decided_at")}
        return out
    definite = [d for d in decisions if d["decision"] in (PASS, FAIL)]
    weak = [d["reviewer"] for d in definite if (below or {}).get(d["reviewer"], {}).get("status") == "below the bar"]
    if definite and len(weak) == len(definite) and len(definite) < 2:
        out.update({"certifies": False, "quality": (below or {})[weak[0]]["why"]})
    return out


def stage_a_record(source_record: Mapping[str, Any], label: str, review: dict | None = None) -> StageARecord:
    """The group as a labelled Stage-A record, from a verdict line (summaries, images, input_dir) or a Stage-A
    record of the source file; `label` is PASS or FAIL, written as the file spells it (FILE_LABELS); `review`
    (review_of) says how it reached a reviewer."""
    if "per_image" in source_record:   # a Stage-A record: its known fields only (check_line validated it)
        record = {k: v for k, v in source_record.items() if k in LABEL_RECORD_FIELDS}
    else:
        record = {"group_id": source_record["group_id"], "mission": source_record["mission"],
                  "images": source_record["images"],
                  "per_image": {image_key(i): s for i, s in enumerate(source_record["summaries"], start=1)},
                  "model": ((source_record.get("rests_on") or {}).get("stage_a_model")
                            or "unknown (from a verdicts file)")}
        if source_record.get("input_dir"):
            record["input_dir"] = source_record["input_dir"]
        fingerprint = (source_record.get("rests_on") or {}).get("stage_a_fingerprint")
        if fingerprint:
            record["model_fingerprint"] = fingerprint
    out = cast(StageARecord, {**record, "label": FILE_LABELS[label],
                              "created_at": record.get("created_at") or utc_now()})   # every field a reader needs
    if review is not None:
        out["review"] = review
    return out


def decision_identity(d: dict) -> tuple:
    """A decision once in the log, whatever else its source file gained since (the group's own line digest, where the
    log has it; older lines name the whole file's)."""
    return (d["mission"], d["group_id"], d["reviewer"], d["decision"], d["note"], d["decided_at"],
            d["source"].get("line_sha256") or d["source"]["sha256"])


class Adjudication(TypedDict):
    """A lead's decision settling a conflict (module doc)."""
    by: str
    decision: str
    reason: str
    decided_at: str


class _DecisionGroup(TypedDict):
    status: str            # PASS or FAIL (the label), "unsure" (nothing definite) or "conflict" (definite, unequal)
    decisions: list[dict]  # each reviewer's latest decision line of the log
    record: dict           # the group's Stage-A record as the newest decision's source held it
    verdict: str | None    # the model's verdict as the page showed it (None where it showed none)
    route: str | None      # the verdict line's route (stage_b.rules.routes; None on a page without routes)


class DecisionGroup(_DecisionGroup, total=False):
    """One reviewed group, its reviewers' decisions resolved (resolve)."""
    adjudication: Adjudication   # the lead's, where one settled the group


def is_adjudication(d: dict) -> bool:
    """Whether a log line is a lead's adjudication (module doc) rather than a reviewer's decision."""
    return isinstance(d.get("adjudication"), dict)


def resolve(log: list[dict], gold: bool = False) -> dict[tuple, DecisionGroup]:
    """Per (mission, group id): its DecisionGroup (module doc). Known-answer checks (stage_b.labels.gold: a decision
    on a verdict line marked `gold`) are resolved apart (`gold=True`): a gold check measures its reviewer and never
    replaces or hides the group's label from the day it was reviewed."""
    latest: dict[tuple, dict[str, dict]] = {}
    settled: dict[tuple, dict] = {}
    person = canonical_names(log)   # look-alike spellings of a name are one reviewer (stage_b.labels.persons)
    for d in log:
        if bool((d.get("record") or {}).get("gold")) != gold:
            continue
        if is_adjudication(d):   # the latest in the log settles the group
            if d["decision"] in (PASS, FAIL):
                settled[(d["mission"], d["group_id"])] = {**d, "reviewer": person[d.get("reviewer") or ANONYMOUS]}
            continue
        mine = latest.setdefault((d["mission"], d["group_id"]), {})
        reviewer = person[d.get("reviewer") or ANONYMOUS]
        d = {**d, "reviewer": reviewer}
        old = mine.get(reviewer)
        if old is None or replaces(d, old):
            mine[reviewer] = d
    out: dict[tuple, DecisionGroup] = {}
    for key in [*latest, *(k for k in settled if k not in latest)]:
        by_reviewer = latest.get(key, {})
        definite = {d["decision"] for d in by_reviewer.values() if d["decision"] in (PASS, FAIL)}
        newest = max(by_reviewer.values(), key=_order) if by_reviewer else settled[key]
        status = "conflict" if len(definite) > 1 else definite.pop() if definite else "unsure"
        group: DecisionGroup = {"status": status, "decisions": list(by_reviewer.values()), "record": newest["record"],
                                "verdict": newest.get("verdict"), "route": newest.get("route")}
        if key in settled:
            a = settled[key]
            group["status"] = a["decision"]
            group["adjudication"] = {"by": a["reviewer"], "decision": a["decision"],
                                     "reason": str(a["adjudication"].get("reason") or ""),
                                     "decided_at": a["decided_at"]}
        out[key] = group
    return out


def summary(groups: Mapping[tuple, DecisionGroup]) -> dict[str, dict]:
    """Per mission, over every decision in the log: decided, agreed with the model's verdict line, its misses and
    overkills on the labelled groups; and split by route, because they measure different things: `reviewed` (groups
    the rule sent to a person: chosen by their score, so their rates describe the review band, not the work decided
    without review) and `audited` (blind audits of automatically decided groups: `escapes`, auto-passed groups a
    reviewer failed, are what stage_b.monitoring.monitor bounds)."""
    out: dict[str, dict] = {}
    for (mission, gid), g in sorted(groups.items()):
        if g["record"].get("gold"):   # a known-answer check: scored apart (stage_b.labels.agreement.gold_scores)
            continue
        s = out.setdefault(mission, {"decided": 0, "labelled": 0, "agreed": 0, "fail": 0, "missed": 0, "pass": 0,
                                     "overkilled": 0, "unsure": 0, "conflicts": 0, "conflict_groups": [],
                                     "no_verdict": 0,
                                     "reviewed": {"labelled": 0, "agreed": 0, "fail": 0, "missed": 0, "pass": 0,
                                                  "overkilled": 0},
                                     "audited": {"labelled": 0, "auto_passed": 0, "escapes": 0, "auto_failed": 0,
                                                 "overkills": 0}})
        s["decided"] += 1
        if g["status"] == "conflict":   # the count and the list printed beside it are this one set
            s["conflicts"] += 1
            s["conflict_groups"].append(gid)
            continue
        if g["status"] == "unsure":
            s["unsure"] += 1
            continue
        s["labelled"] += 1
        decided = g["status"]
        s["agreed"] += g["verdict"] == decided
        if decided == FAIL:
            s["fail"] += 1
            s["missed"] += g["verdict"] == PASS
        else:
            s["pass"] += 1
            s["overkilled"] += g["verdict"] == FAIL
        if g.get("route") == "audit":
            a = s["audited"]
            a["labelled"] += 1
            a["auto_passed"] += g["verdict"] == PASS
            a["escapes"] += g["verdict"] == PASS and decided == FAIL
            a["auto_failed"] += g["verdict"] == FAIL
            a["overkills"] += g["verdict"] == FAIL and decided == PASS
        elif g["verdict"] not in (PASS, FAIL):   # a Stage-A audit or a page without a model's verdict: nothing to agree
            s["no_verdict"] += 1
        else:
            r = s["reviewed"]
            r["labelled"] += 1
            r["agreed"] += g["verdict"] == decided
            r["fail" if decided == FAIL else "pass"] += 1
            r["missed"] += decided == FAIL and g["verdict"] == PASS
            r["overkilled"] += decided == PASS and g["verdict"] == FAIL
    for s in out.values():
        s["miss_rate"] = s["missed"] / s["fail"] if s["fail"] else None
        s["overkill_rate"] = s["overkilled"] / s["pass"] if s["pass"] else None
    return out

