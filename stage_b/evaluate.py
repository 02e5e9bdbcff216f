"""`python -m stage_b.evaluate`: held-out verdict quality per mission.

    python -m stage_b.evaluate --model DIR [--adapters RUN/checkpoint-N] [--stage_a_dir DIR] [--mission all]
                               [--split val] --output_dir DIR [--overwrite]
    python -m stage_b.evaluate --predictions predictions.jsonl --output_dir DIR   # re-score, no model
    python -m stage_b.evaluate --predictions swift_infer_result.jsonl --output_dir DIR
        # score `swift infer --external_plugins swift_plugins/qc_plugin.py --val_dataset group_qc_val
        # --result_path swift_infer_result.jsonl` (or group_qc_val rows carrying `swift deploy` chat completions)

Generates greedy verdicts for the split (the same group-id hash split as training) through an ms-swift
engine, in batches, and writes predictions.jsonl, metrics.json and report.md (stage_b.metrics). Each
prediction also carries p_fail, the model's probability of 不通过 against 通过 as the first line
(stage_b.operating_point), and metrics.json, report.md and operating_curve.png give the miss/overkill
curve over thresholds. With --target_miss_rate R (plus MISSION=R overrides) on the validation split,
operating_point.json holds each mission's threshold for `python -m stage_b.judge`.

Given an adapter from a GRPO run, the run's group_qc_run.json supplies the Stage-A input, missions and
split unless a flag or GROUP_QC_* variable says otherwise, and any group the run trained on is refused
(--allow_train_overlap scores it anyway and the report says so).
"""
from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import sys
import time
from pathlib import Path

from qc_core.checkpoints import add_model_type_args
from qc_core.exits import run_cli
from review.page import REVIEW_DIR
from qc_core.jsonl import JsonlError, file_sha256, iter_jsonl, write_jsonl_atomic
from qc_core.records import image_key

from .calibration import calibration
from .certify import DEFAULT_CONFIDENCE, check_confidence
from .dataset import build_rows, group_files, load_records, row_mode, stage_a_files
from .grounding import REASON_CITATIONS, ground, guided_reply
from .metrics import compute_metrics
from .operating_point import (DEFAULT_REVIEW_SHARE, OperatingPointError, build_operating_point, check_rate,
                              checkpoint_identities, curve, family_text, fmt_distinct, fmt_p, p_fail, parse_targets,
                              pick_threshold, points_of, rates_at, stage_a_identity)
from .rewards import REWARDS
from .routes import evidence_weight, why_not_fair
from .run_record import run_selection, selection_for, stage_a_changes, train_overlap
from .settings import Selection, add_selection_args
from .verdict import FAIL, PASS, parse

PREDICTION_FIELDS = ("group_id", "mission", "expected", "completion", "summaries")
OUTPUTS = ("predictions.jsonl", "metrics.json", "report.md", "operating_curve.png", "reliability.png",
           "operating_point.json", "review")
CURVE_TARGETS = (0.0, 0.05, 0.1, 0.2)   # report.md: overkill at these miss-rate targets, per mission
HELD_OUT = "held_out"   # --split: every group the training run did not train on


class EvaluationError(ValueError):
    pass


def score_prediction(group_id, mission, expected, completion, summaries, error: str | None = None,
                     p_fail: float | None = None, mode: str | None = None) -> dict:
    """One predictions.jsonl record: the verdict read from the completion, every reward, the reason's grounding
    (stage_b.grounding: photos cited, photos whose summary shows a defect, contradiction, wrong citations), and
    p_fail when the verdict probabilities were scored. A group the model could not be asked about has an empty
    completion and its `error`: no verdict, no p_fail, counted wrong."""
    kwargs = {"solution": [expected], "summaries": [summaries], "mission": [mission]}
    g = ground(completion, summaries, mission)
    record = {"group_id": group_id, "mission": mission, "expected": expected, "predicted": parse(completion).verdict,
              "completion": completion, "rewards": {name: func([completion], **kwargs)[0]
                                                    for name, func in REWARDS.items()},
              "grounding": {"cited": list(g.cited), "defect_photos": list(g.defect_photos),
                            "contradiction": g.contradiction, "wrong_citations": list(g.wrong_citations)},
              "summaries": summaries}
    if mode:   # what the model read: summaries, or summaries+photos (photo-aware Stage-B)
        record["mode"] = mode
    if p_fail is not None:
        record["p_fail"] = p_fail
    return {**record, "error": error} if error else record


def predictions_from_rows(rows: list[dict], completions: list[str], errors: dict[int, str] | None = None,
                          p_fails: list[float | None] | None = None) -> list[dict]:
    errors = errors or {}
    return [score_prediction(r["group_id"], r["mission"], r["solution"], c, r["summaries"], errors.get(i),
                             None if errors.get(i) or not p_fails else p_fails[i], row_mode(r))
            for i, (r, c) in enumerate(zip(rows, completions))]


# What --predictions reads, told apart by the first record: our own predictions.jsonl; `swift infer --val_dataset
# group_qc_val --result_path F` (ms-swift's infer pipeline writes {"response", "labels", "logprobs", **row} with the
# plugin's row columns messages, solution, mission, group_id, summaries, plus "dataset"); or group_qc rows each
# carrying an OpenAI-style chat completion from `swift deploy` (under "response", or its "choices" merged in).
OURS, SWIFT_INFER, OPENAI = "group-qc predictions", "ms-swift infer results", "OpenAI chat completions (swift deploy)"
DATASET_FIELDS = ("group_id", "mission", "solution", "summaries")   # a group_qc_val row's columns we need


def _format_of(rec: dict) -> str | None:
    if "completion" in rec or "expected" in rec:
        return OURS
    if "infer_request" in rec:
        return "swift deploy request log"
    if isinstance(rec.get("response"), dict) or "choices" in rec:
        return OPENAI
    if "response" in rec:
        return SWIFT_INFER
    return None


def _chat_text(rec: dict):
    """The reply in an OpenAI chat completion (choices[0].message.content), or None."""
    body = rec["response"] if isinstance(rec.get("response"), dict) else rec
    try:
        return body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def _as_ours(rec: dict, fmt: str, where: str) -> dict:
    """A record of any readable format as our prediction fields (group_id, mission, expected, completion,
    summaries[, p_fail, error])."""
    if fmt == OURS:
        missing = [f for f in PREDICTION_FIELDS if f not in rec]
        if missing:
            raise EvaluationError(f"{where}: missing field(s) {', '.join(missing)}; expected "
                                  f"{', '.join(PREDICTION_FIELDS)}")
        return rec
    missing = [f for f in DATASET_FIELDS if f not in rec]
    if missing:
        raise EvaluationError(f"{where}: {fmt} record without {', '.join(missing)}; each line must carry a "
                              f"group_qc dataset row's {', '.join(DATASET_FIELDS)} (solution: the expected verdict), "
                              f"as `swift infer --external_plugins swift_plugins/qc_plugin.py --val_dataset "
                              f"group_qc_val --result_path FILE` writes them")
    text = rec["response"] if fmt == SWIFT_INFER else _chat_text(rec)
    if not isinstance(text, str):
        raise EvaluationError(f"{where}: no reply text in this {fmt} record (expected "
                              + ("a string under response" if fmt == SWIFT_INFER else
                                 "choices[0].message.content, under response or at the top level") + ")")
    return {"group_id": rec["group_id"], "mission": rec["mission"], "expected": rec["solution"],
            "completion": text, "summaries": rec["summaries"], "mode": row_mode(rec)}   # the row's images column


def read_prediction_file(path: Path) -> tuple[list[dict], str]:
    """Re-scored predictions from a file (verdicts and rewards recomputed from the raw completions), and which
    tool wrote it (OURS, SWIFT_INFER or OPENAI, told by the first record; every record must match it)."""
    if not path.is_file():
        raise EvaluationError(f"predictions file {path} does not exist")
    try:
        records = list(iter_jsonl(path, allow_torn_tail=False))
    except JsonlError as exc:
        raise EvaluationError(f"{exc} (a torn last line means the run that wrote it was killed: rerun "
                              f"evaluate with the model)") from None
    out, seen, first = [], {}, None
    from qc_core.missions import load_registry
    registry = load_registry()
    for line_no, rec in records:
        fmt = _format_of(rec)
        if fmt is None or fmt == "swift deploy request log":
            raise EvaluationError(
                f"{path}:{line_no}: not a predictions record: " + (
                    "swift deploy's --result_path log has no group id or expected verdict; score with `swift infer "
                    "--val_dataset group_qc_val --result_path FILE`, or save each group_qc_val row with its chat "
                    "completion under response" if fmt else
                    f"expected {', '.join(PREDICTION_FIELDS)} (stage_b.evaluate), or response and "
                    f"{', '.join(DATASET_FIELDS)} (swift infer --val_dataset group_qc_val --result_path)"))
        if first is None:
            first = fmt
        elif fmt != first:
            raise EvaluationError(f"{path}:{line_no}: a record of {fmt}, but line {records[0][0]} is {first}: a "
                                  f"file mixing formats (two tools writing one file?) is not scored; keep one format")
        rec = _as_ours(rec, fmt, f"{path}:{line_no}")
        rec = {**rec, "mission": _checked_row(rec, f"{path}:{line_no}", registry)}
        key = (rec["mission"], rec["group_id"])
        if key in seen:   # counted twice, it would weigh twice in every rate
            raise EvaluationError(f"{path}:{line_no}: group {rec['group_id']} of {rec['mission']} already at line "
                                  f"{seen[key]}; keep one prediction per group"
                                  + ("; swift infer appends to an existing --result_path: delete the file before "
                                     "rerunning" if fmt == SWIFT_INFER else ""))
        seen[key] = line_no
        p_fail = rec.get("p_fail")
        if p_fail is not None:
            if isinstance(p_fail, bool) or not isinstance(p_fail, (int, float)):
                raise EvaluationError(f"{path}:{line_no}: p_fail {p_fail!r} is not a number; a prediction's p_fail is "
                                      f"a probability from 0 to 1, or absent")
            try:
                p_fail = check_rate(p_fail, "p_fail")
            except OperatingPointError as exc:
                raise EvaluationError(f"{path}:{line_no}: {exc}") from None
        out.append(score_prediction(rec["group_id"], rec["mission"], rec["expected"], rec["completion"],
                                    rec["summaries"], rec.get("error"), p_fail, rec.get("mode")))
    return out, first or OURS


def _checked_row(rec: dict, where: str, registry) -> str:
    """A prediction row's types and mission (the canonical name of a known mission, so an alias and its name are one
    mission); EvaluationError naming the line and the field otherwise."""
    from qc_core.missions import MissionError
    if not isinstance(rec["group_id"], str) or not rec["group_id"]:
        raise EvaluationError(f"{where}: group_id must be a non-empty string, got {rec['group_id']!r}")
    if rec["expected"] not in (PASS, FAIL):
        raise EvaluationError(f"{where}: expected must be 通过 or 不通过, got {rec['expected']!r}")
    if not isinstance(rec["completion"], str):
        raise EvaluationError(f"{where}: completion must be the model's reply as text, got "
                              f"{type(rec['completion']).__name__} {str(rec['completion'])[:40]!r}")
    if not isinstance(rec["summaries"], list) or not all(isinstance(x, str) for x in rec["summaries"]):
        raise EvaluationError(f"{where}: summaries must be a list of texts (图片_1, 图片_2, …)")
    try:
        return registry.resolve(rec["mission"] if isinstance(rec["mission"], str) else "").name
    except MissionError as exc:
        raise EvaluationError(f"{where}: {exc}") from None


def read_predictions(path: Path) -> list[dict]:
    """Re-scored predictions from a file of any format read_prediction_file reads."""
    return read_prediction_file(path)[0]


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _md(text) -> str:
    """Data as Markdown text: never markup (a viewer that renders HTML must not run a group id or a reason), never a
    table cell break, never a line break."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ⏎ ").replace("\r", " ")


def _md_items(by_name: dict):
    """(escaped name, value) pairs of a per-mission dict, for report.md."""
    return [(_md(name), value) for name, value in by_name.items()]


def render_report(metrics: dict, predictions: list[dict], title: str, max_cases: int = 5) -> str:
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
        lines.append(f"| {name} | {m['n']} | {_pct(m['accuracy'])} {_ci(m['accuracy_ci95'])} | "
                     f"{_pct(m['miss_rate'])} {_ci(m['miss_rate_ci95'])} | {_pct(m['overkill_rate'])} "
                     f"{_ci(m['overkill_rate_ci95'])} | {_pct(m['balanced_accuracy'])} | {_pct(m['fail_recall'])} | "
                     f"{_pct(m['fail_precision'])} | {_pct(m['format_compliance'])} | {m['invalid_verdicts']} |")
    lines += render_grounding(metrics)
    not_judged = [p for p in predictions if p.get("error")]
    if not_judged:
        lines += ["", f"**{len(not_judged)} group(s) could not be put to the model** (counted wrong, as invalid):", ""]
        lines += [f"- {_md(p['error'])}" for p in not_judged]
    for name, m in metrics["per_mission"].items():
        c = m["confusion"]
        lines += ["", f"## {_md(name)}", "", f"n = {m['n']}" + (" (no validation groups)" if m["n"] == 0 else ""), "",
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
            lines += ["", f"- **{_md(p['group_id'])}**: judged {p['predicted'] or 'unparseable'}; reason: {_md(reason)}"]
            lines += [f"  - {image_key(i)}: {_md(s)}" for i, s in enumerate(p["summaries"], start=1)]
    lines += render_operating(metrics)
    lines += render_calibration(metrics)
    return "\n".join(lines) + "\n"


def render_promises(metrics: dict) -> list[str]:
    """report.md's first section with an operating point: each mission's promise in one sentence."""
    op = metrics.get("operating_point")
    if not op:
        return []
    lines = [f"## Promises (confidence {_pct(op['confidence'])}, exact one-sided Clopper-Pearson bounds; audited "
             f"groups weighted by 1 / their audit probability, Korn-Graubard effective counts)", ""]
    for name, e in _md_items(op["missions"]):
        lines.append(f"- **{name}**: {e['promise']}" + (f"; {e['overkill_promise']}" if e.get("overkill_promise")
                                                        else ""))
        escape = e.get("escape")
        if escape and escape["auto_passed"]:
            lines.append(f"  - escape rate of auto-passed groups (what a blind audit measures): {escape['escapes']} "
                         f"defective of {escape['auto_passed']} auto-passed, upper bound {_pct(escape['upper'])}")
        if e.get("left_out"):
            lines.append("  - left out of the bound (not a fair sample of the mission's work, still training labels): "
                         + "; ".join(f"{n} {why}" for why, n in e["left_out"].items()))
    if op.get("family"):
        lines += ["", f"All together: {family_text(op['family'])}."]
    a = op["automation"]
    lines += ["", f"Decided without review on these {op.get('evidence', 'validation')} groups: "
                  f"{a['validation_auto_decided']} of "
                  f"{a['validation_groups']} ({_pct(a['automation_share'])} {_ci(a['automation_share_ci95'])}); "
                  f"a mission that is not certified is never decided without review.", ""]
    return lines


def render_grounding(metrics: dict) -> list[str]:
    """report.md's reason-grounding table (stage_b.grounding)."""
    rows = [*_md_items(metrics["per_mission"]), ("**overall**", metrics["overall"])]
    if not all("reason_contradiction_rate" in m for _, m in rows):
        return []
    lines = ["", "Reasons (stage_b.grounding): a contradiction is a 不通过 whose reason names no defect and cites no "
                 "photo whose summary shows one, or a 通过 whose reason names a defect or cites such a photo; citation "
                 "precision is the share of the photos 不通过 reasons cite that show a defect (a photo number the "
                 "group does not have is wrong), recall the share of defect photos they cite.", "",
             "| mission | two-line replies | contradiction rate | citation precision | citation recall "
             "| cite 图片_1 alone |", "|---|---|---|---|---|---|"]
    for name, m in rows:
        c = m["grounding_counts"]
        lines.append(f"| {name} | {c['two_line_replies']} | {_pct(m['reason_contradiction_rate'])} "
                     f"({c['contradictions']}) | {_pct(m['citation_precision'])} ({c['citations_showing_defect']}/"
                     f"{c['citations']}) | {_pct(m['citation_recall'])} ({c['defect_photos_cited']}/"
                     f"{c['defect_photos']}) | {c['replies_citing_only_photo_1']} |")
    return lines


def render_calibration(metrics: dict) -> list[str]:
    cal = metrics.get("calibration")
    if not cal:
        return []
    lines = ["", "## Calibration of p_fail", "", "![reliability diagram](reliability.png)", "",
             f"p_fail in {cal['bins']} equal-width bins against the share of groups reviewers failed; ECE = the "
             f"groups-weighted mean gap (stage_b.calibration).", "", "| mission | n | ECE |", "|---|---|---|"]
    for name, r in [*_md_items(cal["per_mission"]), ("**overall**", cal["overall"])]:
        ece = "n/a" if r["ece"] is None else f"{r['ece']:.3f}"
        lines.append(f"| {name} | {r['n']} | {ece} |")
    return lines


def render_operating(metrics: dict) -> list[str]:
    """report.md's threshold sections: the curve summarised at a few miss-rate targets, and the operating point."""
    curves = metrics.get("operating_curve")
    if not curves:
        return []
    lines = ["", "## Miss rate against overkill rate over thresholds", "",
             "![miss/overkill curve](operating_curve.png)", "",
             "Verdict 不通过 iff p_fail >= t (p_fail: the model's probability of 不通过 against 通过 as the first line, "
             "from both lines' token log-probabilities). For each miss-rate target, the threshold the point rule "
             "picks on these groups (the largest p_fail, or 1.0, whose measured miss rate is within the target: no "
             "confidence, see the operating point for a certified one) and the overkill rate it costs. The whole "
             "curve is in metrics.json (`operating_curve`).", "",
             "| mission | " + " | ".join(f"miss <= {100 * r:.0f}%" for r in CURVE_TARGETS) + " |",
             "|---|" + "---|" * len(CURVE_TARGETS)]
    for name, points in [*_md_items(curves["points"]), ("**overall**", curves["overall_points"])]:
        cells = []
        picked = [pick_threshold([tuple(pt) for pt in points], target) for target in CURVE_TARGETS]
        for t, shown in zip(picked, fmt_distinct(picked)):
            at = rates_at([tuple(pt) for pt in points], t) if t is not None else None
            cells.append("n/a (no fail group)" if at is None else
                         f"t={shown}: miss {_pct(at['miss_rate'])}, overkill {_pct(at['overkill_rate'])}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if curves.get("groups_without_p_fail"):
        lines += ["", f"{curves['groups_without_p_fail']} group(s) have no p_fail (they could not be scored) and are not "
                      f"on the curve or in the operating point."]
    op = metrics.get("operating_point")
    if op:
        lines += ["", "## Operating point (operating_point.json)", "",
                  f"Picked on these {op.get('evidence', 'validation')} groups at "
                  f"{_pct(op['confidence'])} confidence (stage_b.operating_point states the rule). A judged group is "
                  f"auto-通过 when p_fail < the threshold, auto-不通过 when p_fail >= the fail threshold, and goes to "
                  f"review otherwise, when p_fail is within the review margin of the threshold (it covers "
                  f"{100 * op['review_share']:.0f}% of the errors made here), or when its mission is not certified.", "",
                  "| mission | target miss | certified | threshold | fail threshold | n (fail/pass) | miss rate at the "
                  "threshold (upper) | overkill rate at the threshold | review margin | decided without review |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, e in [*_md_items(op["missions"]), *([("**overall (pooled)**", op["overall"])] if op["overall"] else [])]:
            certified = "yes" if e["certified"] else f"no: {e.get('fail_groups_needed') or '∞'} fail groups needed"
            if "missions_certified" in e:   # the pooled row: one bound over all missions, not a promise for each
                k, n = e["missions_certified"]
                certified = (f"pooled bound only: {'yes' if e['certified'] else 'no'}; missions certified on their "
                             f"own: {k} of {n}")
            auto = (f"{e['validation_auto_decided']}/{e['n']} ({_pct(e['automation_share'])})"
                    if "validation_auto_decided" in e else "")
            if e.get("threshold") is None:
                lines.append(f"| {name} | {_pct(e['target_miss_rate'])} | {certified} | none: {e['why_none']} | | "
                             f"{e['n']} | | | | {auto} |")
                continue
            shown_t, shown_fail = fmt_distinct([e["threshold"], e.get("threshold_fail")])
            t_fail = "none (nothing auto-fails)" if e.get("threshold_fail") is None else shown_fail
            lines.append(f"| {name} | {_pct(e['target_miss_rate'])} | {certified} | {shown_t} | "
                         f"{t_fail} | {e['n']} ({e['n_fail']}/{e['n_pass']}) | {_pct(e['miss_rate'])} "
                         f"({_pct(e['miss_rate_upper'])}) | {_pct(e['overkill_rate'])} {_ci(e['overkill_rate_ci95'])} | "
                         f"{fmt_p(e['review_margin'])} | {auto} |")
    return lines


def operating_curves(predictions: list[dict], missions: list[str]) -> dict | None:
    """metrics.json's `operating_curve`: per mission and pooled, the curve and the (p_fail, expected) points it
    comes from (so it can be recomputed); None when no prediction has a p_fail."""
    by_mission = points_of(predictions)
    if not by_mission:
        return None
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    return {"per_mission": {m: curve(by_mission.get(m, [])) for m in missions}, "overall": curve(pooled),
            "points": {m: by_mission.get(m, []) for m in missions}, "overall_points": pooled,
            "groups_without_p_fail": sum(p.get("p_fail") is None for p in predictions)}


def write_outputs(output_dir: Path, predictions: list[dict], missions: list[str], title: str,
                  data: dict | None = None, checkpoints: dict | None = None, targets: dict | None = None,
                  review_share: float = DEFAULT_REVIEW_SHARE, resolve=None, review: dict | None = None,
                  source: dict | None = None, confidence: float = DEFAULT_CONFIDENCE,
                  overkill_targets: dict | None = None, stage_a: dict | None = None,
                  family_wise: bool = False) -> dict:
    """metrics.json, report.md, predictions.jsonl, and with p_fail the curve and reliability PNGs; with `targets`
    (and `overkill_targets`), operating_point.json certified at `confidence`; with `review` ({"records",
    "input_dirs", "all"}) the review page; `source` (re-scoring: the file and which tool wrote it) goes into
    metrics.json. Everything is computed before the first file is written."""
    metrics = compute_metrics(predictions, missions)
    if source:
        metrics["rescored"] = source
    if data:
        metrics["data"] = data   # which groups were scored, and why these
    if checkpoints:
        metrics["checkpoints"] = checkpoints   # which model made the predictions (operating points name it)
    curves = operating_curves(predictions, list(metrics["per_mission"]))
    if curves:
        metrics["operating_curve"] = curves
        metrics["calibration"] = calibration(points_of(predictions), list(metrics["per_mission"]))
    op = None
    if targets:
        if not curves:
            raise EvaluationError("--target_miss_rate needs p_fail in the predictions, and none has one")
        op = build_operating_point(predictions, list(metrics["per_mission"]), targets, review_share=review_share,
                                   model=checkpoints["model"], adapters=checkpoints["adapters"], data=data,
                                   resolve=resolve, confidence=confidence, overkill_targets=overkill_targets,
                                   stage_a=stage_a, family_wise=family_wise)
        metrics["operating_point"] = {k: op[k] for k in ("review_share", "confidence", "family", "missions", "overall",
                                                         "automation")}
    if review is not None:
        metrics["review"] = str(output_dir / REVIEW_DIR / "index.html")
    if curves and curves["groups_without_p_fail"]:
        print(f"note: {curves['groups_without_p_fail']} group(s) have no p_fail (they could not be scored): left out "
              f"of the curve" + (" and the operating point" if op else "") + "; report.md lists them", file=sys.stderr)
    # All or nothing: every file is written into a staging folder first and moved into place only when all are
    # written (a full disk leaves the earlier set whole, and the error names the file).
    staging = output_dir / f".evaluate-{os.getpid()}"
    staging.mkdir(parents=True, exist_ok=True)
    name = None
    try:
        name = "predictions.jsonl"
        write_jsonl_atomic(staging / name, predictions)
        name = "metrics.json"
        (staging / name).write_text(json.dumps(metrics, ensure_ascii=False, indent=2), encoding="utf-8")
        name = "report.md"
        (staging / name).write_text(render_report(metrics, predictions, title), encoding="utf-8")
        if curves:
            from .plot_operating import plot_curves, plot_reliability
            name = "operating_curve.png"
            plot_curves(curves, staging / name, "verdict 不通过 iff p_fail >= t", chosen=op and {
                **op["missions"], "overall": op["overall"]})
            name = "reliability.png"
            plot_reliability(metrics["calibration"], staging / name, f"reliability of p_fail: {title}")
        if op:
            name = "operating_point.json"
            (staging / name).write_text(json.dumps(op, ensure_ascii=False, indent=2), encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise EvaluationError(f"could not write {output_dir / name} ({exc.strerror or exc}); nothing of this "
                              f"evaluation was written: free the space or fix the folder, then run it again") from None
    for f in sorted(staging.iterdir()):
        os.replace(f, output_dir / f.name)
    staging.rmdir()
    if review is not None:
        write_review(output_dir, predictions, metrics, title, **review)
    return metrics


def write_review(output_dir: Path, predictions: list[dict], metrics: dict, title: str, *, records: dict,
                 input_dirs: list, named_dirs: list = (), all: bool = False, record_files: dict | None = None) -> dict:
    """<output_dir>/review/: the metrics, the curve, then misses, overkills, unparseable replies (and with
    `all` every other group) with their photos. Says on stderr when photos cannot be found."""
    from stage_b.cards import EVALUATION_OUTCOMES, evaluation_cards
    from review.page import render_review, report
    rows = [[name, m["n"], f"{_pct(m['accuracy'])} {_ci(m['accuracy_ci95'])}",
             f"{_pct(m['miss_rate'])} {_ci(m['miss_rate_ci95'])}", f"{_pct(m['overkill_rate'])} {_ci(m['overkill_rate_ci95'])}",
             m["invalid_verdicts"], _pct(m.get("reason_contradiction_rate")), _pct(m.get("citation_precision")),
             _pct(m.get("citation_recall"))]
            for name, m in [*metrics["per_mission"].items(), ("overall", metrics["overall"])]]
    confusion = [[name, *m["confusion"].values()] for name, m in metrics["per_mission"].items()]
    tables = [{"title": "Per mission, the verdict line as the model wrote it (95% Wilson intervals; report.md's "
                        "operating point scores p_fail against the thresholds instead)",
               "columns": ["mission", "n", "accuracy", "miss rate (verdict line)", "overkill rate (verdict line)",
                           "unparseable",
                           "reason contradictions", "citation precision", "citation recall"], "rows": rows},
              {"title": "Confusion (reviewer -> model)", "columns": ["mission", *next(iter(metrics["per_mission"].values()),
                                                                                 {"confusion": {}})["confusion"]],
               "rows": confusion}]
    images = [{"title": title, "src": f"../{name}"} for name, title in (
        ("operating_curve.png", "Miss rate against overkill rate over thresholds"),
        ("reliability.png", "Reliability of p_fail (observed fail share against p_fail, ECE)"))
        if (output_dir / name).exists()]
    files = sorted({str(f) for f in (record_files or {}).values()})
    sources = [{"file": f, "sha256": file_sha256(f)} for f in files]
    source_of = {key: files.index(str(f)) for key, f in (record_files or {}).items()}
    cards = evaluation_cards(predictions, records, all, source_of)
    result = render_review(output_dir, title=f"Verdict review: {title}", cards=cards, outcomes=EVALUATION_OUTCOMES,
                           input_dirs=input_dirs, named_dirs=named_dirs, tables=tables, images=images,
                           sources=sources,
                           intro=[f"Misses first, then overkills, then unparseable replies, then correct verdicts whose "
                                  f"reason contradicts them or cites a photo whose summary shows no defect"
                                  + (", then every other group." if all else "; --review_all adds every group."),
                                  "Each photo is marked when the reason cites it and when its summary shows a defect."])
    report(result)
    return result


def review_inputs(args, records: list[dict], input_dir: str | None = None, files=()) -> dict | None:
    """What write_review needs: the Stage-A records by (mission, group id), the file each came from (a reviewer's
    decision names it), and the photo folders (`input_dir`, the selection's: --input_dir or GROUP_QC_INPUT_DIR; else
    nothing: a page shows photos only from folders the command names; the records' folders are named, not followed)."""
    if args.no_review:
        return None
    named = [r.get("input_dir") for r in records]
    input_dir = input_dir or args.input_dir
    return {"records": {(r["mission"], r["group_id"]): r for r in records},
            "input_dirs": [Path(input_dir)] if input_dir else [], "named_dirs": named,
            "all": args.review_all, "record_files": group_files(files)}


def guide_citations(engine, rows: list[dict], completions: list[str]) -> list[str]:
    """Guided citations, as the judge writes reasons (stage_b.grounding.guided_reply): each reply whose verdict is
    不通过 is written again from the guided start (or replaced by it when the start is the whole reply). A row that
    cannot be written again keeps its free reply (said on stderr)."""
    out = list(completions)
    starts = {}
    for i, (row, c) in enumerate(zip(rows, completions)):
        if parse(c).verdict == FAIL:
            start, complete = guided_reply(FAIL, row["summaries"], row["mission"], photos="images" in row)
            if complete:
                out[i] = start
            else:
                starts[i] = start
    if not starts:
        return out
    order = sorted(starts)
    replies, failed = engine.generate([rows[i] for i in order], prefixes=[starts[i] for i in order])
    for k, i in enumerate(order):
        if k in failed:
            print(f"warning: reason kept as the model cited it: {failed[k]}", file=sys.stderr)
        else:
            out[i] = replies[k][0]
    return out


def verdict_probabilities(engine, rows: list[dict]) -> list[float | None]:
    """p_fail per row (None where it could not be computed, said on stderr)."""
    if not rows:
        return []
    try:
        scores, failed = engine.verdict_logprobs(rows)
    except NotImplementedError as exc:
        print(f"warning: no p_fail, so no miss/overkill curve: {exc}", file=sys.stderr)
        return [None] * len(rows)
    for why in failed.values():
        print(f"warning: no p_fail: {why}", file=sys.stderr)
    return [p_fail(s) if s else None for s in scores]


def with_evidence(predictions: list[dict], records: list[dict]) -> list[dict]:
    """Each prediction with its `evidence` (stage_b.routes): the weight its group may have in a promise's bound, from
    the `review` record stage_b.decisions wrote on its labelled Stage-A record (none: the original labelled data)."""
    reviews = {(r["mission"], r["group_id"]): r.get("review") for r in records}
    out = []
    for p in predictions:
        review = reviews.get((p["mission"], p["group_id"]))
        out.append({**p, "evidence": {"weight": evidence_weight(review), "why_not": why_not_fair(review),
                                      "route": (review or {}).get("route")}})
    return out


def promise_basis(records: list[dict], scored: set) -> dict:
    """{mission: {"models": the Stage-A identities of the scored groups' summaries, "evidence_through": the latest
    reviewer decision among them (None: only originally labelled groups)}}: what a promise rests on."""
    out: dict[str, dict] = {}
    for r in records:
        if (r["mission"], r["group_id"]) not in scored:
            continue
        basis = out.setdefault(r["mission"], {"models": set(), "evidence_through": None})
        basis["models"].add(stage_a_identity(r))
        decided = (r.get("review") or {}).get("decided_at")
        if decided and (basis["evidence_through"] is None or decided > basis["evidence_through"]):
            basis["evidence_through"] = decided
    return {m: {"models": sorted(b["models"]), "evidence_through": b["evidence_through"]} for m, b in out.items()}


def _records_for(data: dict | None) -> list[dict]:
    """The Stage-A records behind re-scored predictions, when metrics.json beside them names a selection whose
    files are still there (for the review page's photos); none otherwise."""
    if not data or not data.get("selection"):
        return []
    try:
        return load_records(Selection.from_record(data["selection"], "metrics.json"))
    except (ValueError, OSError):
        return []


def _check_operating_split(targets, split: str) -> None:
    if targets and split not in ("val", HELD_OUT):
        raise EvaluationError(f"--target_miss_rate picks thresholds on groups the model was not trained on, and these "
                              f"are {split} groups: use --split val (the default) or held_out")


def prepare_output_dir(path: Path, overwrite: bool) -> None:
    existing = [n for n in OUTPUTS if (path / n).exists()]
    if existing and not overwrite:
        raise EvaluationError(f"output folder {path} already holds {', '.join(existing)}; pass --overwrite "
                              f"to replace them or choose another --output_dir")
    path.mkdir(parents=True, exist_ok=True)


def without_trained(rows: list[dict], trained: list[dict]) -> list[dict]:
    """The rows whose group (its mission and id: one work order in two missions is two groups) is not trained on."""
    keys = {(r["mission"], r["group_id"]) for r in trained}
    return [r for r in rows if (r["mission"], r["group_id"]) not in keys]


def held_out_rows(selection: Selection, split: str, run: dict | None, run_path, allow_overlap: bool,
                  records: list[dict] | None = None):
    """The rows to score and what metrics.json records about them; refuses groups the run trained on. `held_out`:
    every group of the selection the run did not train on (its validation groups, and groups it never saw, such as
    work orders reviewers labelled since: stage_b.decisions)."""
    if split == HELD_OUT:
        if not run:
            raise EvaluationError("--split held_out means the groups a training run did not train on: give the run's "
                                  "adapters (--adapters <run>/checkpoint-N), or use --split val or all")
        rows, counts = build_rows(selection, "all", allow_empty=True, records=records)
        trained = train_overlap(run, run_path, rows)
        rows = without_trained(rows, trained)
        counts = {m: {**c, "rows": sum(r["mission"] == m for r in rows)} for m, c in counts.items()}
        print(f"held out from the training run: {len(rows)} groups ({len(trained)} it trained on left out)")
    else:
        rows, counts = build_rows(selection, split, allow_empty=True, records=records)
    overlap = train_overlap(run, run_path, rows) if run else []
    if overlap and not allow_overlap:
        raise EvaluationError(
            f"{len(overlap)} of the {len(rows)} groups of the {split} split were in the training run's train split "
            f"(evaluation: {selection.describe_split()}; training: {run_selection(run, run_path).describe_split()}). "
            f"Drop --val_ratio/--split_seed and unset GROUP_QC_VAL_RATIO/GROUP_QC_SPLIT_SEED to score the run's "
            f"validation groups, or pass --allow_train_overlap to score them anyway (the report will say so)")
    data = {"split": split, "split_settings": selection.describe_split(), "mode": selection.mode,
            "mode_settings": selection.describe_mode(), "selection": selection.to_record(),
            "run": str(run_path) if run_path else None, "train_overlap": len(overlap),
            "groups": {m: c["rows"] for m, c in counts.items()}}
    return rows, counts, data


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m stage_b.evaluate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint folder (base or merged)")
    p.add_argument("--adapters", nargs="*", default=[], help="LoRA checkpoint(s), e.g. a GRPO checkpoint-N")
    add_model_type_args(p)
    add_selection_args(p)
    p.add_argument("--split", default="val", choices=["train", "val", "all", HELD_OUT],
                   help="which groups: the split's train or val side, all, or held_out (with a run's adapters: every "
                        "group the run did not train on, e.g. its validation groups plus groups reviewers labelled "
                        "since)")
    p.add_argument("--allow_train_overlap", action="store_true",
                   help="score groups the adapter's training run trained on (refused otherwise)")
    p.add_argument("--predictions", help="re-score this predictions.jsonl; no model is loaded")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--max_new_tokens", type=int, default=96)
    p.add_argument("--infer_backend", default="transformers", choices=["transformers", "vllm"])
    p.add_argument("--target_miss_rate", nargs="+", metavar="R|MISSION=R",
                   help="write operating_point.json: per mission the largest threshold on p_fail whose validation "
                        "miss rate is certified <= R at --confidence (one default R, plus MISSION=R overrides; a "
                        "mission's own R wins)")
    p.add_argument("--confidence", default=str(DEFAULT_CONFIDENCE),
                   help="confidence of the promises, strictly between 0 and 1 (exact one-sided Clopper-Pearson "
                        "bounds; default %(default)s)")
    p.add_argument("--family_wise", action="store_true",
                   help="certify each claim (each mission's miss and overkill promise) at the Bonferroni-adjusted "
                        "confidence 1 - (1 - C) / claims, so that all promises hold together at --confidence")
    p.add_argument("--target_overkill_rate", nargs="+", metavar="O|MISSION=O",
                   help="also an auto-fail threshold per mission: the smallest whose overkill rate (good groups "
                        "auto-failed) is certified <= O; groups between the two thresholds go to review")
    p.add_argument("--reason_citations", choices=REASON_CITATIONS, default="guided",
                   help="guided (as the judge): a 不通过 reply's reason starts by citing every photo whose summary "
                        "shows a defect; free: the model cites (default %(default)s)")
    p.add_argument("--no_review", action="store_true", help="no review page (review/index.html)")
    p.add_argument("--review_all", action="store_true",
                   help="the review page shows every group, not only misses, overkills and unparseable replies")
    p.add_argument("--review_share", type=float, default=DEFAULT_REVIEW_SHARE,
                   help="the judge's needs_review band around each threshold covers this share of the validation "
                        "errors")
    args = p.parse_args(argv)
    return run_cli(lambda: _evaluate(args))


def _resolver(registry):
    from qc_core.missions import MissionError

    def resolve(name):
        try:
            return registry.resolve(name).name
        except MissionError as exc:
            raise OperatingPointError(f"--target_miss_rate: {exc}") from None
    return resolve


def _rescore_provenance(args, beside: bool = True) -> tuple[dict | None, dict | None]:
    """(data, checkpoints) for re-scored predictions: --model/--adapters name the checkpoints (nothing is
    loaded); otherwise the metrics.json evaluate wrote beside the predictions file, when there is one (not for
    another tool's file: `beside` False)."""
    beside = Path(args.predictions).with_name("metrics.json") if beside else None
    earlier = {}
    if beside and beside.is_file():
        try:
            earlier = json.loads(beside.read_text(encoding="utf-8"))
        except (ValueError, OSError, RecursionError) as exc:
            raise EvaluationError(f"{beside} (beside the predictions) cannot be read ({exc}): it says which model and "
                                  f"split the predictions come from; restore it, or move it away and pass --model "
                                  f"(and --adapters) as used for the predictions") from None
        if not isinstance(earlier, dict) or not isinstance(earlier.get("data") or {}, dict) \
                or not isinstance(earlier.get("checkpoints") or {}, dict):
            raise EvaluationError(f"{beside} (beside the predictions) is not a metrics.json stage_b.evaluate wrote: "
                                  f"move it away and pass --model (and --adapters) as used for the predictions")
    checkpoints = earlier.get("checkpoints")
    if args.model:
        checkpoints = checkpoint_identities(args.model, args.adapters, args.model_type, args.template)
    return earlier.get("data"), checkpoints


def _evaluate(args) -> int:
    output_dir = Path(args.output_dir)
    targets = parse_targets(args.target_miss_rate)
    overkill_targets = parse_targets(args.target_overkill_rate, "--target_overkill_rate")
    if overkill_targets and not targets:
        raise EvaluationError("--target_overkill_rate sets the auto-fail side of an operating point: give "
                              "--target_miss_rate too")
    confidence = check_confidence(args.confidence)
    review_share = check_rate(args.review_share, "--review_share")
    from qc_core.missions import load_registry
    resolve = _resolver(load_registry())
    data = checkpoints = source = stage_a = None
    if args.predictions:
        predictions, written_by = read_prediction_file(Path(args.predictions))
        source = {"file": str(args.predictions), "format": written_by}
        print(f"re-scoring {len(predictions)} groups from {written_by} {args.predictions}")
        data, checkpoints = _rescore_provenance(args, beside=written_by == OURS)
        if targets and not checkpoints:
            raise EvaluationError(f"an operating point names the model it is for, and nothing says which model wrote "
                                  f"{args.predictions}: pass --model (and --adapters) as used for it (nothing is loaded)")
        if data is not None and not isinstance(data.get("split"), str):
            raise EvaluationError(f"metrics.json beside {args.predictions} has no data.split (which groups the "
                                  f"predictions are): it was not written by stage_b.evaluate, or was edited; move it "
                                  f"away and pass --model (and --adapters) as used for the predictions")
        _check_operating_split(targets, data["split"] if data else "val")
        review = review_inputs(args, _records_for(data))
        prepare_output_dir(output_dir, args.overwrite)
        missions, title = [], f"re-scored {'' if written_by == OURS else written_by + ' '}{args.predictions}"
    else:
        if not args.model:
            raise EvaluationError("--model is required (or --predictions to re-score)")
        _check_operating_split(targets, args.split)
        checkpoints = checkpoint_identities(args.model, args.adapters, args.model_type, args.template)
        from .generate import VerdictEngine
        # a model merged from a run's adapter (swift export --merge_lora: <run>/checkpoint-N-merged) obeys the run too
        selection, run, run_path, notes = selection_for(args, args.adapters or [args.model])
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        registry = load_registry()
        records = load_records(selection, registry)   # read once: the rows to score, and the review page's photos
        rows, counts, data = held_out_rows(selection, args.split, run, run_path, args.allow_train_overlap, records)
        chosen = registry.select(selection.missions)
        if run:
            changed = stage_a_changes(run, stage_a_files(selection, chosen, registry))
            if changed:
                print(f"note: Stage-A input differs from the training run's ({', '.join(changed)}): the overlap "
                      f"check counts every group the run's split puts in train", file=sys.stderr)
        print(f"scoring {len(rows)} groups of the {args.split} split: {selection.describe_split()}"
              + (f" (training run {run_path})" if run else ""))
        missions = [m.name for m in chosen if m.name in counts]
        review = review_inputs(args, records, selection.input_dir, stage_a_files(selection, chosen, registry))
        prepare_output_dir(output_dir, args.overwrite)
        engine = VerdictEngine(args.model, adapters=args.adapters, backend=args.infer_backend,
                               model_type=args.model_type, template=args.template,
                               batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, temperature=0.0)
        started = time.perf_counter()
        generated, failed = engine.generate(rows) if rows else ([], {})
        generating = time.perf_counter() - started
        for why in failed.values():
            print(f"warning: not judged, counted wrong: {why}", file=sys.stderr)
        p_fails = verdict_probabilities(engine, rows)
        scoring = time.perf_counter() - started - generating
        if rows:
            print(f"generation {generating:.1f}s, p_fail {scoring:.1f}s ({1000 * scoring / len(rows):.1f} ms per group, "
                  f"{len(rows) / (generating + scoring):.2f} groups/s)")
        completions = [c[0] if c else "" for c in generated]
        if args.reason_citations == "guided":
            completions = guide_citations(engine, rows, completions)
        data["reason_citations"] = args.reason_citations
        predictions = with_evidence(predictions_from_rows(rows, completions, failed, p_fails), records)
        stage_a = promise_basis(records, {(r["mission"], r["group_id"]) for r in rows})
        title = f"{args.model}" + (f" + {' '.join(args.adapters)}" if args.adapters else "") + f", {args.split} split"
    if targets and stage_a is None:
        stage_a = promise_basis(_records_for(data), {(p["mission"], p["group_id"]) for p in predictions}) or None
    metrics = write_outputs(output_dir, predictions, missions, title, data, checkpoints, targets, review_share,
                            resolve, review, source, confidence, overkill_targets, stage_a, args.family_wise)
    left_out = {m: e["left_out"] for m, e in (metrics.get("operating_point") or {}).get("missions", {}).items()
                if e.get("left_out")}
    for mission, why in left_out.items():
        print(f"note: {mission}: " + "; ".join(f"{n} {w}" for w, n in why.items())
              + ": left out of the promise's bound (not a fair sample), kept as training labels", file=sys.stderr)
    op = metrics.get("operating_point")
    for mission, e in (op or {}).get("missions", {}).items():
        print(f"operating point {mission}: " + (f"threshold {fmt_p(e['threshold'])}; at the threshold (p_fail "
                                                f"against t, as the judge decides) miss {_pct(e['miss_rate'])} "
                                                f"({e['misses']}/{e['n_fail']}), overkill {_pct(e['overkill_rate'])} "
                                                f"({e['overkills']}/{e['n_pass']})"
                                                if e.get("threshold") is not None else f"none ({e['why_none']})")
              + f"; {e['promise']}")
    if op:
        a = op["automation"]
        print(f"decided without review on these {op.get('evidence', 'validation')} groups: "
              f"{a['validation_auto_decided']} of {a['validation_groups']} "
              f"({_pct(a['automation_share'])} {_ci(a['automation_share_ci95'])}); certified: "
              f"{', '.join(a['certified_missions']) or 'no mission'}")
    o = metrics["overall"]
    print(f"{o['n']} groups, the verdict line as written: accuracy {_pct(o['accuracy'])}, miss rate "
          f"{_pct(o['miss_rate'])}, overkill rate "
          f"{_pct(o['overkill_rate'])}, invalid {o['invalid_verdicts']}; reasons: contradiction rate "
          f"{_pct(o.get('reason_contradiction_rate'))}, citation precision {_pct(o.get('citation_precision'))}, "
          f"recall {_pct(o.get('citation_recall'))} -> {output_dir}/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
