"""`group-qc monitor`: do the promises hold on the work they decide? Day by day, per mission, from the
judge's verdict files and the reviewers' imported labels. Pure core (scipy for the two drift tests); the page is
rendered by stage_b.monitoring.monitor_page.

    group-qc monitor --operating_point operating_point.json (--verdicts DAY_DIR [DAY_DIR …] |
                     --days_under PARENT) --labels LABELS_DIR --output_dir DIR [--drift_alpha 0.001]

Days are verdict folders (`<mission>_verdicts.jsonl`, group-qc judge), in the order given (`--days_under`:
every subfolder of PARENT judged at this operating point, by name; folders judged at another are named and skipped).
Listed days judged at another operating point are refused: live evidence is never mixed across two rules. A group
judged on two days counts on the first. Labels are the folder stage_b.labels.decisions writes (its decisions.jsonl log).

What a promise is checked against: the escape rate of auto-passed groups, the share of the groups the rule passes
without review that a person would fail. The operating point states it on validation (stage_b.rules.operating_point
escape_rate: its upper bound at the promise's confidence C is the promised rate r). Live, the blind audits
(stage_b.rules.routes: each automatically decided group drawn with probability a) are a simple random sample of the
auto-passed work, so the audited auto-passed groups a reviewer labelled are Bernoulli draws of the live escape rate.

The live bound is a confidence sequence (stage_b.stats.confidence_sequence, which cites and states it), and drift
is tested per mission and day (stage_b.stats.drift).

Status per mission, after each day:
- `withdrawn`: the live lower bound is above the promised rate r (at confidence C, the escape rate is worse than
  promised), or drift fired. A withdrawal stands for the rest of the days monitored at this operating point; the judge
  (--monitor) then sends every group of the mission to review until an operating point certified on labels decided
  after the withdrawal replaces it (withdrawals);
- `holds`: the live upper bound is at most r;
- `unverified`: neither yet; it says how many more audited auto-passed groups without an escape would make it hold;
- `not certified`: the mission decides nothing without review (every group is reviewed), so there is nothing to audit.
With --audit_share 0 no audit is drawn, and every certified mission stays unverified, saying so.

monitor.json holds, per mission under `missions`, the promise, each day's counts, bounds, drift and status; it is read
back with every status recomputed from its own counts (load_monitor), so a file edited by hand is refused.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import cast

from qc_core.exits import run_cli
from qc_core.missions import load_registry
from qc_core.paths import resolved
from qc_core.records import utc_now
from stage_b.contract.grounding import defect_photos
from stage_b.contract.numbers import pct
from stage_b.labels.agreement import DEFAULT_MIN_GOLD_ACCURACY, check_min_gold_accuracy
from stage_b.labels.decisions import printable
from stage_b.monitoring import timeline
from stage_b.monitoring.days import (
    NOT_DECIDED,
    Day,
    MonitorError,
    day_counts,
    days_under,
    days_workload,
    operating_points_of,
    pooled,
    read_days,
    read_labels,
    seen_heads,
    verdict_files,
)
from stage_b.monitoring.inspection import NORMAL, NOT_CERTIFIED, TIGHTENED_CLEAN_DAYS, WITHDRAWN
from stage_b.monitoring.live_promise import DEFAULT_DRIFT_ALPHA, MAX_DRIFT_ALPHA, MONITOR_FORMAT, bounds_for, promise_of
from stage_b.monitoring.monitor_file import load_monitor
from stage_b.monitoring.monitor_format import MonitorFile
from stage_b.monitoring.monitor_page import write_outputs
from stage_b.monitoring.monitor_replay import HOLDS, UNVERIFIED, replay
from stage_b.monitoring.owner_status import owner_status
from stage_b.rules.acceptances import recorded as recorded_acceptance
from stage_b.rules.acceptances import words_of
from stage_b.rules.operating_point import MissionPoint, OperatingPoint, load_operating_point, point_keys
from stage_b.rules.point_identity import PointKeys
from stage_b.rules.promise_texts import family_text
from stage_b.rules.replacement import recomputed_weaker
from stage_b.stats.detector import DEFAULT_FALSE_ALARM_YEARS, check_false_alarm_years
from stage_b.stats.drift import drift
from stage_b.rules.withdrawals import lines_of as withdrawal_lines
from stage_b.rules.withdrawals import record, withdrawals_path


def mission_monitor(mission: str, entry: MissionPoint | None, days: list[Day], labels: dict, delta: float,
                    alpha: float, false_alarm_years: float, clean_days: int = TIGHTENED_CLEAN_DAYS) -> dict:
    """One mission's entry of monitor.json: the promise, each day with its counts, bounds, detectors, inspection
    state, status and next audit share (stage_b.monitoring.monitor_replay)."""
    promise = promise_of(entry, false_alarm_years, clean_days)
    bounds = bounds_for(promise.escape_rate, delta)
    profile = entry.profile if entry is not None else None
    verdicts = [day.verdicts.get(mission, []) for day in days]
    rows = [day_counts(day.name, v, labels, mission) for day, v in zip(days, verdicts)]

    def drift_for(i: int, reference: tuple | None) -> dict:
        against = profile if reference is None else pooled(verdicts[reference[0]:reference[1] + 1], mission)
        defect = sum(bool(defect_photos(v.get("summaries") or [], mission)) for v in verdicts[i])
        return drift([v["p_fail"] for v in verdicts[i]], defect, against, alpha, against="validation"
                     if reference is None else f"days {rows[reference[0]]['day']}-{rows[reference[1]]['day']}")
    rows = replay(rows, promise, bounds, drift_for)
    last = rows[-1] if rows else None
    ref = last["drift_reference"] if last else None
    against = None
    if ref:   # what the judge tests today's Stage-A summaries against (stage_b.monitoring.day_shares)
        pool = pooled(verdicts[ref[0]:ref[1] + 1], mission)
        against = {"groups": pool["groups"], "defect_groups": pool["defect_groups"],
                   "days": [rows[ref[0]]["day"], rows[ref[1]]["day"]]}
    return {"certified": promise.certified,
            "promise": {"escape_rate": promise.escape_rate, "miss_rate": promise.miss_rate,
                        "caught_share": promise.caught_share, "auto_pass_share": promise.auto_pass_share,
                        "confidence": 1 - delta, "prior": list(bounds.prior), "alarm_level": promise.alarm_level,
                        "text": entry.promise if entry is not None else None},
            "days": rows, "status": last["status"] if last else UNVERIFIED,
            "why": last["why"] if last else "no day yet",
            "state": last["state"] if last else (NORMAL if promise.certified else NOT_CERTIFIED),
            "state_why": last["state_why"] if last else "no day yet",
            "next_audit_share": last["next_audit_share"] if last else None,
            "withdrawn_day": next((r["day"] for r in rows if r["withdrawn_here"]), None), "drift_against": against}


def withdrawal_time(mission: str, withdrawn_day: str | None, days: list[Day], labels) -> str | None:
    """When the evidence that withdrew a promise was complete: the latest decision time among the mission's labels on
    the days up to the one that broke it. A label decided after it is new evidence (a re-certification may rest on
    it), however late the monitor runs or how often it is run again; None without label times."""
    times = getattr(labels, "decided_at", {})
    names = [d.name for d in days]
    upto = days[:names.index(withdrawn_day) + 1] if withdrawn_day in names else days
    seen: list[str] = [times[(mission, v["group_id"])] for d in upto for v in d.verdicts.get(mission, [])
                       if (mission, v["group_id"]) in times]
    return max(seen, default=None)


def restore_command(op: OperatingPoint, op_path, labels_dir) -> str:
    """The command that re-certifies this operating point on the labels reviewers decided since (the docs' step 5):
    its model and adapters and Stage-A files (stored relative to the point's file) plus the labels folder's
    reviewed groups, --split held_out, --replaces this point; a withdrawn mission's status line names it."""
    here = Path(op_path).parent

    def near(path) -> str:   # a path the file stores relative to itself, as a path from here
        return os.path.normpath(path if os.path.isabs(str(path)) else here / str(path))
    files = [near(f) for f in ((op.data or {}).get("selection") or {}).get("files") or []]
    stage_a = ((op.data or {}).get("selection") or {}).get("stage_a_dir")
    if stage_a and not files:
        files = [str(Path(near(stage_a)) / "*_stage_a.jsonl")]
    if labels_dir:
        files.append(str(Path(labels_dir) / "*_stage_a.jsonl"))
    # the checkpoints are read back already resolved (stage_b.rules.operating_point.load_operating_point)
    words = ["group-qc", "evaluate", "--model", os.path.normpath(str(op.model.get("path", "<model>")))]
    for a in op.adapters or []:
        words += ["--adapters", os.path.normpath(str(a.get("path") if isinstance(a, dict) else a))]
    words += ["--split", "held_out"] + (["--stage_a_files", ",".join(dict.fromkeys(files))] if files else [])
    words += ["--replaces", str(op_path), "--output_dir", str(here.parent / f"{here.name}-recertified")]
    return shlex.join(words)


def build_monitor(op: OperatingPoint, op_path, point: PointKeys, days: list[Day], labels: dict, alpha: float,
                  labels_dir=None, false_alarm_years: float = DEFAULT_FALSE_ALARM_YEARS,
                  clean_days: int = TIGHTENED_CLEAN_DAYS) -> MonitorFile:
    """monitor.json's content (module doc; its records: stage_b.monitoring.monitor_format), without the days' work,
    which the command adds."""
    confidence = (op.family or {}).get("per_claim_confidence") or op.confidence
    assert confidence is not None   # load_operating_point checks it
    delta = 1 - confidence
    missions = sorted(set(op.missions) | {m for d in days for m in d.verdicts})
    out: dict = {"format": MONITOR_FORMAT, "operating_point": {"file": str(op_path), "sha256": point.file_sha256,
                                                               "identity": point.identity},
           "confidence": 1 - delta, "drift_alpha": alpha, "false_alarm_years": false_alarm_years,
           "tightened_clean_days": clean_days,
           "days": [d.name for d in days], "day_folders": [str(d.folder) for d in days],
           "labels": str(labels_dir) if labels_dir else None, "labels_head": getattr(labels, "head", None),
           "created_at": utc_now(), "restore": restore_command(op, op_path, labels_dir), "missions": {}}
    for mission in missions:
        m = mission_monitor(mission, op.missions.get(mission), days, labels, delta, alpha, false_alarm_years,
                            clean_days)
        if m["status"] == WITHDRAWN:   # dated by its evidence, not by when this monitor ran
            m["withdrawn_at"] = withdrawal_time(mission, m["withdrawn_day"], days, labels) or out["created_at"]
        out["missions"][mission] = m
    promised = [m for m, e in out["missions"].items() if e["certified"]]
    family = dict(op.family or {})
    targets = [e.target_miss_rate for e in op.missions.values() if e.target_miss_rate]
    out["family"] = {**family, "text": family_text(family, min(targets, default=None)) if family else None,
                     "holding": [m for m in promised if out["missions"][m]["status"] == HOLDS],
                     "withdrawn": [m for m in promised if out["missions"][m]["status"] == WITHDRAWN]}
    return cast(MonitorFile, out)


# --------------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------------
def check_alpha(value) -> float:
    try:
        alpha = float(value)
    except (TypeError, ValueError):
        raise MonitorError(f"--drift_alpha {value!r} is not a number; use a level above 0 and at most "
                           f"{MAX_DRIFT_ALPHA}, e.g. 0.001") \
            from None
    if math.isnan(alpha) or not 0.0 < alpha <= MAX_DRIFT_ALPHA:
        raise MonitorError(f"--drift_alpha {value!r} is out of range: use a level above 0 and at most "
                           f"{MAX_DRIFT_ALPHA} (the false alarm rate of each drift test per mission and day; a drift "
                           f"alarm tightens inspection), e.g. 0.001")
    return alpha


def check_clean_days(value) -> int:
    try:
        days = int(str(value).strip())
    except ValueError:
        raise MonitorError(f"--tightened_clean_days {value!r} is not a whole number of days; use e.g. "
                           f"{TIGHTENED_CLEAN_DAYS}") from None
    if not 1 <= days <= 60:
        raise MonitorError(f"--tightened_clean_days {value!r} is out of range: use 1 to 60 days, e.g. "
                           f"{TIGHTENED_CLEAN_DAYS}")
    return days


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc monitor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--operating_point", required=True, help="the operating_point.json the days were judged at")
    days = p.add_mutually_exclusive_group(required=True)
    days.add_argument("--verdicts", nargs="+", help="day folders of verdict files (group-qc judge), in order")
    days.add_argument("--days_under", help="a folder of day folders: those judged at this operating point, by name")
    p.add_argument("--labels", required=True, help="the labels folder group-qc decisions writes")
    p.add_argument("--output_dir", required=True, help="where monitor.json, monitor.png and index.html go")
    p.add_argument("--drift_alpha", default=str(DEFAULT_DRIFT_ALPHA),
                   help="level of each drift test per mission and day (default %(default)s); drift only tightens "
                        "inspection")
    p.add_argument("--tightened_clean_days", default=str(TIGHTENED_CLEAN_DAYS),
                   help="tightened days in a row whose audits bring no evidence against the promise that return a "
                        "mission to normal inspection (ISO 2859-1: 5; default %(default)s)")
    p.add_argument("--false_alarm_years", default=str(DEFAULT_FALSE_ALARM_YEARS),
                   help="the miss-rate detector's average years between false withdrawals of one mission while its "
                        "promise holds (stage_b.stats.detector; default %(default)s)")
    p.add_argument("--min_gold_accuracy", default=str(DEFAULT_MIN_GOLD_ACCURACY),
                   help="the bar of group-qc decisions (default %(default)s): an escape one reviewer alone "
                        "found moves "
                        "a bound once a second reviewer confirms it, or when that reviewer's measured error rate is "
                        "below 1 - this at the reviewer table's confidence")
    args = p.parse_args(argv)
    return run_cli(lambda: _monitor(args))


def _monitor(args) -> int:
    alpha = check_alpha(args.drift_alpha)
    years = check_false_alarm_years(args.false_alarm_years)
    clean_days = check_clean_days(args.tightened_clean_days)
    op = load_operating_point(args.operating_point)
    point = point_keys(args.operating_point, op)
    registry = load_registry()
    folders = [Path(f) for f in args.verdicts] if args.verdicts else days_under(Path(args.days_under), point)
    days = read_days(folders, point, registry)
    labels = read_labels(Path(args.labels), registry, check_min_gold_accuracy(args.min_gold_accuracy),
                         seen_heads(Path(args.labels), _earlier_monitor(Path(args.output_dir)),
                                    withdrawal_lines(args.operating_point, point, args.labels)))
    monitor = build_monitor(op, args.operating_point, point, days, labels, alpha, args.labels, years, clean_days)
    monitor["workload"] = days_workload(days, Path(args.labels))
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    keep_timeline(monitor, op, args, out, days, labels, alpha, years, clean_days)
    page = write_outputs(monitor, json.dumps(monitor, ensure_ascii=False, indent=2), out)
    newly = record(args.operating_point, point, monitor, out / "monitor.json", args.labels)
    print_days(monitor)
    if newly:   # where every judge at this operating point finds it, whatever monitor it is given
        print(f"withdrawal of {', '.join(newly)} recorded beside the operating point: "
              f"{withdrawals_path(args.operating_point)}")
    print(f"monitor: {out / 'monitor.json'}; page {page}")
    return 0


def replaced_point(op: OperatingPoint, op_path):
    """(file, OperatingPoint, PointKeys) of the point this one replaces (its `replaces` block), or None; a block whose
    file is gone or changed is refused (stage_b.rules.replacement says which)."""
    replaces = op.extra.get("replaces")
    if not replaces:
        return None
    recomputed_weaker(op_path, op)   # the replaced file exists and is the point the block names
    old_path = resolved(replaces["path"], Path(op_path).parent)
    old = load_operating_point(old_path)
    return old_path, old, point_keys(old_path, old)


def keep_timeline(monitor: MonitorFile, op: OperatingPoint, args, out: Path, days: list[Day], labels: dict,
                  alpha: float, years: float, clean_days: int) -> None:
    """The replaced point's days monitored once more, whole, with the labels this run read, and archived;
    monitor.json's `replaced` and `timeline` (stage_b.monitoring.timeline)."""
    earlier = replaced_point(op, args.operating_point)
    replaced = None
    if earlier is not None:
        old_path, old, old_keys = earlier
        parent = Path(args.days_under) if args.days_under else (days[0].folder.parent if days else None)
        folders = [p for p in sorted(parent.iterdir()) if p.is_dir() and verdict_files(p)
                   and all(old_keys.names(d) for d in operating_points_of(p))] if parent and parent.is_dir() else []
        archive = None
        if folders:
            old_days = read_days(folders, old_keys, load_registry())
            again = build_monitor(old, old_path, old_keys, old_days, labels, alpha, args.labels, years, clean_days)
            archive = timeline.write_archive(out, cast(dict, again))
        else:   # its days are elsewhere: the monitor.json it left here, when it is that point's
            left = _earlier_monitor(out)
            if left and old_keys.names(left[0]["operating_point"].get("identity")):
                archive = timeline.write_archive(out, left[0])
        replaced = {"file": str(old_path), "identity": old_keys.identity, "archive": str(archive) if archive else None}
    entries = timeline.earlier_entries(out)
    accepted = timeline.acceptance_on_days(days)
    if accepted is None:
        found = recorded_acceptance(args.operating_point, point_keys(args.operating_point, op))
        accepted = words_of(found) if found else None
    monitor["replaced"] = replaced
    monitor["timeline"] = timeline.link_replaced(entries, replaced, accepted, monitor["operating_point"]["identity"])


def _earlier_monitor(out: Path) -> list[dict]:
    """The monitor.json this command wrote before in `out`, when it reads (its labels head is checked against the log;
    one that does not read is written anew)."""
    try:
        return [dict(load_monitor(out / "monitor.json"))] if (out / "monitor.json").is_file() else []
    except MonitorError:
        return []


def print_days(monitor: MonitorFile) -> None:
    """Per mission and day: inspection state and audit share, audits, escapes, the detectors, the live escape bound,
    status."""
    for entry in monitor.get("timeline") or []:
        if entry.get("error"):
            print(f"before: archive {entry['archive']}: {entry['error']}")
            continue
        print(f"before: operating point {entry['file']} (days {', '.join(entry['days']) or 'none'})")
        for mission, m in entry["missions"].items():
            print(f"  {mission}: {m['status_line']}")
    for mission, m in monitor["missions"].items():   # the line an owner repeats, first
        print(f"{mission}: {owner_status(cast(dict, m), monitor.get('restore'))}")
    for mission, m in monitor["missions"].items():
        p = m["promise"]
        print(f"{mission}: signed miss rate <= {pct(p['miss_rate'])} (its detector withdraws at {p['alarm_level']:g});"
              f" escape rate of auto-passed groups <= {pct(p['escape_rate'])} (tightens)"
              f"{'' if m['certified'] else ' (not certified)'}")
        for d in m["days"]:
            print(f"  {d['day']}: {d['judged']} judged, automation {pct(d['automation_share'])}, audit share "
                  f"{pct(d['audit_share'])}, {d['audited']} audited ({d['audited_auto_passed']} auto-passed labelled, "
                  f"{d['escapes']} escapes), miss detector {d['miss_detector']:.3g}, escape detector "
                  f"{d['escape_detector']:.3g}, live escape bound [{pct(d['escape_lower'])}, "
                  f"{pct(d['escape_upper'])}], drift {'FIRED' if d['drift']['fired'] else 'no'} -> {d['state']}, "
                  f"{d['status']}; next audit share {pct(d['next_audit_share'])}")
            if d.get("share_note"):
                print(f"    note: {d['share_note']}")
            for w in d.get("unconfirmed") or []:
                print(f"    escape waiting for a second person: group {printable(w['group_id'])} was decided 不通过 "
                      f"by {printable(w['reviewer'])} alone; it moves no bound until another reviewer decides it too "
                      f"(or {printable(w['reviewer'])}'s measured error rate meets the bar: group-qc decisions)")
            for u in d.get("unresolved") or []:
                print(f"    audit unresolved: group {printable(u['group_id'])} ({u['why']}): "
                      + ("it counts as an escape the moment a reviewer or the lead settles it as one" if u["why"] !=
                         NOT_DECIDED else "its reviewer has not decided it yet"))
        print(f"  state: {m['state']}: {m['state_why']}")
        print(f"  status: {m['status']}: {m['why']}")
    if monitor["family"].get("text"):
        print(f"all together: {monitor['family']['text']}; holding: {', '.join(monitor['family']['holding']) or 'none'}"
              f"; withdrawn: {', '.join(monitor['family']['withdrawn']) or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
