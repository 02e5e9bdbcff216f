"""`python -m stage_b.judge`: verdicts for new, unreviewed photo groups at the operating point a QC owner chose.

    python -m stage_b.judge --model DIR [--adapters RUN/checkpoint-N] --stage_a_dir DIR [--mission all]
                            --output_dir DIR (--operating_point operating_point.json | --threshold T)
                            [--overwrite]

Per group: p_fail (the model's probability of 不通过 against 通过 as the first line, stage_b.rules.operating_point),
the verdict the mission's threshold gives (不通过 iff p_fail >= t), then the reason, generated greedily after
that verdict line: after 不通过 it starts by citing every photo whose summary shows a defect (--reason_citations
guided, the default; `free` lets the model cite). `needs_review` is true, with `review_why` saying why, when the
operating point's rule does not decide the group by itself (stage_b.rules.operating_point.decide: the mission is not
certified, p_fail is between the auto-pass and auto-fail thresholds or within the review margin), when the reply is
not the two-line contract (kept, never dropped), when the reason contradicts the verdict or cites a photo whose
summary shows no defect, or when the verdict is 通过 and a summary shows a defect (stage_b.contract.grounding;
review_why
names the photo). A mission the operating point has no threshold for is judged all the same, every group to
review; it never stops the other missions. --allow_uncertified decides groups of
uncertified missions without review, and every such record says so.

Output: `<output_dir>/<mission>_verdicts.jsonl`, one line per group, flushed as each batch of groups is done,
so `tail -f` shows verdicts as they come. It is resumable like Stage-A: rerunning the same command judges only
the groups not yet in the file (a torn last line from a killed run is repaired first); a file written with
another model, adapters or operating point is refused unless --overwrite. One judge per output file (a lock).
Groups that cannot be put to the model go to `<mission>_verdicts.errors.jsonl` and are retried on the next run.
Reviewer labels in the Stage-A records, where present, are copied to `label` and never used.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from qc_core.errors import UserError
from qc_core.checkpoints import file_digest, stage_a_identity
from qc_core.exits import run_cli
from qc_core.jsonl import OUTPUT_REMEDY, RESUME, JsonlAppender, file_sha256, iter_jsonl, output_lock, write_jsonl_atomic
from qc_core.paths import resolved
from qc_core.records import summaries_of, utc_now

from stage_b.contract.bounds import in_range
from stage_b.data.dataset import DatasetError, load_records, prompt_row, rows_for
from stage_b.labels.decisions_log import LOG, read_log
from stage_b.model.engine_settings import EngineSettings, add_engine_args
from stage_b.contract.grounding import ground
from stage_b.labels.assign import DEFAULT_OVERLAP_SHARE, assignees, check_overlap_share, check_reviewers
from stage_b.labels.gold import (PHOTOS_DIR, DEFAULT_GOLD_SHARE, check_gold_share, load_gold, mix_in, photo_problem,
                                 with_photo_copies)
from stage_b.monitoring.day_shares import check_share_setting, day_shares
from stage_b.rules.routes import AUDIT, AUTO, DEFAULT_AUDIT_SHARE, REVIEW, route_of, route_of_record
from stage_b.model.model_replies import reply_starts
from stage_b.contract.numbers import fmt_p
from stage_b.rules.operating_point import (NO_AUTOMATION, UNCALIBRATED_THRESHOLD, MissionPoint, OperatingPoint,
                                           OperatingPointError, check_rate, load_operating_point, manual_point, p_fail,
                                           thresholds_for, verdict_at)
from stage_b.data.settings import MODE_FIELDS, TEXT_MODE, Selection, add_selection_args, selection_flags, selection_from
from stage_b.rules.replacement import check_words, unaccepted_why, weaker_missions
from stage_b.contract.verdict import FAIL, parse
from stage_b.rules.workload import (DEFAULT_SECONDS_PER_DECISION, Pace, day_workload, measured_pace, sentence,
                                    stated_pace, table)

# a resumed file must agree on these (a record that predates a key holds its default)
PROVENANCE = {"fingerprints": None, "operating_point": None, "threshold": None, "mode": TEXT_MODE,
              "allow_uncertified": False, "reason_citations": "free", "audit_share": 0.0, "audit_seed": None,
              "withdrawn": None, "reviewers": None, "overlap_share": None, "gold_share": None, "unmonitored": None,
              "no_monitor": None, "unaccepted": None, "accepted_weaker": None}
# A certified promise decides work without review only where a monitor checks it against live work, or where the
# person judging says in words why not (--no_monitor): the guard fails closed, never silently open.
NO_MONITOR = ("no monitor state for this operating point, so nothing checks its promise against live work today: pass "
              "--monitor <monitor.json> (judge.sh: labels=<labels folder> monitors the days before this one), or "
              "--no_monitor 'why, in words' to decide without one (recorded on every verdict line)")
# what a verdict line's decision is, recomputed on resume and compared (a line edited by hand is refused)
RECOMPUTED_FIELDS = ("verdict", "threshold", "threshold_fail", "review_margin", "certified", "promise", "needs_review",
                   "review_why", "route", "review_scope", "audit_probability", "assigned_to", "gold")


class JudgeError(UserError):
    pass


def check_no_monitor(words, monitor) -> str | None:
    """--no_monitor's reason: a few words a person could sign (at least 8 characters, a letter among them)."""
    if words is None:
        return None
    if monitor:
        raise JudgeError("--monitor and --no_monitor: give one (the monitor's state, or why the day is judged "
                         "without it)")
    return check_words(words, "--no_monitor", "first day at this operating point: why certified missions are "
                                              "decided without a monitor today")


def verdicts_path(output_dir: Path, mission: str) -> Path:
    return output_dir / f"{mission}_verdicts.jsonl"


def errors_path(output_dir: Path, mission: str) -> Path:
    return output_dir / f"{mission}_verdicts.errors.jsonl"


def verdict_record(record: dict, p: float, point: MissionPoint, completion: str, provenance: dict,
                   allow_uncertified: bool = False) -> dict:
    """One line of <mission>_verdicts.jsonl. Pure: everything the verdict depends on is an argument. `point` is
    the mission's decision point (stage_b.rules.operating_point.thresholds_for or manual_point); `provenance` carries
    the
    audit share and seed and the mission's withdrawal, if any (stage_b.rules.routes decides the route)."""
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
    reason = parsed.reason if parsed.two_lines else completion.partition("\n")[2].strip()
    certified = point.certified
    promise = point.promise
    if not certified and allow_uncertified and point.threshold is not None:
        promise = f"NOT CERTIFIED, decided under --allow_uncertified: {promise}"
    return {"group_id": record["group_id"], "mission": record["mission"], "verdict": decision.verdict, "p_fail": p,
            "threshold": point.threshold, "threshold_fail": point.threshold_fail,
            "review_margin": point.review_margin, "certified": certified, "promise": promise,
            "reason": reason, "needs_review": route["route"] == REVIEW, "review_why": route["why"],
            "route": route["route"], "review_scope": route["review_scope"],
            "audit_probability": route["audit_probability"], "assigned_to": assigned, "reply": completion,
            "label": record.get("label"), "summaries": summaries, "images": record["images"],
            "input_dir": record.get("input_dir"), "rests_on": rests_on(record), **provenance,
            **({"gold": {"label": record["gold_label"], "from": record.get("gold_from")}} if "gold_label" in record
               else {}),
            "created_at": utc_now()}


def rests_on(record: dict) -> dict:
    """What a verdict rests on: a digest of the group's Stage-A summaries and photo list, and the Stage-A model. A
    rerun judges a group again when its record no longer matches."""
    text = json.dumps({"summaries": summaries_of(record), "images": record["images"]}, ensure_ascii=False,
                      sort_keys=True)
    return {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()[:32], "stage_a_model": record.get("model"),
            "stage_a_fingerprint": record.get("model_fingerprint")}


def _line_problem(rec: dict, mission: str, records: dict[str, dict], seen: dict[str, int]) -> str | None:
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


def check_resumable(path: Path, provenance: dict, mission: str, records: dict[str, dict],
                    recompute=None) -> tuple[set[str], list[str]]:
    """(group ids already judged whose verdict still rests on their Stage-A record, group ids to judge again because
    their record changed since), after checking the file line by line: written with the same model, adapters and
    operating point (a file mixing two would hold verdicts no one threshold explains), and every line whole and
    consistent (_line_problem). Lines of groups to judge again are removed from the file (rewritten all at once)."""
    if not path.exists():
        return set(), []
    kept, seen, stale = [], {}, []
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


@dataclass(frozen=True)
class JudgeSettings:
    """One judging run, typed and checked (built in `main` from the flags)."""
    engine: EngineSettings
    selection_flags: dict
    output_dir: Path
    operating_point: str | None = None
    threshold: float | None = None
    allow_uncertified: bool = False
    audit_share: float | str = DEFAULT_AUDIT_SHARE   # or "plan" (stage_b.monitoring.day_shares)
    audit_seed: int | None = None
    reviewers: tuple[str, ...] = ()
    overlap_share: float = 0.0
    gold: tuple[str, ...] = ()
    gold_share: float = 0.0
    monitor: str | None = None
    no_monitor: str | None = None   # why certified missions are decided without a monitor, in words
    accept_weaker: str | None = None   # the owner's words accepting promises weaker than the replaced ones
    overwrite: bool = False
    review_page: bool = True
    seconds_per_decision: float | None = None   # the pace that prices the day's review work (None: measured/default)
    labels: str | None = None                   # the labels folder whose decisions log measured the pace

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "JudgeSettings":
        engine = EngineSettings.from_args(args)
        audit_share = check_share_setting(args.audit_share)
        reviewers = tuple(check_reviewers(args.reviewers))
        overlap_share = check_overlap_share(args.overlap_share if args.overlap_share is not None else
                                            DEFAULT_OVERLAP_SHARE if len(reviewers) > 1 else 0.0, list(reviewers))
        gold_share = check_gold_share(args.gold_share if args.gold_share is not None else
                                      DEFAULT_GOLD_SHARE if args.gold else 0.0)
        return cls(engine, selection_flags(args), Path(args.output_dir), args.operating_point, args.threshold,
                   args.allow_uncertified, audit_share, args.audit_seed, reviewers, overlap_share, tuple(args.gold),
                   gold_share, args.monitor, check_no_monitor(args.no_monitor, args.monitor),
                   check_words(args.accept_weaker, "--accept_weaker", "the new Stage-A camera needs the lower "
                                                                      "threshold; signed 王经理"),
                   args.overwrite, not args.no_review,
                   None if args.seconds_per_decision is None else in_range(
                       args.seconds_per_decision, "--seconds_per_decision", 1, 3600, "seconds, e.g. 30", JudgeError),
                   args.labels)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m stage_b.judge", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # transformers only: p_fail is read from the model's logits in this process (vLLM keeps its model in its own
    # engine; docs/judging_and_review.md)
    add_engine_args(p, backend=False, reason_citations=(
        "guided: after 不通过 the reason starts by citing every photo whose summary shows a defect; free: the model "
        "cites (default %(default)s)"))
    add_selection_args(p, split=False)
    p.add_argument("--output_dir", required=True, help="where <mission>_verdicts.jsonl go")
    p.add_argument("--operating_point", help="operating_point.json from python -m stage_b.evaluate --target_miss_rate")
    p.add_argument("--threshold", type=float, help="a threshold on p_fail for every mission (with --operating_point: "
                                                   "for the missions it has none for)")
    p.add_argument("--allow_uncertified", action="store_true",
                   help="decide groups of missions without a certified promise without review (every such record "
                        "says so); by default they all go to review")
    p.add_argument("--audit_share", default=str(DEFAULT_AUDIT_SHARE),
                   help="share (0 to 1) of the groups decided without review drawn for a blind audit, per mission, or "
                        "`plan` (stage_b.monitoring.plan_audits at today's volume); the monitor's tightened state "
                        "raises it "
                        "(stage_b.monitoring.day_shares; default %(default)s; 0: no audit, and "
                        "stage_b.monitoring.monitor then says the "
                        "promises are unverified)")
    p.add_argument("--audit_seed", type=int, default=None,
                   help="the audit draw's seed (default: the one the output folder's verdict files recorded, else a "
                        "new random one, recorded in every verdict line)")
    p.add_argument("--reviewers", default="",
                   help="the day's reviewers, comma-separated (stage_b.labels.assign): each group sent to a person is "
                        "assigned to one of them, and --overlap_share of them to two, blind to each other")
    p.add_argument("--overlap_share", default=None,
                   help=f"share (0 to 1) of the groups sent to people that two reviewers decide (default "
                        f"{DEFAULT_OVERLAP_SHARE} with two reviewers or more; stage_b.labels.agreement measures them)")
    p.add_argument("--gold", nargs="+", default=[],
                   help="labelled Stage-A files (earlier days' labels): known-answer groups mixed into the day's "
                        "review, looking like the day's blind audits; stage_b.labels.decisions scores each reviewer "
                        "on them "
                        "(stage_b.labels.gold)")
    p.add_argument("--gold_share", default=None,
                   help=f"gold groups per mission, as a share of the mission's groups today (default "
                        f"{DEFAULT_GOLD_SHARE} with --gold)")
    p.add_argument("--monitor", help="monitor.json from python -m stage_b.monitor: every group of a mission whose "
                                     "promise it withdrew goes to review, saying why")
    p.add_argument("--no_monitor", metavar="WHY",
                   help="decide certified missions without a monitor's state, for the reason given in words (e.g. "
                        "'first day at this operating point'), recorded on every verdict line; without --monitor or "
                        "this, every group of a certified mission goes to review (the guard fails closed)")
    p.add_argument("--accept_weaker", metavar="WORDS",
                   help="the owner accepts, in words, an operating point that promises less than the one it replaces "
                        "(stage_b.evaluate --replaces names the missions and why), recorded on every verdict line; "
                        "without it every group of such a mission goes to review (stage_b.rules.replacement)")
    p.add_argument("--seconds_per_decision", default=None,
                   help=f"the pace that prices the day's review work in person-hours (default: the median the review "
                        f"pages measured, from --labels, else {DEFAULT_SECONDS_PER_DECISION:g}; "
                        f"stage_b.rules.workload)")
    p.add_argument("--labels", help="the labels folder python -m stage_b.decisions writes: its decisions log gives the "
                                    "reviewers' measured pace")
    p.add_argument("--overwrite", action="store_true", help="discard earlier verdicts and judge everything again")
    p.add_argument("--no_review", action="store_true", help="no review page (<output_dir>/review/index.html)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: judge(JudgeSettings.from_args(args)), on_interrupt=f"interrupted: {RESUME}")


def judging_selection(settings: JudgeSettings, op: OperatingPoint | None) -> Selection:
    """What to judge and how the model reads it. The mode (summaries, or summaries and photos, and the photos' pixel
    budget) defaults to the one the operating point was calibrated in; asking for another is refused: its thresholds
    are on p_fail as the model gives it in that mode, and mean nothing in the other."""
    recorded = ((op.data if op is not None else None) or {}).get("selection") or {}
    calibrated = Selection.from_record({k: recorded[k] for k in MODE_FIELDS if k in recorded},
                                       f"the operating point {settings.operating_point}")
    selection = selection_from(settings.selection_flags, base=calibrated)
    if op is not None and recorded and (selection.images, selection.images and selection.max_pixels) != \
            (calibrated.images, calibrated.images and calibrated.max_pixels):
        raise JudgeError(f"the operating point {settings.operating_point} was calibrated on "
                         f"{calibrated.describe_mode()}, and this judge would read {selection.describe_mode()}: its "
                         f"thresholds do not carry over. Drop the mode settings to judge as it was calibrated, or "
                         f"calibrate again in this mode (python -m stage_b.evaluate --target_miss_rate R with the same "
                         f"settings)")
    return selection


def _thresholds(settings: JudgeSettings, op: OperatingPoint | None, missions: list[str],
                checkpoints: dict) -> tuple[dict, str | None]:
    """{mission: decision point} and the operating point file's digest."""
    fallback = check_rate(settings.threshold, "--threshold") if settings.threshold is not None else None
    if op is not None:
        points = thresholds_for(op, settings.operating_point, missions, model=checkpoints["model"],
                                adapters=checkpoints["adapters"], fallback=fallback)
        return points, file_digest(settings.operating_point)
    if fallback is None:
        raise OperatingPointError("no threshold: pass --operating_point operating_point.json (from python -m "
                                  "stage_b.evaluate --target_miss_rate R) or --threshold T")
    return {m: manual_point(fallback) for m in missions}, None


class JudgingDay(NamedTuple):
    """Everything a judging run decides before the model loads."""
    registry: object
    selection: Selection
    by_mission: dict          # {mission: [Stage-A record]} (gold groups mixed in)
    missions: list[str]
    checkpoints: dict
    points: dict              # {mission: decision point}
    op_digest: str | None
    withdrawn: dict           # {mission: why its promise is withdrawn}
    unmonitored: dict         # {mission: why its certified promise decides nothing without review today}
    unaccepted: dict          # {mission: why its promise, weaker than the replaced one, decides nothing today}
    accepted: tuple           # the missions whose weaker promise the owner accepted in words (--accept_weaker)
    shares: dict              # {mission: {"share", "state", "why"}}: the audit share and inspection state today
    seed: int
    prompts: dict             # {group_key: the model's row}
    unjudgeable: dict         # {group_key: why no row}


def judge(settings: JudgeSettings) -> int:
    day = prepare_day(settings)
    settings.output_dir.mkdir(parents=True, exist_ok=True)
    engine = LazyEngine(settings.engine)
    judged = sum(judge_mission(settings, day, mission, engine) for mission in day.missions)
    if judged:
        print(f"judged {judged} groups in {time.perf_counter() - engine.started:.1f}s "
              f"({judged / engine.seconds:.2f} groups/s) -> {settings.output_dir}")
    verdicts = _verdicts(settings.output_dir, day.missions)   # read once for both summaries
    print_automation(automation_of(settings.output_dir, day.missions, verdicts))
    pace = day_pace(settings)
    work = day_workload(verdicts, pace)
    for mission, counts in work["per_mission"].items():
        print(sentence(mission, counts, pace.source, day.points[mission].extra.get("automation_share")))
    if len(work["per_mission"]) > 1:
        print(sentence("the day", work["overall"], pace.source))
    for mission, why in day.withdrawn.items():
        print(f"{mission}: promise withdrawn ({why}): all its groups went to review")
    for mission in day.unmonitored:
        print(f"{mission}: promise not monitored: all its groups went to review ({NO_MONITOR})")
    for mission, why in day.unaccepted.items():
        print(f"{mission}: weaker promise not accepted: all its groups went to review ({why})")
    if settings.review_page:   # the page is the folder's: every mission judged into it, by this call or another
        in_folder = [m for m in day.registry.names if verdicts_path(settings.output_dir, m).exists()]
        write_day_review(settings.output_dir, in_folder, page_photo_dirs(settings.output_dir, day.selection.input_dir),
                     pace)
    return 0


def page_photo_dirs(output_dir: Path, input_dir: str | None) -> list[Path] | None:
    """The folders the day's page shows photos from: the day's --input_dir and, beside it, the gold photo copies
    (none without an --input_dir: no card shows a photo then, a gold card neither)."""
    if not input_dir:
        return None
    return [Path(input_dir)] + ([output_dir / PHOTOS_DIR] if (output_dir / PHOTOS_DIR).is_dir() else [])


def day_pace(settings: JudgeSettings) -> Pace:
    """--seconds_per_decision, else the pace the review pages measured (the labels' decisions log), else the stated
    default (stage_b.rules.workload)."""
    if settings.seconds_per_decision is not None:
        return stated_pace(settings.seconds_per_decision)
    log_path = Path(settings.labels) / LOG if settings.labels else None
    if log_path is None or not log_path.is_file():
        return stated_pace()
    try:
        log, _ = read_log(log_path)
    except (ValueError, OSError) as exc:   # the day is judged all the same; the price says it is not measured
        print(f"note: {log_path} cannot be read ({exc}): the day's review work is priced at the stated default pace",
              file=sys.stderr)
        return stated_pace()
    return measured_pace(log)


def prepare_day(settings: JudgeSettings) -> JudgingDay:
    """The groups, thresholds, withdrawals and audit seed of this run, and each group's prompt, checked before the
    model loads (a wrong path, an unusable operating point or no judgeable group fails in seconds)."""
    from qc_core.missions import load_registry
    registry = load_registry()
    gold = load_gold(list(settings.gold), registry) if settings.gold else {}
    op = load_operating_point(settings.operating_point) if settings.operating_point else None
    monitor = None
    if settings.monitor:
        from stage_b.monitoring.monitor import load_monitor
        monitor = load_monitor(settings.monitor)
    selection = judging_selection(settings, op)
    by_mission: dict[str, list[dict]] = {}
    for record in load_records(selection, registry, require_label=False):
        by_mission.setdefault(record["mission"], []).append(record)
    missions = [m.name for m in registry.select(selection.missions) if m.name in by_mission]
    if not missions:
        raise JudgeError(f"no Stage-A group to judge for {selection.missions!r} in "
                         f"{selection.stage_a_dir or ', '.join(selection.files)}")
    checkpoints = settings.engine.checkpoints()
    points, op_digest = _thresholds(settings, op, missions, checkpoints)
    withdrawn = mission_withdrawals(op, op_digest, monitor, settings.monitor, by_mission, missions,
                                    settings.operating_point)
    # a certified promise with neither a monitor's state nor a reason in words decides nothing today (NO_MONITOR)
    unmonitored = {} if op is None or monitor is not None or settings.no_monitor else \
        {m: NO_MONITOR for m in missions if points[m].certified and m not in withdrawn}
    unaccepted, accepted = unaccepted_weaker(settings, op, points, missions, withdrawn)
    seed = settings.audit_seed if settings.audit_seed is not None else \
        recorded_seed(settings.output_dir, missions, settings.overwrite)
    if gold:   # known-answer checks join each mission's day (stage_b.labels.gold)
        mix_gold(gold, by_mission, missions, settings.gold_share, seed,
                 settings.output_dir / PHOTOS_DIR if selection.input_dir else None)
    prompts, unjudgeable = prompt_rows([r for m in missions for r in by_mission[m]], selection, registry)
    if not prompts:   # before the model loads: nothing can be judged (photos in another folder, say)
        raise JudgeError(f"no group can be put to the model; the first: {next(iter(unjudgeable.values()))}")
    shares = day_shares(settings.audit_share, op, op_digest, monitor, settings.monitor, by_mission, missions)
    return JudgingDay(registry, selection, by_mission, missions, checkpoints, points, op_digest, withdrawn,
                      unmonitored, unaccepted, accepted, shares, seed, prompts, unjudgeable)


def unaccepted_weaker(settings: JudgeSettings, op: OperatingPoint | None, points: dict, missions: list[str],
                      withdrawn: dict) -> tuple[dict[str, str], tuple[str, ...]]:
    """({mission: why}, ()) for the certified missions whose promise is weaker than the replaced one's
    (stage_b.rules.replacement) when the owner has not accepted it in words, else ({}, those missions); --accept_weaker
    with nothing to accept is refused (a flag kept in a script from an earlier day must not accept tomorrow's weaker
    point unseen)."""
    replaces = (op.extra.get("replaces") if op is not None else None)
    try:
        weaker = weaker_missions(replaces)
    except ValueError as exc:
        raise JudgeError(f"{settings.operating_point}: {exc}") from None
    weaker = {m: why for m, why in weaker.items() if m in missions and points[m].certified and m not in withdrawn}
    if settings.accept_weaker:
        if not weaker:
            raise JudgeError(f"--accept_weaker: {settings.operating_point or 'the thresholds given'} promises nothing "
                             f"weaker than an operating point it replaces for the missions judged here; drop the "
                             f"flag")
        return {}, tuple(weaker)
    if not weaker:
        return {}, ()
    old = resolved(replaces["path"], Path(settings.operating_point).parent)   # stored relative to the new file
    return {m: unaccepted_why(why, str(old)) for m, why in weaker.items()}, ()


def mix_gold(gold: dict, by_mission: dict, missions: list[str], share: float, seed: int,
             photos_dir: Path | None = None) -> None:
    """Known-answer groups added to each judged mission's records; gold of a mission not judged today is named.
    With `photos_dir` (the day has photos on its page), only gold groups whose photos are found are drawn, and theirs
    are copied there so that a gold card shows its photos like any audit card (stage_b.labels.gold); each left out is
    named."""
    left_out = []
    if photos_dir is not None:
        usable = {}
        for mission, records in gold.items():
            for rec in records:
                why = photo_problem(rec)
                if why:
                    left_out.append(f"gold group {rec['group_id']} of {mission} not mixed in: {why}")
                else:
                    usable.setdefault(mission, []).append(rec)
        gold = usable
    for mission, extra in mix_in(gold, {m: by_mission[m] for m in missions}, share, seed).items():
        if photos_dir is not None:
            extra, failed = with_photo_copies(extra, photos_dir)
            left_out += failed
        by_mission[mission] = by_mission[mission] + extra
    for why in left_out[:20]:
        print(f"note: {why}", file=sys.stderr)
    if len(left_out) > 20:
        print(f"note: {len(left_out) - 20} more gold group(s) not mixed in for their photos", file=sys.stderr)
    elsewhere = {m: len(g) for m, g in gold.items() if m not in missions}
    if elsewhere:
        print("note: --gold holds groups of missions not judged today, not mixed in: "
              + ", ".join(f"{m} ({n})" for m, n in sorted(elsewhere.items())), file=sys.stderr)


class LazyEngine:
    """The verdict engine, loaded when the first mission has groups to judge (a resumed run with nothing left
    loads no model); it keeps the time judging took."""

    def __init__(self, settings: EngineSettings):
        self.settings, self._engine, self.started, self.seconds = settings, None, 0.0, 0.0

    def get(self):
        if self._engine is None:
            self._engine = self.settings.engine(temperature=0.0)
            self.started = time.perf_counter()
        return self._engine


def provenance_of(settings: JudgeSettings, day: JudgingDay, mission: str) -> dict:
    """What a verdict file's lines record about how they were made (a resume must agree: PROVENANCE)."""
    checkpoints = day.checkpoints
    return {"model": checkpoints["model"]["path"], "adapters": [a["path"] for a in checkpoints["adapters"]],
            "fingerprints": {"model": checkpoints["model"]["fingerprint"],
                             "adapters": [a["fingerprint"] for a in checkpoints["adapters"]]},
            "operating_point": day.op_digest, "threshold": day.points[mission].threshold,
            "mode": day.selection.mode, "allow_uncertified": settings.allow_uncertified,
            "reason_citations": settings.engine.reason_citations, "audit_share": day.shares[mission]["share"],
            "inspection": {"state": day.shares[mission]["state"], "why": day.shares[mission]["why"]},
            "audit_seed": day.seed, "withdrawn": day.withdrawn.get(mission),
            "reviewers": list(settings.reviewers) or None,
            "overlap_share": settings.overlap_share if settings.reviewers else None,
            "gold_share": settings.gold_share if settings.gold else None,
            "unmonitored": day.unmonitored.get(mission), "no_monitor": settings.no_monitor,
            "unaccepted": day.unaccepted.get(mission),
            "accepted_weaker": settings.accept_weaker if mission in day.accepted else None}


def judge_mission(settings: JudgeSettings, day: JudgingDay, mission: str, engine: LazyEngine) -> int:
    """Judges the mission's groups its verdict file does not hold yet (a resume checks what it holds first);
    returns how many were written."""
    path, provenance, point = verdicts_path(settings.output_dir, mission), provenance_of(settings, day, mission), \
        day.points[mission]
    records = day.by_mission[mission]
    with output_lock(path):
        if settings.overwrite:
            path.unlink(missing_ok=True)

        def recompute(record, line):
            return verdict_record(record, line["p_fail"], point, line.get("reply") or "", provenance,
                                  settings.allow_uncertified)
        done, stale = check_resumable(path, provenance, mission, {r["group_id"]: r for r in records}, recompute)
        todo = [r for r in records if r["group_id"] not in done]
        print(f"{mission}: {len(records)} groups, {len(done)} judged before, {len(todo)} to judge"
              + (f" ({len(stale)} again: their Stage-A record changed since they were judged)" if stale else "")
              + f"; threshold {fmt_p(point.threshold)} ({point.source}); {point.promise}"
              + f"; inspection {day.shares[mission]['state']}, audit share {day.shares[mission]['share']:g}"
              + f" ({day.shares[mission]['why']})"
              + (f"; PROMISE WITHDRAWN: {day.withdrawn[mission]}: every group goes to review"
                 if mission in day.withdrawn else "")
              + ("; NOT MONITORED: every group goes to review" if mission in day.unmonitored else "")
              + ("; WEAKER PROMISE NOT ACCEPTED: every group goes to review" if mission in day.unaccepted else "")
              + (f"; weaker promise accepted: {settings.accept_weaker}"
                 if settings.accept_weaker and mission in day.accepted else "")
              + (f"; decided without a monitor: {settings.no_monitor}"
                 if settings.no_monitor and point.certified and mission not in day.withdrawn else ""))
        write_jsonl_atomic(errors_path(settings.output_dir, mission), [])   # failed groups are retried now
        if not todo:
            return 0
        model = engine.get()
        t0 = time.perf_counter()
        written = _score_and_write(model, day.prompts, day.unjudgeable, todo, point, provenance, path,
                                 errors_path(settings.output_dir, mission), settings.engine.batch_size,
                                 settings.allow_uncertified, settings.engine.guided)
        engine.seconds += time.perf_counter() - t0
        return written


def recorded_seed(output_dir: Path, missions: list[str], overwrite: bool) -> int:
    """The audit seed the folder's verdict files recorded (a resume draws the same groups), else a new random one."""
    if not overwrite:
        for mission in missions:
            path = verdicts_path(output_dir, mission)
            if path.exists():
                for _, rec in iter_jsonl(path, remedy=OUTPUT_REMEDY):
                    if isinstance(rec.get("audit_seed"), int):
                        return rec["audit_seed"]
                    break
    import secrets
    return secrets.randbelow(2 ** 31)


def mission_withdrawals(op: OperatingPoint | None, op_digest: str | None, monitor: dict | None, monitor_path,
                        by_mission: dict[str, list[dict]], missions: list[str], op_path=None) -> dict[str, str]:
    """{mission: why its promise is withdrawn for this run}: the summaries come from another Stage-A model than the
    promise was certified on, a monitor recorded a withdrawal beside the operating point (stage_b.rules.withdrawals:
    read
    with or without --monitor), or the monitor given withdrew it (stage_b.monitoring.monitor.withdrawals)."""
    out = {}
    for mission in missions:
        entry = op.missions.get(mission) if op is not None else None
        basis = (entry.stage_a if entry is not None else None) or {}
        certified_on = set(basis.get("models") or [])
        if certified_on:
            others = sorted({stage_a_identity(r) for r in by_mission[mission]} - certified_on)
            if others:
                out[mission] = (f"its summaries come from Stage-A model {others[0]}, and the promise was certified on "
                                f"summaries of {', '.join(sorted(certified_on))}: certify it again on summaries of "
                                f"this Stage-A model (python -m stage_b.evaluate --target_miss_rate R)")
    if op_path and op_digest:
        from stage_b.rules.withdrawals import recorded, withdrawals_path
        for mission, line in recorded(op_path, op_digest).items():
            if mission in missions and mission not in out:
                out[mission] = (f"{line['why']} (recorded in {withdrawals_path(op_path)} by the monitor of "
                                f"{line['withdrawn_day'] or line['withdrawn_at']})")
    if monitor is not None and op is not None:
        from stage_b.monitoring.monitor import withdrawals
        for mission, why in withdrawals(monitor, monitor_path, op, op_digest).items():
            if mission in missions and mission not in out:
                out[mission] = why
    return out


def _verdicts(output_dir: Path, missions: list[str]) -> list[dict]:
    return [rec for m in missions if verdicts_path(output_dir, m).exists()
            for _, rec in iter_jsonl(verdicts_path(output_dir, m), remedy=OUTPUT_REMEDY)]


def automation_of(output_dir: Path, missions: list[str], verdicts: list[dict] | None = None) -> dict:
    """Per mission and pooled, over every verdict in the files: groups judged, decided without review, the share
    with its 95% Wilson interval, and how many went to review for an ungrounded reason."""
    from stage_b.stats.metrics import wilson
    verdicts = _verdicts(output_dir, missions) if verdicts is None else verdicts

    verdicts = [v for v in verdicts if not v.get("gold")]   # known-answer checks are not the day's work

    def counts(rows: list[dict]) -> dict:
        routes = [route_of_record(v) for v in rows]
        auto = sum(r in (AUTO, AUDIT) for r in routes)
        return {"judged": len(rows), "auto_decided": auto, "audited": routes.count(AUDIT),
                "automation_share": auto / len(rows) if rows else None,
                "automation_share_ci95": wilson(auto, len(rows)), "fail": sum(v["verdict"] == FAIL for v in rows),
                "ungrounded_reason": sum(any(w.startswith("the reason") for w in v.get("review_why", []))
                                         for v in rows)}
    return {"per_mission": {m: counts([v for v in verdicts if v["mission"] == m]) for m in missions},
            "overall": counts(verdicts)}


def print_automation(automation: dict) -> None:
    for name, c in [*automation["per_mission"].items(), ("all missions", automation["overall"])]:
        if c["judged"]:
            lo, hi = c["automation_share_ci95"]
            print(f"{name}: {c['auto_decided']} of {c['judged']} groups decided without review "
                  f"({100 * c['automation_share']:.1f}%, 95% [{100 * lo:.1f}, {100 * hi:.1f}]), {c['audited']} of "
                  f"them drawn for a blind audit; {c['ungrounded_reason']} sent to review for an ungrounded reason")


def write_day_review(output_dir: Path, missions: list[str], input_dirs: list[Path] | None = None,
                 pace: Pace | None = None) -> dict:
    """<output_dir>/review/ over every verdict in the missions' files: needs_review first, then 不通过, then 通过."""
    from stage_b.pages.cards import JUDGE_OUTCOMES, judge_cards
    from review.page import render_review, report
    verdicts = _verdicts(output_dir, missions)
    files = [verdicts_path(output_dir, m) for m in missions if verdicts_path(output_dir, m).exists()]
    sources = [{"file": str(f.resolve()), "sha256": file_sha256(f)} for f in files]
    source_of = {m: k for k, m in enumerate(m for m in missions if verdicts_path(output_dir, m).exists())}
    named = [v.get("input_dir") for v in verdicts]   # named on the page, not followed (page_photo_folders)
    automation = automation_of(output_dir, missions, verdicts)
    withdrawn = {v["mission"]: v["withdrawn"] for v in verdicts if v.get("withdrawn")}
    rows = []
    for m in missions:
        mine = [v for v in verdicts if v["mission"] == m]
        if mine:
            c = automation["per_mission"][m]
            rows.append([m, len(mine), c["fail"], len(mine) - c["auto_decided"], c["ungrounded_reason"],
                         f"{100 * c['automation_share']:.1f}%", fmt_p(mine[0]["threshold"]),
                         (NO_AUTOMATION if str(mine[0].get("promise")).startswith(NO_AUTOMATION) else "yes")
                         if mine[0].get("certified") else "no", mine[0].get("promise") or ""])
    result = render_review(output_dir, title=f"Verdicts: {output_dir}", cards=judge_cards(verdicts, source_of),
                           outcomes=JUDGE_OUTCOMES, input_dirs=input_dirs or [], named_dirs=named, sources=sources,
                           tables=[{"title": "Per mission", "columns": [
                               "mission", "groups", "不通过", "needs review", "of them for the reason",
                               "decided without review", "threshold", "certified", "promise"], "rows": rows},
                                   dict(zip(("title", "columns", "rows"), (
                                       f"The day's work, priced at {(pace or stated_pace()).source}",
                                       *table(day_workload(verdicts, pace or stated_pace()), gold_apart=False))))],
                           intro=[*(f"PROMISE WITHDRAWN for {m}: {why}. Every group of it goes to review until "
                                    f"an operating point certified on labels decided after the withdrawal replaces "
                                    f"this one." for m, why in withdrawn.items()),
                                  *(f"PROMISE NOT MONITORED for {m}: every group of it went to review ({NO_MONITOR})."
                                    for m in dict.fromkeys(v["mission"] for v in verdicts if v.get("unmonitored"))),
                                  *(f"WEAKER PROMISE NOT ACCEPTED for {m}: every group of it went to review ({why})."
                                    for m, why in {v["mission"]: v["unaccepted"] for v in verdicts
                                                   if v.get("unaccepted")}.items()),
                                  "Groups that need a person's review first, then blind audits (the model's answer "
                                  "shows once you have decided), then 不通过, then 通过. needs review: the "
                                  "mission is not certified, p_fail is between the auto-pass and auto-fail thresholds "
                                  "or within the review margin, the reply is not the two-line contract, or the reason "
                                  "contradicts the verdict or cites a photo whose summary shows no defect.",
                                  "Each photo is marked when the reason cites it and when its summary shows a defect.",
                                  "Decide each group here (buttons, or keys j/k p f u n); decisions stay in this "
                                  "browser; 'export' downloads decisions-<reviewer>-<day>-<date>.jsonl for python -m "
                                  "stage_b.labels.decisions, which turns them into labelled Stage-A files."])
    report(result)
    return result


def group_key(record: dict) -> tuple[str, str]:
    """A group is its mission and id: one work order photographed for several missions is several groups."""
    return record["mission"], record["group_id"]


def prompt_rows(records: list[dict], selection: Selection, registry) -> tuple[dict[tuple, dict], dict[tuple, str]]:
    """({group_key: what the model is asked}, {group_key: why it cannot be asked}). Only photo-aware rows can fail
    (a photo missing or unreadable): such a group goes to the errors file, retried on the next run, and the others
    are judged."""
    try:
        return {group_key(r): row for r, row in zip(records, rows_for(records, selection, registry, prompt_row))}, {}
    except DatasetError:
        rows, failed = {}, {}
        for record in records:
            try:
                rows[group_key(record)] = rows_for([record], selection, registry, prompt_row)[0]
            except DatasetError as exc:
                failed[group_key(record)] = f"group {record['group_id']} of {record['mission']}: {exc}"
        return rows, failed




def _score_and_write(engine, prompts: dict[tuple, dict], unjudgeable: dict[tuple, str], todo: list[dict],
                   point: MissionPoint, provenance: dict, path: Path, errors_file: Path, batch_size: int,
                   allow_uncertified: bool = False, guided: bool = True) -> int:
    written = 0
    with JsonlAppender(path) as out, JsonlAppender(errors_file) as errors:
        for record in todo:
            if group_key(record) in unjudgeable:
                why = unjudgeable[group_key(record)]
                errors.write({"group_id": record["group_id"], "mission": record["mission"], "error": why,
                              "created_at": utc_now()})
                print(f"warning: not judged (retried on the next run): {why}", file=sys.stderr)
        todo = [r for r in todo if group_key(r) in prompts]
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            rows = [prompts[group_key(r)] for r in batch]
            scores, failed = engine.verdict_logprobs(rows)
            ok = [i for i in range(len(rows)) if scores[i] is not None]
            p = {i: p_fail(scores[i]) for i in ok}
            starts = reply_starts({i: rows[i] for i in ok}, p, point, guided)
            todo_gen = [i for i in ok if not starts[i][1]]   # complete starts need no generation
            replies, gen_failed = (engine.generate([rows[i] for i in todo_gen],
                                                   prefixes=[starts[i][0] for i in todo_gen])
                                   if todo_gen else ([], {}))
            failed.update({todo_gen[k]: why for k, why in gen_failed.items()})
            written_replies = {i: starts[i][0] for i in ok if starts[i][1]}
            written_replies.update({i: replies[k][0] for k, i in enumerate(todo_gen)})
            for i in ok:
                if i in failed:
                    continue
                out.write(verdict_record(batch[i], p[i], point, written_replies[i], provenance, allow_uncertified))
                written += 1
            for i, why in sorted(failed.items()):
                errors.write({"group_id": batch[i]["group_id"], "mission": batch[i]["mission"], "error": why,
                              "created_at": utc_now()})
                print(f"warning: not judged (retried on the next run): {why}", file=sys.stderr)
    return written


if __name__ == "__main__":
    sys.exit(main())
