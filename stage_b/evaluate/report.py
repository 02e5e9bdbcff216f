"""report.md: the promises, the verdict line as the model wrote it, grounding, calibration and the operating point,
every figure saying what it measures."""
from __future__ import annotations

import html

from qc_core.records import image_key

from stage_b.contract.numbers import fmt_distinct, fmt_p, pct1
from stage_b.rules.promise_texts import family_text
from stage_b.stats.thresholds import picks_at
from stage_b.rules.replacement import side_by_side_lines
from stage_b.contract.verdict import FAIL, parse
from stage_b.evaluate.predictions import Prediction

CURVE_TARGETS = (0.0, 0.05, 0.1, 0.2)   # report.md: overkill at these miss-rate targets, per mission


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"

def _md(text) -> str:
    """Data as Markdown text: never markup (a viewer that renders HTML must not run a group id or a reason), never a
    table cell break, never a line break."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ⏎ ").replace("\r", " ")

def _md_items(by_name: dict):
    """(escaped name, value) pairs of a per-mission dict, for report.md."""
    return [(_md(name), value) for name, value in by_name.items()]

def render_report(metrics: dict, predictions: list[Prediction], title: str, max_cases: int = 5,
                  picks: dict | None = None) -> str:
    """report.md. `picks`: curve_picks of the metrics' curve (computed once, by write_outputs)."""
    data = metrics.get("data") or {}
    lines = [f"# Verdict evaluation: {_md(title)}", ""]
    if metrics.get("review"):
        lines += ["Review page, each group with its photos: [review/index.html](review/index.html)", ""]
    if data:
        lines += [f"Data: the {data['split']} split, {_md(data['split_settings'])}"
                  + (f"; training run {_md(data['run'])}" if data.get("run") else "; no training run recorded") + ".",
                  "", f"The model read: {data.get('mode_settings', 'summaries only')}.", ""]
        if data.get("reason_citations"):
            lines += [f"Reason citations: {data['reason_citations']}"
                      + (" (after 不通过 the reason starts with every photo whose summary shows a defect, as the judge "
                         "writes it)." if data["reason_citations"] == "guided" else " (the model cites).") , ""]
    if data.get("train_overlap"):
        lines += [f"**WARNING: {data['train_overlap']} of these groups were in the training run's train split "
                  f"(--allow_train_overlap): these numbers overstate held-out quality.**", ""]
    lines += render_promises(metrics)
    lines += ["## The verdict line as the model wrote it", "",
              "These score the reply's first line as generated (the model's own choice, every group), not the "
              "operating point: the promises above and the operating point below score p_fail against each "
              "mission's thresholds, which is how the judge decides, so the two can differ (a mission can miss every "
              "defective group here and keep a certified miss rate there). "
              "Miss = a defective (审核不通过) group not judged 不通过: judged 通过, or an unparseable reply (nothing "
              "failed it, and evaluation routes nothing to review); overkill = a good (审核通过) group judged 不通过. "
              "Unparseable verdicts count as wrong and are listed separately. Brackets: 95% Wilson intervals.", "",
              "| mission | n | accuracy | miss rate (verdict line) | overkill rate (verdict line) | balanced acc. "
              "| fail recall | fail precision | format | invalid |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in [*_md_items(metrics["per_mission"]), ("**overall**", metrics["overall"])]:
        lines.append(f"| {name} | {m['n']} | {pct1(m['accuracy'])} {_ci(m['accuracy_ci95'])} | "
                     f"{pct1(m['miss_rate'])} {_ci(m['miss_rate_ci95'])} | {pct1(m['overkill_rate'])} "
                     f"{_ci(m['overkill_rate_ci95'])} | {pct1(m['balanced_accuracy'])} | {pct1(m['fail_recall'])} | "
                     f"{pct1(m['fail_precision'])} | {pct1(m['format_compliance'])} | {m['invalid_verdicts']} |")
    lines += render_grounding(metrics)
    not_judged = [p for p in predictions if p.get("error")]
    if not_judged:
        lines += ["", f"**{len(not_judged)} group(s) could not be put to the model** (counted wrong, as invalid):", ""]
        lines += [f"- {_md(p['error'])}" for p in not_judged]
    for name, m in metrics["per_mission"].items():
        lines += render_mission(name, m, predictions, max_cases)
    lines += render_operating(metrics, picks or {})
    lines += render_calibration(metrics)
    return "\n".join(lines) + "\n"

def render_mission(name: str, m: dict, predictions: list[Prediction], max_cases: int) -> list[str]:
    """A mission's section: its confusion table and up to `max_cases` misses to review, each with its summaries."""
    c = m["confusion"]
    lines = ["", f"## {_md(name)}", "", f"n = {m['n']}" + (" (no validation groups)" if m["n"] == 0 else ""), "",
             "| expected \\ predicted | 通过 | 不通过 | invalid |", "|---|---|---|---|",
             f"| 通过 | {c['通过->通过']} | {c['通过->不通过']} | {c['通过->invalid']} |",
             f"| 不通过 | {c['不通过->通过']} | {c['不通过->不通过']} | {c['不通过->invalid']} |"]
    misses = [p for p in predictions if p["mission"] == name and p["expected"] == FAIL and p["predicted"] != FAIL]
    misses.sort(key=lambda p: (p["predicted"] is None, p["rewards"]["qc_consistency"]))
    if misses:
        unparseable = sum(p["predicted"] is None for p in misses)
        lines += ["", f"Misses to review ({len(misses)}" + (f", {unparseable} of them unparseable replies"
                                                             if unparseable else "")
                  + f", showing up to {max_cases}):"]
    for p in misses[:max_cases]:
        parsed = parse(p["completion"])
        reason = parsed.reason or (p["completion"] or "").strip().replace("\n", " ⏎ ")[:200]
        lines += ["", f"- **{_md(p['group_id'])}**: judged {p['predicted'] or 'unparseable'}; "
                      f"reason: {_md(reason)}"]
        lines += [f"  - {image_key(i)}: {_md(s)}" for i, s in enumerate(p["summaries"], start=1)]
    return lines


def render_promises(metrics: dict) -> list[str]:
    """report.md's first section with an operating point: each mission's promise in one sentence."""
    op = metrics.get("operating_point")
    if not op:
        return []
    lines = [f"## Promises (confidence {pct1(op['confidence'])}, exact one-sided Clopper-Pearson bounds; audited "
             f"groups weighted by 1 / their audit probability, Korn-Graubard effective counts)", ""]
    for name, e in _md_items(op["missions"]):
        lines.append(f"- **{name}**: {e['promise']}" + (f"; {e['overkill_promise']}" if e.get("overkill_promise")
                                                        else ""))
        escape = e.get("escape")
        if escape and escape["auto_passed"]:
            lines.append(f"  - escape rate of auto-passed groups (what a blind audit measures): {escape['escapes']} "
                         f"defective of {escape['auto_passed']} auto-passed, upper bound {pct1(escape['upper'])}")
        if e.get("left_out"):
            lines.append("  - left out of the bound (not a fair sample of the mission's work, still training labels): "
                         + "; ".join(f"{n} {why}" for why, n in e["left_out"].items()))
    if op.get("family"):
        targets = [e["target_miss_rate"] for e in op["missions"].values() if e.get("target_miss_rate")]
        lines += ["", f"All together: {family_text(op['family'], min(targets, default=None))}."]
    for name, w in _md_items(metrics.get("replaced_withdrawals") or {}):   # what now, where the owner looks
        lines += ["", f"- **{name}** was withdrawn at the point this one replaces on {_md(str(w['day']))} "
                      f"({_md(str(w['at']))}) because {_md(str(w['why']))}; {w['labels_after']} of the groups scored "
                      f"here were decided by reviewers after the withdrawal"
                      + ("" if w["labels_after"] else ": none, so this re-certification rests on evidence from before "
                         "it; the judge keeps the mission withdrawn until a point certified on later labels replaces "
                         "it")]
    if op.get("replaces"):
        lines += ["", *side_by_side_lines(op["replaces"])]
    a = op["automation"]
    lines += ["", f"Decided without review on these {op.get('evidence', 'validation')} groups: "
                  f"{a['validation_auto_decided']} of "
                  f"{a['validation_groups']} ({pct1(a['automation_share'])} {_ci(a['automation_share_ci95'])}); "
                  f"a mission that is not certified is never decided without review.", ""]
    return lines

def render_grounding(metrics: dict) -> list[str]:
    """report.md's reason-grounding table (stage_b.contract.grounding)."""
    rows = [*_md_items(metrics["per_mission"]), ("**overall**", metrics["overall"])]
    if not all("reason_contradiction_rate" in m for _, m in rows):
        return []
    lines = ["", "Reasons (stage_b.contract.grounding): a contradiction is a 不通过 whose reason names no defect and "
             "cites no "
                 "photo whose summary shows one, or a 通过 whose reason names a defect or cites such a photo; citation "
                 "precision is the share of the photos 不通过 reasons cite that show a defect (a photo number the "
                 "group does not have is wrong), recall the share of defect photos they cite.", "",
             "| mission | two-line replies | contradiction rate | citation precision | citation recall "
             "| cite 图片_1 alone |", "|---|---|---|---|---|---|"]
    for name, m in rows:
        c = m["grounding_counts"]
        lines.append(f"| {name} | {c['two_line_replies']} | {pct1(m['reason_contradiction_rate'])} "
                     f"({c['contradictions']}) | {pct1(m['citation_precision'])} ({c['citations_showing_defect']}/"
                     f"{c['citations']}) | {pct1(m['citation_recall'])} ({c['defect_photos_cited']}/"
                     f"{c['defect_photos']}) | {c['replies_citing_only_photo_1']} |")
    return lines

def render_calibration(metrics: dict) -> list[str]:
    cal = metrics.get("calibration")
    if not cal:
        return []
    lines = ["", "## Calibration of p_fail", "", "![reliability diagram](reliability.png)", "",
             f"p_fail in {cal['bins']} equal-width bins against the share of groups reviewers failed; ECE = the "
             f"groups-weighted mean gap (stage_b.stats.calibration).", "", "| mission | n | ECE |", "|---|---|---|"]
    for name, r in [*_md_items(cal["per_mission"]), ("**overall**", cal["overall"])]:
        ece = "n/a" if r["ece"] is None else f"{r['ece']:.3f}"
        lines.append(f"| {name} | {r['n']} | {ece} |")
    return lines

def curve_picks(curves: dict | None) -> dict:
    """{row name: picks_at(points, CURVE_TARGETS)} for each mission of the curve and the pooled row: what the curve
    table shows."""
    if not curves:
        return {}
    return {**{name: picks_at(points, CURVE_TARGETS) for name, points in _md_items(curves["points"])},
            "**overall**": picks_at(curves["overall_points"], CURVE_TARGETS)}


def render_operating(metrics: dict, picks: dict) -> list[str]:
    """report.md's threshold sections: the curve summarised at a few miss-rate targets (`picks`: curve_picks), and
    the operating point."""
    curves = metrics.get("operating_curve")
    if not curves:
        return []
    lines = ["", "## Miss rate against overkill rate over thresholds", "",
             "![miss/overkill curve](operating_curve.png)", "",
             "Verdict 不通过 iff p_fail >= t (p_fail: the model's probability of 不通过 against 通过 "
             "as the first line, "
             "from both lines' token log-probabilities). For each miss-rate target, the threshold the point rule "
             "picks on these groups (the largest p_fail, or 1.0, whose measured miss rate is within the target: no "
             "confidence, see the operating point for a certified one) and the overkill rate it costs. The whole "
             "curve is in metrics.json (`operating_curve`).", "",
             "| mission | " + " | ".join(f"miss <= {100 * r:.0f}%" for r in CURVE_TARGETS) + " |",
             "|---|" + "---|" * len(CURVE_TARGETS)]
    for name, at_targets in picks.items():
        cells = []
        for (t, at), shown in zip(at_targets, fmt_distinct([t for t, _ in at_targets])):
            cells.append("n/a (no fail group)" if at is None else
                         f"t={shown}: miss {pct1(at['miss_rate'])}, overkill {pct1(at['overkill_rate'])}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if curves.get("groups_without_p_fail"):
        lines += ["", f"{curves['groups_without_p_fail']} group(s) have no p_fail (they could not be scored) "
                      f"and are not on the curve or in the operating point."]
    op = metrics.get("operating_point")
    if op:
        lines += ["", "## Operating point (operating_point.json)", "",
                  f"Picked on these {op.get('evidence', 'validation')} groups at "
                  f"{pct1(op['confidence'])} confidence (stage_b.rules.operating_point states the rule). A judged "
                  f"group is "
                  f"auto-通过 when p_fail < the threshold, auto-不通过 when p_fail >= the fail threshold, and goes to "
                  f"review otherwise, when p_fail is within the review margin of the threshold (it covers "
                  f"{100 * op['review_share']:.0f}% of the errors made here), or when its mission is not certified.",
                  "",
                  "| mission | target miss | certified | threshold | fail threshold | n (fail/pass) | miss rate at the "
                  "threshold (upper) | overkill rate at the threshold | review margin | decided without review |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name, e in [*_md_items(op["missions"]),
                        *([("**overall (pooled)**", op["overall"])] if op["overall"] else [])]:
            certified = "yes" if e["certified"] else f"no: {e.get('fail_groups_needed') or '∞'} fail groups needed"
            if "missions_certified" in e:   # the pooled row: one bound over all missions, not a promise for each
                k, n = e["missions_certified"]
                certified = (f"pooled bound only: {'yes' if e['certified'] else 'no'}; missions certified on their "
                             f"own: {k} of {n}")
            auto = (f"{e['validation_auto_decided']}/{e['n']} ({pct1(e['automation_share'])})"
                    if "validation_auto_decided" in e else "")
            if e.get("threshold") is None:
                lines.append(f"| {name} | {pct1(e['target_miss_rate'])} | {certified} | none: {e['why_none']} | | "
                             f"{e['n']} | | | | {auto} |")
                continue
            shown_t, shown_fail = fmt_distinct([e["threshold"], e.get("threshold_fail")])
            t_fail = "none (nothing auto-fails)" if e.get("threshold_fail") is None else shown_fail
            lines.append(f"| {name} | {pct1(e['target_miss_rate'])} | {certified} | {shown_t} | "
                         f"{t_fail} | {e['n']} ({e['n_fail']}/{e['n_pass']}) | {pct1(e['miss_rate'])} "
                         f"({pct1(e['miss_rate_upper'])}) | "
                         f"{pct1(e['overkill_rate'])} {_ci(e['overkill_rate_ci95'])} | "
                         f"{fmt_p(e['review_margin'])} | {auto} |")
    return lines
