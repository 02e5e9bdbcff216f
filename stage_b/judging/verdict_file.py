"""A verdict file, <output_dir>/<mission>_verdicts.jsonl: what one line records (verdict_record), what a line rests on,
and the check a file passes before a judge resumes it (each line's decision recomputed and compared: a line edited by
hand, or a file mixed with another run's, is refused)."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TypedDict

from qc_core.jsonl import OUTPUT_REMEDY, iter_jsonl, write_jsonl_atomic
from qc_core.records import StageARecord, summaries_of, utc_now
from stage_b.contract.grounding import ground
from stage_b.contract.numbers import fmt_p
from stage_b.contract.verdict import parse
from stage_b.data.settings import TEXT_MODE
from stage_b.judging.settings import JudgeError
from stage_b.labels.assign import assignees
from stage_b.rules.operating_point import UNCALIBRATED_THRESHOLD, MissionPoint
from stage_b.rules.routes import AUDIT, REVIEW, route_of
from stage_b.stats.thresholds import verdict_at

# the known-answer group's expected label, where the line is a gold group (stage_b.labels.gold)
Gold = TypedDict("Gold", {"label": str, "from": str | None})


class Inspection(TypedDict):
    state: str   # normal, tightened, withdrawn, unmonitored (stage_b.monitoring.inspection)
    why: str


class VerdictFields(TypedDict):
    """What every verdict line holds (VerdictLine adds what some lines hold)."""
    group_id: str
    mission: str
    verdict: str                     # 通过 or 不通过, from p_fail at the mission's thresholds (MissionPoint.decide)
    p_fail: float
    threshold: float | None
    threshold_fail: float | None
    review_margin: float
    certified: bool
    promise: str
    reason: str
    needs_review: bool
    review_why: list[str]
    route: str                       # auto, audit or review (stage_b.rules.routes)
    review_scope: str | None
    audit_probability: float | None
    assigned_to: list[str]
    reply: str
    label: str | None                # a reviewer label the Stage-A record carried (copied, never used)
    summaries: list[str]
    images: list[str]
    input_dir: str | None
    rests_on: dict
    created_at: str


class Provenance(TypedDict):
    """How a verdict file's lines were made, the same on every line (stage_b.judging.judge.provenance_of writes it,
    verdict_record copies it into each line): a resume must agree on PROVENANCE's keys. `threshold` is the mission's
    auto-pass threshold, the same value the line's decision fields hold (VerdictFields), so a resume compares it too."""
    model: str
    adapters: list[str]
    fingerprints: dict | None
    operating_point: str | None
    threshold: float | None
    mode: str
    allow_uncertified: bool
    reason_citations: str
    audit_share: float
    inspection: Inspection
    audit_seed: int | None
    withdrawn: str | None
    reviewers: list[str] | None
    overlap_share: float | None
    gold_share: float | None
    unmonitored: str | None
    no_monitor: str | None
    unaccepted: str | None
    accepted_weaker: str | None


class VerdictLine(VerdictFields, Provenance, total=False):
    """One line of <mission>_verdicts.jsonl, as verdict_record writes it and the review page, the import of decisions
    and the monitor read it: the decision fields (VerdictFields), the judging run's provenance (Provenance, the same on
    every line of a file; a line written before a key existed lacks it) and, on a gold group's line only, `gold`."""
    gold: Gold


class _GoldKey(TypedDict, total=False):
    gold: Gold   # only a gold group's line has it


# a resumed file must agree on these (a record that predates a key holds its default)
PROVENANCE = {"fingerprints": None, "operating_point": None, "threshold": None, "mode": TEXT_MODE,
              "allow_uncertified": False, "reason_citations": "free", "audit_share": 0.0, "audit_seed": None,
              "withdrawn": None, "reviewers": None, "overlap_share": None, "gold_share": None, "unmonitored": None,
              "no_monitor": None, "unaccepted": None, "accepted_weaker": None}
# what a verdict line's decision is, recomputed on resume and compared (a line edited by hand is refused)
RECOMPUTED_FIELDS = ("verdict", "threshold", "threshold_fail", "review_margin", "certified", "promise", "needs_review",
                   "review_why", "route", "review_scope", "audit_probability", "assigned_to", "gold")


def verdicts_path(output_dir: Path, mission: str) -> Path:
    return output_dir / f"{mission}_verdicts.jsonl"


def errors_path(output_dir: Path, mission: str) -> Path:
    return output_dir / f"{mission}_verdicts.errors.jsonl"


def verdict_record(record: StageARecord, p: float, point: MissionPoint, completion: str, provenance: Provenance,
                   allow_uncertified: bool = False) -> VerdictLine:
    """One line of <mission>_verdicts.jsonl (VerdictLine). Pure: everything the verdict depends on is an argument.
    `point` is the mission's decision point (stage_b.rules.operating_point.thresholds_for or manual_point);
    `provenance` carries the audit share and seed and the mission's withdrawal, if any (stage_b.rules.routes decides
    the route)."""
    decision = point.decide(p, allow_uncertified)
    parsed = parse(completion)
    summaries = summaries_of(record)
    mission_why = ([f"promise withdrawn: {provenance['withdrawn']}"] if provenance.get("withdrawn") else []) \
        + ([f"promise not monitored: {provenance['unmonitored']}"] if provenance.get("unmonitored") else []) \
        + ([f"weaker promise not accepted: {provenance['unaccepted']}"] if provenance.get("unaccepted") else []) \
        + list(decision.mission_why)
    group_why = list(decision.group_why)
    if not parsed.two_lines or parsed.verdict != decision.verdict:
        group_why.append("the reply is not the two-line contract (verdict, then 理由: …)")
    else:
        group_why += ground(completion, summaries, record["mission"]).review_why()
    route = route_of(mission_why, group_why, provenance.get("audit_share") or 0.0, provenance.get("audit_seed") or 0,
                     record["mission"], record["group_id"], gold="gold_label" in record)
    assigned = assignees(provenance.get("reviewers") or [], provenance.get("overlap_share") or 0.0,
                         provenance.get("audit_seed") or 0, record["mission"], record["group_id"]) \
        if route["route"] in (REVIEW, AUDIT) else []
    # two_lines holds only with a reason (parse): the None check says so to mypy
    reason = parsed.reason if parsed.two_lines and parsed.reason is not None else \
        completion.partition("\n")[2].strip()
    certified = point.certified
    promise = point.promise
    if not certified and allow_uncertified and point.threshold is not None:
        promise = f"NOT CERTIFIED, decided under --allow_uncertified: {promise}"
    gold: _GoldKey = {"gold": {"label": record["gold_label"], "from": record.get("gold_from")}} \
        if "gold_label" in record else {}
    line: VerdictLine = {
            "group_id": record["group_id"], "mission": record["mission"], "verdict": decision.verdict, "p_fail": p,
            "threshold": point.threshold, "threshold_fail": point.threshold_fail,
            "review_margin": point.review_margin, "certified": certified, "promise": promise,
            "reason": reason, "needs_review": route["route"] == REVIEW, "review_why": route["why"],
            "route": route["route"], "review_scope": route["review_scope"],
            "audit_probability": route["audit_probability"], "assigned_to": assigned, "reply": completion,
            "label": record.get("label"), "summaries": summaries, "images": record["images"],
            "input_dir": record.get("input_dir"), "rests_on": rests_on(record), **provenance, **gold,
            "created_at": utc_now()}
    return line   # its keys: VerdictLine (tests/test_verdict_files.py holds them)


def rests_on(record: StageARecord) -> dict:
    """What a verdict rests on: a digest of the group's Stage-A summaries and photo list, and the Stage-A model. A
    rerun judges a group again when its record no longer matches."""
    text = json.dumps({"summaries": summaries_of(record), "images": record["images"]}, ensure_ascii=False,
                      sort_keys=True)
    return {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()[:32], "stage_a_model": record.get("model"),
            "stage_a_fingerprint": record.get("model_fingerprint")}


def _line_problem(rec: dict, mission: str, records: dict[str, StageARecord], seen: dict[str, int]) -> str | None:
    """Why a verdict line cannot be kept as it is (edited by hand, or from another file), or None."""
    gid = rec.get("group_id")
    if not isinstance(gid, str) or not gid:
        return "no group_id"
    if rec.get("mission") != mission:
        return f"a verdict of mission {rec.get('mission')!r} in {mission}'s file"
    if gid in seen:
        return f"group {gid} is already judged at line {seen[gid]} (a duplicated line)"
    if gid not in records:
        return f"group {gid} is not among the Stage-A groups being judged (a line from another file or day?)"
    p, threshold = rec.get("p_fail"), rec.get("threshold")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 or math.isnan(p):
        return f"p_fail {p!r} is not a probability"
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        return f"threshold {threshold!r} is not a number"
    expected = verdict_at(p, UNCALIBRATED_THRESHOLD if threshold is None else threshold)
    if rec.get("verdict") != expected:
        return (f"verdict {rec.get('verdict')!r} does not follow from p_fail {fmt_p(p, threshold)} and threshold "
                f"{fmt_p(threshold, p)} (it would be {expected})")
    return None


def _decision_problem(rec: dict, expected: dict) -> str | None:
    """Which of a kept line's decision fields differ from what the rule gives for its own p_fail and reply."""
    differs = [k for k in RECOMPUTED_FIELDS if rec.get(k) != expected.get(k)]
    if not differs:
        return None
    return ("its " + ", ".join(f"{k} {rec.get(k)!r}" for k in differs[:3]) + " do not follow from its p_fail "
            f"{rec.get('p_fail')!r}, reply and this run's operating point and audit (they would be "
            + ", ".join(f"{expected.get(k)!r}" for k in differs[:3]) + ")")


def check_resumable(path: Path, provenance: Provenance, mission: str, records: dict[str, StageARecord],
                    recompute=None) -> tuple[set[str], list[str]]:
    """(group ids already judged whose verdict still rests on their Stage-A record, group ids to judge again because
    their record changed since), after checking the file line by line: written with the same model, adapters and
    operating point (a file mixing two would hold verdicts no one threshold explains), and every line whole and
    consistent (_line_problem). Lines of groups to judge again are removed from the file (rewritten all at once)."""
    if not path.exists():
        return set(), []
    kept, stale = [], []
    seen: dict[str, int] = {}   # group id: the line that judged it
    for line_no, rec in iter_jsonl(path, remedy=OUTPUT_REMEDY):
        differs = [k for k, default in PROVENANCE.items() if rec.get(k, default) != provenance.get(k, default)]
        if differs:
            raise JudgeError(f"{path}:{line_no} was judged with another {', '.join(differs)} "
                             f"({', '.join(f'{k}={rec.get(k)!r}' for k in differs)}); pass --overwrite to judge "
                             f"everything again, or choose another --output_dir")
        problem = _line_problem(rec, mission, records, seen)
        current = problem is None and \
            (rec.get("rests_on") or {}).get("sha256") == rests_on(records[rec["group_id"]])["sha256"]
        if current and recompute is not None:   # a stale line is judged again anyway
            problem = _decision_problem(rec, recompute(records[rec["group_id"]], rec))
        if problem:
            raise JudgeError(f"{path}:{line_no}: {problem}. The file was changed by hand or mixed with another: "
                             f"restore it, delete that line (its group is judged again), or pass --overwrite")
        seen[rec["group_id"]] = line_no
        if not current:
            stale.append(rec["group_id"])
        else:
            kept.append(rec)
    if stale:
        write_jsonl_atomic(path, kept)
    return {r["group_id"] for r in kept}, stale
