"""The end of a judged day: the share decided without review per mission (automation_of, printed), and the day's review
page: every group to look at, with its photos, route and reason (review.page)."""
from __future__ import annotations

from pathlib import Path

from qc_core.jsonl import OUTPUT_REMEDY, file_sha256, iter_jsonl
from review.page import render_review, report
from stage_b.contract.numbers import fmt_p
from stage_b.contract.verdict import FAIL
from stage_b.judging.settings import NO_MONITOR
from stage_b.judging.verdict_file import verdicts_path
from stage_b.labels.gold import PHOTOS_DIR
from stage_b.pages.cards import JUDGE_OUTCOMES, judge_cards
from stage_b.rules.promise_texts import NO_AUTOMATION
from stage_b.rules.routes import AUDIT, AUTO, route_of_record
from stage_b.rules.workload import Pace, day_workload, stated_pace, table
from stage_b.stats.metrics import wilson


def page_photo_dirs(output_dir: Path, input_dir: str | None) -> list[Path] | None:
    """The folders the day's page shows photos from: the day's --input_dir and, beside it, the gold photo copies
    (none without an --input_dir: no card shows a photo then, a gold card neither)."""
    if not input_dir:
        return None
    return [Path(input_dir)] + ([output_dir / PHOTOS_DIR] if (output_dir / PHOTOS_DIR).is_dir() else [])


def day_verdicts(output_dir: Path, missions: list[str]) -> list[dict]:
    """Every verdict line of the day's missions, in mission order."""
    return [rec for m in missions if verdicts_path(output_dir, m).exists()
            for _, rec in iter_jsonl(verdicts_path(output_dir, m), remedy=OUTPUT_REMEDY)]


def automation_of(output_dir: Path, missions: list[str], verdicts: list[dict] | None = None) -> dict:
    """Per mission and pooled, over every verdict in the files: groups judged, decided without review, the share
    with its 95% Wilson interval, and how many went to review for an ungrounded reason."""
    verdicts = day_verdicts(output_dir, missions) if verdicts is None else verdicts

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
    verdicts = day_verdicts(output_dir, missions)
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
                                  "browser; 'export' downloads decisions-<reviewer>-<day>-<date>.jsonl for "
                                  "group-qc decisions, which turns them into labelled Stage-A files."])
    report(result)
    return result
