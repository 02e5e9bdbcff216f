"""The days the monitor reads: the day folders under a parent judged at one operating point (their verdict files, each
line checked), in the order they were judged, and the reviewers' labels (confirmed escapes apart from those still
waiting for a second person); per day and mission the counts the bounds and detectors take (day_counts)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlError, iter_jsonl
from stage_a.discovery import printable_path, undecodable
from stage_b.contract.grounding import defect_photos
from stage_b.contract.verdict import FAIL, PASS
from stage_b.labels.agreement import DEFAULT_MIN_GOLD_ACCURACY
from stage_b.rules.routes import AUDIT, REVIEW, route_of_record
from stage_b.rules.point_identity import PointKeys
from stage_b.labels.decisions_log import LOG, DecisionsLogError, head, read_log
from stage_b.labels.resolve import resolve
from stage_b.labels.reviewer_quality import bar_of, confirmers, reviewer_table, unconfirmed_fails
from stage_b.rules.workload import day_workload, measured_pace

VERDICTS_SUFFIX = "_verdicts.jsonl"
NOT_DECIDED = "not decided yet"   # an audited group no reviewer has decided (conflict and unsure: resolve's statuses)


class MonitorError(UserError):
    """Days, labels or a monitor.json that cannot be used (names the file, day or mission and what to do)."""


# --------------------------------------------------------------------------------------------------------------
# Reading days and labels
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Day:
    name: str
    folder: Path
    verdicts: dict[str, list[dict]] = field(default_factory=dict)   # mission -> verdict lines


def verdict_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{VERDICTS_SUFFIX}"))


def operating_points_of(folder: Path) -> set:
    """The operating point digests a day folder's verdict lines name."""
    digests = set()
    for path in verdict_files(folder):
        try:
            for _, rec in iter_jsonl(path):
                digests.add(rec.get("operating_point"))
        except JsonlError as exc:
            raise MonitorError(f"{exc}: a verdict file the judge did not finish or that was edited; rerun the judge "
                               f"on that day (it resumes and repairs a torn last line)") from None
    return digests


def read_days(folders: list[Path], point: PointKeys | None, registry) -> list[Day]:
    """The days, each checked: the folder exists, holds verdict files, and every line names this operating point."""
    days: list[Day] = []
    seen: dict = {}
    given: dict = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise MonitorError(f"day folder {printable_path(str(folder))} does not exist: give the folders the judge "
                               f"wrote (--output_dir of group-qc judge), or --days_under their parent")
        if undecodable(folder.name):   # the day's name goes into monitor.json, its page and every message
            raise MonitorError(f"day folder {printable_path(str(folder))} is not named in UTF-8 (a name made on a GBK "
                               f"or other system): rename it, e.g. to its date (2026-11-27), and run again")
        real = folder.resolve()   # a symlink or a second spelling of a folder is the same day
        if real in given:
            raise MonitorError(f"day folder {folder} is {given[real]} given again (the same folder): a day counts "
                               f"once; give each day folder once")
        given[real] = str(folder)
        files = verdict_files(folder)
        if not files:
            raise MonitorError(f"day folder {folder} holds no *{VERDICTS_SUFFIX}: is it a judge's output folder?")
        other = {d for d in operating_points_of(folder) if not (point.names(d) if point else d is None)}
        if other:
            raise MonitorError(f"day folder {folder} was judged at another operating point ("
                               f"{', '.join(str(d)[:18] for d in sorted(other, key=str))}…, "
                               f"this one {point.identity[:18] if point else None}…):"
                               f" live evidence of two rules is never mixed; monitor each operating point's days "
                               f"separately, or use --days_under to take only this one's")
        day = Day(folder.name, folder)
        for path in files:
            for line_no, rec in iter_jsonl(path):
                if rec.get("gold"):   # a known-answer check (stage_b.labels.gold), not the day's work
                    continue
                problem = verdict_line_problem(rec)
                if problem:   # fails closed: a line the guard cannot read stops it, named
                    raise MonitorError(f"{path}:{line_no}: {problem}: not a line the judge wrote; rerun the judge on "
                                       f"that day with --overwrite, or restore the file")
                key = (rec.get("mission"), rec.get("group_id"))
                if key in seen:   # a work order judged again on a later day counts on the first
                    continue
                seen[key] = day.name
                try:
                    mission = registry.resolve(rec["mission"]).name
                except Exception:   # noqa: BLE001 - a mission the registry no longer knows: named, not counted
                    print(f"note: {path}: mission {rec.get('mission')!r} is not in the registry; not monitored",
                          file=sys.stderr)
                    continue
                day.verdicts.setdefault(mission, []).append(rec)
        days.append(day)
    check_order(days)
    return days


def first_judged(day: Day) -> str | None:
    """When the day's first verdict line was written (created_at, UTC ISO text), if its lines say."""
    times = [v["created_at"] for lines in day.verdicts.values() for v in lines if isinstance(v.get("created_at"), str)]
    return min(times) if times else None


def check_order(days: list[Day]) -> None:
    """Days in the order they were judged: the detectors and the tightened share read them in order, so a day given
    before one judged earlier is refused, naming both (a resumed day may run late; only its first line counts)."""
    previous = None
    for day in days:
        first = first_judged(day)
        if first is None:
            continue
        if previous is not None and first < previous[1]:
            raise MonitorError(f"days out of order: {day.folder} was first judged at {first}, before {previous[0]} "
                               f"({previous[1]}), which is given before it; give the day folders in the order they "
                               f"were judged (--days_under takes them by name: name them by date)")
        previous = (day.folder, first)


def days_workload(days: list[Day], labels_dir: Path) -> dict:
    """{day: stage_b.rules.workload.day_workload} over each day folder's verdict lines as the judge wrote them (gold
    included: it is work for people), priced at the pace the labels' decisions log measured (or the stated default).
    What the page shows; nothing the guard decides reads it."""
    log, _ = read_log(labels_dir / LOG) if (labels_dir / LOG).is_file() else ([], "")
    pace = measured_pace(log)
    return {day.name: day_workload([rec for path in verdict_files(day.folder) for _, rec in iter_jsonl(path)], pace)
            for day in days}


def verdict_line_problem(rec: dict) -> str | None:
    """What a verdict line lacks that the guard reads (its group, verdict, p_fail, route, audit share), or None."""
    if not isinstance(rec.get("group_id"), str) or not isinstance(rec.get("mission"), str):
        return "no group_id or mission"
    if rec.get("verdict") not in (PASS, FAIL):
        return f"verdict {rec.get('verdict')!r} is neither {PASS} nor {FAIL}"
    p = rec.get("p_fail")
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        return f"p_fail {p!r} is not a probability"
    if "route" in rec and rec["route"] not in ("auto", "review", "audit"):
        return f"route {rec['route']!r} is not auto, review or audit"
    return None


def days_under(parent: Path, point: PointKeys) -> list[Path]:
    """Every subfolder of `parent` judged at this operating point (named by its identity, or by the file's sha256 in
    lines written before identities), by name; the others are named and skipped."""
    if not Path(parent).is_dir():
        raise MonitorError(f"--days_under {parent} does not exist")
    chosen = []
    for folder in sorted(p for p in Path(parent).iterdir() if p.is_dir() and verdict_files(p)):
        digests = operating_points_of(folder)
        other = {d for d in digests if not point.names(d)}
        if not other:
            chosen.append(folder)
        elif len(other) < len(digests):   # fails closed: skipping it would drop this operating point's evidence too
            raise MonitorError(f"day folder {folder} holds verdicts of this operating point and of another "
                               f"({', '.join(str(d)[:18] for d in sorted(other, key=str))}…): a day "
                               f"is judged at one operating point; judge the other's groups into their own folder")
        else:
            print(f"note: {folder} was judged at another operating point: not monitored with this one",
                  file=sys.stderr)
    if not chosen:
        raise MonitorError(f"no day under {parent} was judged at this operating point")
    return chosen


class Labels(dict):
    """{(mission, group id): PASS | FAIL (the label)}, and beside it `decided_at`: {key: the latest decision time
    behind the label} (when the evidence a label gives existed) and `unconfirmed`: {key: reviewer} for each FAIL that
    one reviewer alone gave and nobody confirmed (stage_b.labels.reviewer_quality.unconfirmed_fails), and `disputed`:
    {key: "conflict" | "unsure"} for each group reviewers decided without a label (an audit in dispute is listed on its
    day, never dropped)."""

    def __init__(self, statuses=(), decided_at: dict | None = None, unconfirmed: dict | None = None,
                 head: dict | None = None, disputed: dict | None = None):
        super().__init__(statuses)
        self.decided_at = dict(decided_at or {})
        self.unconfirmed = dict(unconfirmed or {})
        self.disputed = dict(disputed or {})
        self.head = head   # the decisions log's head as read (stage_b.labels.decisions_log.head)


def seen_heads(labels_dir: Path, monitors=(), records=()) -> list[dict]:
    """The heads of the decisions log that earlier readers recorded: a monitor.json built from this labels folder
    (`monitors`: their content) and withdrawal records made from it (`records`); the log is checked against each
    (stage_b.labels.decisions_log: a log cut after a monitor read it is refused)."""
    here = Path(labels_dir).resolve()
    out = []
    for item in [*monitors, *records]:
        folder, h = item.get("labels"), item.get("labels_head")
        if isinstance(h, dict) and isinstance(folder, str) and folder and Path(folder).resolve() == here:
            out.append(h)
    return out


def read_labels(labels_dir: Path, registry, min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY,
                seen=()) -> Labels:
    """{(mission, group id): PASS | FAIL} from the decisions log stage_b.labels.decisions keeps (reviewers' latest
    decisions; conflicts and unsure label nothing), with each label's decision time and the fails nobody confirmed:
    neither a second reviewer nor the one who gave it, measured on the whole log against the bar 1 -
    `min_gold_accuracy` (Labels; stage_b.labels.reviewer_quality)."""
    log_path = Path(labels_dir) / LOG
    if not Path(labels_dir).is_dir():
        raise MonitorError(f"labels folder {labels_dir} does not exist: give the --output_dir of group-qc "
                           f"decisions (an empty folder if nothing is decided yet)")
    try:
        log, chain = read_log(log_path, seen)   # chain and heads checked: an edited or cut log moves no bound
    except (JsonlError, DecisionsLogError) as exc:
        raise MonitorError(f"{exc} (the decisions log is damaged: the monitor cannot vouch for any promise)") from None
    resolved = resolve(log)
    groups = {key: g for key, g in resolved.items() if g["status"] in (PASS, FAIL)}
    trusted = confirmers(reviewer_table(resolve(log, gold=True), log, bar_of(min_gold_accuracy)))
    return Labels({key: g["status"] for key, g in groups.items()},
                  {key: max([d["decided_at"] for d in g["decisions"]]
                            + ([g["adjudication"]["decided_at"]] if "adjudication" in g else []))
                   for key, g in groups.items()},
                  unconfirmed_fails(groups, trusted), head(log, chain),
                  {key: g["status"] for key, g in resolved.items() if g["status"] not in (PASS, FAIL)})


# --------------------------------------------------------------------------------------------------------------
# Building monitor.json
# --------------------------------------------------------------------------------------------------------------
def day_counts(name: str, verdicts: list[dict], labels: dict, mission: str) -> dict:
    """One mission's day as counts: judged, automation, audits, escapes, the defects the miss rate's evidence counts,
    reviewer agreement (module doc; stage_b.monitoring.inspection reads them)."""
    routes = [route_of_record(v) for v in verdicts]
    unconfirmed = getattr(labels, "unconfirmed", {})
    label = [labels.get((mission, v["group_id"])) for v in verdicts]
    audited = [(v, lab) for v, r, lab in zip(verdicts, routes, label) if r == AUDIT]
    # an escape one reviewer alone found waits for a second person (or a measured one): it moves no bound yet
    waiting = [{"group_id": v["group_id"], "reviewer": unconfirmed[(mission, v["group_id"])]} for v, lab in audited
               if v["verdict"] == PASS and lab == FAIL and (mission, v["group_id"]) in unconfirmed]
    pending = {w["group_id"] for w in waiting}
    # an audited auto-passed group without a label is listed with why: in dispute (conflict, unsure: it keeps the
    # promise unverified while open) or not decided yet; the day's escapes count it once it is settled as one
    disputed = getattr(labels, "disputed", {})
    unresolved = [{"group_id": v["group_id"], "why": disputed.get((mission, v["group_id"]), NOT_DECIDED)}
                  for v, lab in audited if v["verdict"] == PASS and lab is None]
    audited_passed = [lab for v, lab in audited if v["verdict"] == PASS and lab is not None
                      and v["group_id"] not in pending]
    reviewed = [(v, lab) for v, r, lab in zip(verdicts, routes, label) if r == REVIEW and lab is not None]
    agreed = sum((lab == FAIL) == (v["verdict"] == FAIL) for v, lab in reviewed)
    auto = sum(r != REVIEW for r in routes)
    drawn_at = [share_of(v) for v, r in zip(verdicts, routes) if r != REVIEW]
    shares = [s for s in drawn_at if s is not None]
    return {"day": name, "judged": len(verdicts), "auto_decided": auto,
            "automation_share": auto / len(verdicts) if verdicts else None, "audited": len(audited),
            "auto_passed": sum(r != REVIEW and v["verdict"] == PASS for v, r in zip(verdicts, routes)),
            "audits_labelled": sum(lab is not None for _, lab in audited),
            "audited_auto_passed": len(audited_passed), "escapes": sum(lab == FAIL for lab in audited_passed),
            "escapes_unconfirmed": len(waiting), "unconfirmed": waiting,
            "audits_disputed": sum(u["why"] != NOT_DECIDED for u in unresolved), "unresolved": unresolved,
            "audited_auto_failed": sum(v["verdict"] == FAIL for v, _ in audited),
            "audited_auto_failed_defects": sum(v["verdict"] == FAIL and lab == FAIL for v, lab in audited),
            "reviewed_labelled": len(reviewed), "reviewed_defects": sum(lab == FAIL for _, lab in reviewed),
            "agreed": agreed, "agreement": agreed / len(reviewed) if reviewed else None,
            "audit_share": min(shares) if shares else None}


def share_of(verdict: dict) -> float | None:
    """The audit share a decided-without-review verdict was drawn at (its audit_probability; older lines: the run's
    audit_share)."""
    for key in ("audit_probability", "audit_share"):
        value = verdict.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            return float(value)
    return None


def pooled(day_verdicts: list[list[dict]], mission: str) -> dict:
    """A drift reference made of judged days (after a clean tightened run): their p_fails and defect summaries."""
    lines = [v for day in day_verdicts for v in day]
    return {"p_fail": sorted(v["p_fail"] for v in lines),
            "defect_groups": sum(bool(defect_photos(v.get("summaries") or [], mission)) for v in lines),
            "groups": len(lines)}
