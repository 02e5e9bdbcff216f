"""`group-qc judge`: verdicts for new, unreviewed photo groups at the operating point a QC owner chose.

    group-qc judge --model DIR [--adapters RUN/checkpoint-N] --stage_a_dir DIR [--mission all]
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

import sys
import time
from pathlib import Path
from typing import NamedTuple

from qc_core.checkpoints import stage_a_identity
from qc_core.records import StageARecord
from qc_core.exits import run_cli
from qc_core.jsonl import OUTPUT_REMEDY, RESUME, iter_jsonl, output_lock, write_jsonl_atomic
from qc_core.missions import Registry, load_registry
from qc_core.paths import resolved, stored

from stage_b.data.dataset import load_records
from stage_b.labels.decisions_log import LOG, read_log
from stage_b.labels.gold import (PHOTOS_DIR, load_gold, mix_in, photo_problem,
                                 with_photo_copies)
from stage_b.monitoring.day_shares import DayShare, day_shares
from stage_b.contract.numbers import fmt_p
from stage_b.rules.operating_point import (load_operating_point, manual_point, MissionPoint, OperatingPoint,
                                          point_keys, thresholds_for)
from stage_b.judging.earlier_points import check_names_what_it_replaces
from stage_b.rules.point_identity import PointKeys
from stage_b.rules.point_check import OperatingPointError, check_rate
from stage_b.data.settings import MODE_FIELDS, Selection, selection_from
from stage_b.rules.acceptances import recorded as recorded_acceptance
from stage_b.rules.acceptances import words_of
from stage_b.rules.replacement import recomputed_weaker, unaccepted_why
from stage_b.rules.workload import (Pace, day_workload, measured_pace, sentence,
                                    stated_pace)
from stage_b.judging.settings import JudgeError, JudgeSettings, NO_MONITOR, build_parser
from stage_b.judging.verdict_file import Provenance, check_resumable, errors_path, verdict_record, verdicts_path
from stage_b.judging.day_review import day_verdicts, automation_of, page_photo_dirs, print_automation, write_day_review
from stage_b.judging.day_summary import print_gold, print_owner_status
from stage_b.judging.scoring import LazyEngine, score_and_write, prompt_rows
from stage_b.monitoring.monitor_file import load_monitor, withdrawals
from stage_b.monitoring.monitor_format import MonitorFile
from stage_b.rules.withdrawals import recorded


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
                         f"calibrate again in this mode (group-qc evaluate --target_miss_rate R with the same "
                         f"settings)")
    return selection


def _thresholds(settings: JudgeSettings, op: OperatingPoint | None, missions: list[str],
                checkpoints: dict) -> tuple[dict, PointKeys | None]:
    """{mission: decision point} and the operating point's keys (its identity: stage_b.rules.point_identity)."""
    fallback = check_rate(settings.threshold, "--threshold") if settings.threshold is not None else None
    if op is not None:
        points = thresholds_for(op, settings.operating_point, missions, model=checkpoints["model"],
                                adapters=checkpoints["adapters"], fallback=fallback)
        return points, point_keys(settings.operating_point, op)
    if fallback is None:
        raise OperatingPointError("no threshold: pass --operating_point operating_point.json (from group-qc "
                                  "evaluate --target_miss_rate R) or --threshold T")
    return {m: manual_point(fallback) for m in missions}, None


class JudgingDay(NamedTuple):
    """Everything a judging run decides before the model loads."""
    registry: Registry
    selection: Selection
    by_mission: dict[str, list[StageARecord]]   # {mission: [Stage-A record]} (gold groups mixed in)
    missions: list[str]
    checkpoints: dict
    points: dict[str, MissionPoint]   # {mission: decision point}
    point: PointKeys | None   # the operating point's identity and file digest (stage_b.rules.point_identity)
    withdrawn: dict           # {mission: why its promise is withdrawn}
    unmonitored: dict         # {mission: why its certified promise decides nothing without review today}
    unaccepted: dict          # {mission: why its promise, weaker than the replaced one, decides nothing today}
    accepted: tuple           # the missions whose weaker promise the owner accepted in words (--accept_weaker)
    accepted_words: str | None   # the owner's words: --accept_weaker, or the app's acceptance (rules.acceptances)
    shares: dict[str, DayShare]   # {mission: the audit share and inspection state today}
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
    verdicts = day_verdicts(settings.output_dir, day.missions)   # read once for both summaries
    print_owner_status(settings.monitor, day.missions)
    print_gold(settings.gold, settings.gold_share, settings.labels, verdicts)
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
    registry = load_registry()
    gold = load_gold(list(settings.gold), registry) if settings.gold else {}
    op = load_operating_point(settings.operating_point) if settings.operating_point else None
    monitor = None
    if settings.monitor:
        monitor = load_monitor(settings.monitor)
    selection = judging_selection(settings, op)
    by_mission: dict[str, list[StageARecord]] = {}
    for record in load_records(selection, registry, require_label=False):
        by_mission.setdefault(record["mission"], []).append(record)
    missions = [m.name for m in registry.select(selection.missions) if m.name in by_mission]
    if not missions:
        raise JudgeError(f"no Stage-A group to judge for {selection.missions!r} in "
                         f"{selection.stage_a_dir or ', '.join(selection.files)}")
    checkpoints = settings.engine.checkpoints()
    points, point = _thresholds(settings, op, missions, checkpoints)
    if op is not None and point is not None:
        check_names_what_it_replaces(settings.operating_point, op, point, checkpoints, settings.output_dir)
    withdrawn = mission_withdrawals(op, point, monitor, settings.monitor, by_mission, missions,
                                    settings.operating_point, settings.labels)
    # a certified promise with neither a monitor's state nor a reason in words decides nothing today (NO_MONITOR)
    unmonitored = {} if op is None or monitor is not None or settings.no_monitor else \
        {m: NO_MONITOR for m in missions if points[m].certified and m not in withdrawn}
    acceptance = recorded_acceptance(settings.operating_point, point) if op is not None and point else None
    unaccepted, accepted, words = unaccepted_weaker(settings, op, points, missions, withdrawn,
                                                    words_of(acceptance) if acceptance else None)
    seed = settings.audit_seed if settings.audit_seed is not None else \
        recorded_seed(settings.output_dir, missions, settings.overwrite)
    if gold:   # known-answer checks join each mission's day (stage_b.labels.gold)
        mix_gold(gold, by_mission, missions, settings.gold_share, seed,
                 settings.output_dir / PHOTOS_DIR if selection.input_dir else None)
    prompts, unjudgeable = prompt_rows([r for m in missions for r in by_mission[m]], selection, registry)
    if not prompts:   # before the model loads: nothing can be judged (photos in another folder, say)
        raise JudgeError(f"no group can be put to the model; the first: {next(iter(unjudgeable.values()))}")
    shares = day_shares(settings.audit_share, op, point, monitor, settings.monitor, by_mission, missions)
    return JudgingDay(registry, selection, by_mission, missions, checkpoints, points, point, withdrawn,
                      unmonitored, unaccepted, accepted, words, shares, seed, prompts, unjudgeable)


def unaccepted_weaker(settings: JudgeSettings, op: OperatingPoint | None, points: dict, missions: list[str],
                      withdrawn: dict, recorded_words: str | None = None
                      ) -> tuple[dict[str, str], tuple[str, ...], str | None]:
    """({mission: why}, (), None) for the certified missions whose promise is weaker than the replaced one's
    (stage_b.rules.replacement) when the owner has not accepted it in words, else ({}, those missions, the words):
    --accept_weaker's, else the owner's acceptance recorded beside the operating point (`recorded_words`,
    stage_b.rules.acceptances); --accept_weaker with nothing to accept is refused (a flag kept in a script from an
    earlier day must not accept tomorrow's weaker point unseen)."""
    replaces = (op.extra.get("replaces") if op is not None else None)
    try:   # worked out again from the replaced file, never read from the block alone
        weaker = recomputed_weaker(settings.operating_point, op) if op is not None else {}
    except ValueError as exc:
        raise JudgeError(f"{settings.operating_point}: {exc}") from None
    weaker = {m: why for m, why in weaker.items() if m in missions and points[m].certified and m not in withdrawn}
    if settings.accept_weaker:
        if not weaker:
            raise JudgeError(f"--accept_weaker: {settings.operating_point or 'the thresholds given'} promises nothing "
                             f"weaker than an operating point it replaces for the missions judged here; drop the "
                             f"flag")
        return {}, tuple(weaker), settings.accept_weaker
    if not weaker:
        return {}, (), None
    if recorded_words:
        return {}, tuple(weaker), recorded_words
    # a weaker promise is one the operating point given states against the point it replaces (recomputed_weaker)
    assert replaces is not None and settings.operating_point is not None
    old = resolved(replaces["path"], Path(settings.operating_point).parent)   # stored relative to the new file
    return {m: unaccepted_why(why, str(old)) for m, why in weaker.items()}, (), None


def mix_gold(gold: dict, by_mission: dict, missions: list[str], share: float, seed: int,
             photos_dir: Path | None = None) -> None:
    """Known-answer groups added to each judged mission's records; gold of a mission not judged today is named.
    With `photos_dir` (the day has photos on its page), only gold groups whose photos are found are drawn, and theirs
    are copied there so that a gold card shows its photos like any audit card (stage_b.labels.gold); each left out is
    named."""
    left_out = []
    if photos_dir is not None:
        usable: dict[str, list[dict]] = {}
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


def provenance_of(settings: JudgeSettings, day: JudgingDay, mission: str) -> Provenance:
    """What a verdict file's lines record about how they were made (a resume must agree: PROVENANCE)."""
    checkpoints = day.checkpoints
    # the checkpoints named relative to the verdict file (a copied project names its own); what they are is their
    # fingerprints, the keys a resume and the monitor compare
    return {"model": stored(checkpoints["model"]["path"], settings.output_dir),
            "adapters": [stored(a["path"], settings.output_dir) for a in checkpoints["adapters"]],
            "fingerprints": {"model": checkpoints["model"]["fingerprint"],
                             "adapters": [a["fingerprint"] for a in checkpoints["adapters"]]},
            "operating_point": day.point.identity if day.point else None,
            "threshold": day.points[mission].threshold,
            "mode": day.selection.mode, "allow_uncertified": settings.allow_uncertified,
            "reason_citations": settings.engine.reason_citations, "audit_share": day.shares[mission]["share"],
            "inspection": {"state": day.shares[mission]["state"], "why": day.shares[mission]["why"]},
            "audit_seed": day.seed, "withdrawn": day.withdrawn.get(mission),
            "reviewers": list(settings.reviewers) or None,
            "overlap_share": settings.overlap_share if settings.reviewers else None,
            "gold_share": settings.gold_share if settings.gold else None,
            "unmonitored": day.unmonitored.get(mission), "no_monitor": settings.no_monitor,
            "unaccepted": day.unaccepted.get(mission),
            "accepted_weaker": day.accepted_words if mission in day.accepted else None}


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
              + (f"; weaker promise accepted: {day.accepted_words}" if mission in day.accepted else "")
              + (f"; decided without a monitor: {settings.no_monitor}"
                 if settings.no_monitor and point.certified and mission not in day.withdrawn else ""))
        write_jsonl_atomic(errors_path(settings.output_dir, mission), [])   # failed groups are retried now
        if not todo:
            return 0
        model = engine.get()
        t0 = time.perf_counter()
        written = score_and_write(model, day.prompts, day.unjudgeable, todo, point, provenance, path,
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


def mission_withdrawals(op: OperatingPoint | None, point: PointKeys | None, monitor: MonitorFile | None, monitor_path,
                        by_mission: dict[str, list[StageARecord]], missions: list[str], op_path=None,
                        labels_dir=None) -> dict[str, str]:
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
                                f"this Stage-A model (group-qc evaluate --target_miss_rate R)")
    if op_path and point:
        for mission, line in recorded(op_path, point, labels_dir).items():
            if mission in missions and mission not in out:
                out[mission] = (f"{line['why']} (recorded in {line['file']} by the monitor of "
                                f"{line['withdrawn_day'] or line['withdrawn_at']})")
    if monitor is not None and op is not None:
        for mission, why in withdrawals(monitor, monitor_path, op, point).items():
            if mission in missions and mission not in out:
                out[mission] = why
    return out


if __name__ == "__main__":
    sys.exit(main())
