"""The output folder, written all at once: predictions.jsonl, metrics.json, report.md, the plots,
operating_point.json and the review page."""
from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from qc_core.jsonl import file_sha256, write_jsonl_atomic
from qc_core.paths import WRITTEN_IN, resolved, stored
from qc_core.records import StageARecord
from review.page import REVIEW_DIR, render_review, report, trusted_record_folder

from stage_b.stats.calibration import calibration
from stage_b.stats.certify import DEFAULT_CONFIDENCE
from stage_b.data.dataset import group_files
from stage_b.contract.numbers import pct1
from stage_b.contract.grounding import ground
from stage_b.stats.metrics import compute_metrics
from stage_b.rules.operating_point import DEFAULT_REVIEW_SHARE
from stage_b.rules.calibrate import Targets, build_operating_point, points_of
from stage_b.stats.thresholds import curve
from stage_b.rules.replacement import compare
from stage_b.train.run_record import portable_selection, resolved_selection
from stage_b.evaluate.predictions import EvaluationError, Prediction
from stage_b.evaluate.report import _ci, curve_picks, render_report
from stage_b.pages.cards import EVALUATION_OUTCOMES, evaluation_cards
from stage_b.pages.plot_operating import plot_curves, plot_reliability

OUTPUTS = ("predictions.jsonl", "metrics.json", "report.md", "operating_curve.png", "reliability.png",
           "operating_point.json", "review")

def operating_curves(predictions: list[Prediction], missions: list[str], by_mission: dict | None = None) -> dict | None:
    """metrics.json's `operating_curve`: per mission and pooled, the curve and the (p_fail, expected) points it
    comes from (so it can be recomputed); None when no prediction has a p_fail. `by_mission`: points_of(predictions),
    when the caller has it."""
    by_mission = points_of(predictions) if by_mission is None else by_mission
    if not by_mission:
        return None
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    return {"per_mission": {m: curve(by_mission.get(m, [])) for m in missions}, "overall": curve(pooled),
            "points": {m: by_mission.get(m, []) for m in missions}, "overall_points": pooled,
            "groups_without_p_fail": sum(p.get("p_fail") is None for p in predictions)}

def after_withdrawals(withdrawals: dict, predictions: list[Prediction]) -> dict:
    """{mission: {"day", "at", "why", "labels_after"}} for each mission the replaced point had withdrawn: when and why,
    and how many of the groups this re-certification scores reviewers decided after it (a promise lifted on evidence
    that came before its withdrawal would be the same broken promise again)."""
    out = {}
    for mission, line in sorted(withdrawals.items()):
        at = line.get("withdrawn_at")
        after = sum(1 for p in predictions if p["mission"] == mission and at and _decided_at(p) > at)
        out[mission] = {"day": line.get("withdrawn_day"), "at": at, "why": line.get("why"), "labels_after": after}
    return out


def _decided_at(p: Prediction) -> str:
    """When a reviewer decided the prediction's group ("" for original labels)."""
    evidence = p.get("evidence")
    return (evidence.get("decided_at") if evidence else None) or ""


def write_outputs(output_dir: Path, predictions: list[Prediction], missions: list[str], title: str,
                  data: dict | None = None, checkpoints: dict | None = None, targets: Targets | None = None,
                  review_share: float = DEFAULT_REVIEW_SHARE, resolve=None, review: dict | None = None,
                  source: dict | None = None, confidence: float = DEFAULT_CONFIDENCE,
                  overkill_targets: Targets | None = None, stage_a: dict | None = None,
                  family_wise: bool = False, replaces=None) -> dict:
    """metrics.json, report.md, predictions.jsonl, and with p_fail the curve and reliability PNGs; with `targets`
    (and `overkill_targets`), operating_point.json certified at `confidence`; with `review` ({"records",
    "input_dirs", "all"}) the review page; `replaces` (evaluate's Replaced: path, sha256, content) puts each promise
    beside the replaced point's (stage_b.rules.replacement); `source` (re-scoring: the file and which tool wrote it)
    goes into
    metrics.json. Everything is computed before the first file is written."""
    grounded = [ground(p["completion"], p.get("summaries"), p["mission"]) for p in predictions]   # metrics and page
    metrics = compute_metrics(predictions, missions, grounded)
    if source:
        metrics["rescored"] = source
    if data:
        metrics["data"] = data   # which groups were scored, and why these
    if checkpoints:
        metrics["checkpoints"] = checkpoints   # which model made the predictions (operating points name it)
    by_mission = points_of(predictions)   # the curve, its table and the reliability diagram
    curves = operating_curves(predictions, list(metrics["per_mission"]), by_mission)
    if curves:
        metrics["operating_curve"] = curves
        metrics["calibration"] = calibration(by_mission, list(metrics["per_mission"]))
    op = None
    if targets:
        if not curves:
            raise EvaluationError("--target_miss_rate needs p_fail in the predictions, and none has one")
        assert checkpoints is not None   # an operating point names its model: evaluate refuses targets without one
        op = build_operating_point(predictions, list(metrics["per_mission"]), targets, review_share=review_share,
                                   model=checkpoints["model"], adapters=checkpoints["adapters"], data=data,
                                   resolve=resolve, confidence=confidence, overkill_targets=overkill_targets,
                                   stage_a=stage_a, family_wise=family_wise)
        if replaces is not None:
            op["replaces"] = compare(replaces.content, op, replaces.path, replaces.sha256)
            metrics["replaced_withdrawals"] = after_withdrawals(getattr(replaces, "withdrawals", {}), predictions)
        metrics["operating_point"] = {k: op[k] for k in ("review_share", "confidence", "family", "missions", "overall",
                                                         "automation", "replaces") if k in op}
    if review is not None:
        metrics["review"] = str(output_dir / REVIEW_DIR / "index.html")
    if curves and curves["groups_without_p_fail"]:
        print(f"note: {curves['groups_without_p_fail']} group(s) have no p_fail (they could not be scored): left out "
              f"of the curve" + (" and the operating point" if op else "") + "; report.md lists them", file=sys.stderr)
    write_all_or_nothing(output_dir, predictions, metrics, title, curves, op)
    if review is not None:
        write_evaluation_review(output_dir, predictions, metrics, title, **review, grounded=grounded)
    return metrics


def _map_paths(doc: dict, convert, base) -> dict:
    """metrics.json's or operating_point.json's content with each path it names converted by `convert(path, base)`
    (a checkpoint's, the training run's, the selection's, the replaced operating point's); a copy."""
    doc = json.loads(json.dumps(doc, ensure_ascii=False))
    checkpoints = [doc.get("model"), *(doc.get("adapters") or [])]
    if isinstance(doc.get("checkpoints"), dict):
        checkpoints += [doc["checkpoints"].get("model"), *(doc["checkpoints"].get("adapters") or [])]
    for c in checkpoints:
        if isinstance(c, dict) and isinstance(c.get("path"), str) and c["path"]:
            c["path"] = convert(c["path"], base)
    data = doc.get("data")
    if isinstance(data, dict):
        if isinstance(data.get("run"), str) and data["run"]:
            data["run"] = convert(data["run"], base)
        if isinstance(data.get("selection"), dict):
            data["selection"] = (portable_selection if convert is _store else resolved_selection)(
                data["selection"], base)
    if isinstance(doc.get("replaces"), dict) and isinstance(doc["replaces"].get("path"), str):
        doc["replaces"]["path"] = convert(doc["replaces"]["path"], base)
    return doc


def _store(path: str, base) -> str:
    return stored(path, base) if os.path.exists(path) else path   # a name that is no file here stays as given


def _resolve(path: str, base) -> str:
    return str(resolved(path, base))


def portable(doc: dict, base) -> dict:
    """As written into folder `base`: every path relative to it (qc_core.paths), `written_in` the folder itself."""
    return {**_map_paths(doc, _store, base), WRITTEN_IN: os.path.abspath(base)}


def read_back(doc: dict, base) -> dict:
    """A metrics.json or operating_point.json read from folder `base`: its relative paths resolved against it."""
    return _map_paths(doc, _resolve, base)


def write_all_or_nothing(output_dir: Path, predictions: list[Prediction], metrics: dict, title: str,
                         curves: dict | None, op: dict | None) -> None:
    """Every file is written into a staging folder first and moved into place only when all are written (a full disk
    leaves the earlier set whole, and the error names the file)."""
    staging = output_dir / f".evaluate-{os.getpid()}"
    staging.mkdir(parents=True, exist_ok=True)
    name = "predictions.jsonl"   # the file being written, named if writing fails
    try:
        write_jsonl_atomic(staging / name, predictions)
        name = "metrics.json"
        (staging / name).write_text(json.dumps(portable(metrics, output_dir), ensure_ascii=False, indent=2),
                                    encoding="utf-8")
        name = "report.md"
        (staging / name).write_text(render_report(metrics, predictions, title, picks=curve_picks(curves)),
                                    encoding="utf-8")
        if curves:
            name = "operating_curve.png"
            plot_curves(curves, staging / name, "verdict 不通过 iff p_fail >= t", chosen=op and {
                **op["missions"], "overall": op["overall"]})
            name = "reliability.png"
            plot_reliability(metrics["calibration"], staging / name, f"reliability of p_fail: {title}")
        if op:
            name = "operating_point.json"
            (staging / name).write_text(json.dumps(portable(op, output_dir), ensure_ascii=False, indent=2),
                                        encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise EvaluationError(f"could not write {output_dir / name} ({exc.strerror or exc}); nothing of this "
                              f"evaluation was written: free the space or fix the folder, then run it again") from None
    for f in sorted(staging.iterdir()):
        os.replace(f, output_dir / f.name)
    staging.rmdir()

def write_evaluation_review(output_dir: Path, predictions: list[Prediction], metrics: dict, title: str, *,
                 records: dict, input_dirs: list, named_dirs: Sequence = (), all: bool = False,
                 record_files: dict | None = None, grounded: list | None = None) -> dict:
    """<output_dir>/review/: the metrics, the curve, then misses, overkills, unparseable replies (and with
    `all` every other group) with their photos. Says on stderr when photos cannot be found."""
    rows = [[name, m["n"], f"{pct1(m['accuracy'])} {_ci(m['accuracy_ci95'])}",
             f"{pct1(m['miss_rate'])} {_ci(m['miss_rate_ci95'])}",
             f"{pct1(m['overkill_rate'])} {_ci(m['overkill_rate_ci95'])}",
             m["invalid_verdicts"], pct1(m.get("reason_contradiction_rate")), pct1(m.get("citation_precision")),
             pct1(m.get("citation_recall"))]
            for name, m in [*metrics["per_mission"].items(), ("overall", metrics["overall"])]]
    confusion = [[name, *m["confusion"].values()] for name, m in metrics["per_mission"].items()]
    tables = [{"title": "Per mission, the verdict line as the model wrote it (95% Wilson intervals; report.md's "
                        "operating point scores p_fail against the thresholds instead)",
               "columns": ["mission", "n", "accuracy", "miss rate (verdict line)", "overkill rate (verdict line)",
                           "unparseable",
                           "reason contradictions", "citation precision", "citation recall"], "rows": rows},
              {"title": "Confusion (reviewer -> model)",
               "columns": ["mission", *next(iter(metrics["per_mission"].values()), {"confusion": {}})["confusion"]],
               "rows": confusion}]
    images = [{"title": title, "src": f"../{name}"} for name, title in (
        ("operating_curve.png", "Miss rate against overkill rate over thresholds"),
        ("reliability.png", "Reliability of p_fail (observed fail share against p_fail, ECE)"))
        if (output_dir / name).exists()]
    files = sorted({str(f) for f in (record_files or {}).values()})
    sources = [{"file": f, "sha256": file_sha256(f)} for f in files]
    source_of = {key: files.index(str(f)) for key, f in (record_files or {}).items()}
    cards = evaluation_cards(predictions, records, all, source_of, grounded)
    for card in cards:   # each group's photos from its own record's folder, where the page may follow it
        folder = trusted_record_folder((records.get((card["mission"], card["group_id"])) or {}).get("input_dir"),
                                       [Path(d) for d in input_dirs])
        if folder is not None:
            card["photo_dir"] = str(folder)
    result = render_review(output_dir, title=f"Verdict review: {title}", cards=cards, outcomes=EVALUATION_OUTCOMES,
                           input_dirs=input_dirs, named_dirs=list(named_dirs), tables=tables, images=images,
                           sources=sources,
                           intro=["Misses first, then overkills, then unparseable replies, then correct verdicts whose "
                                  "reason contradicts them or cites a photo whose summary shows no defect"
                                  + (", then every other group." if all else "; --review_all adds every group."),
                                  "Each photo is marked when the reason cites it and when its summary shows a defect."])
    report(result)
    for line in missing_by_folder(cards, result["missing_photos"]):
        print(line, file=sys.stderr)
    return result


def missing_by_folder(cards: list[dict], missing: list[str]) -> list[str]:
    """Per photo folder of the cards, how many of its photos the page could not show (a folder moved, or photos
    deleted): "photos missing in FOLDER: k of n"."""
    wanted: dict[str, set] = {}
    for card in cards:
        if card.get("photo_dir"):
            wanted.setdefault(card["photo_dir"], set()).update(str(Path(card["photo_dir"]).resolve() / rel)
                                                              for rel in card["images"])
    gone = set(missing)
    return [f"photos missing in {folder}: {len(paths & gone)} of {len(paths)}"
            for folder, paths in sorted(wanted.items()) if paths & gone]


def review_inputs(records: list[StageARecord], input_dir: str | None = None, files=(), *,
                  review_all: bool = False) -> dict:
    """What write_evaluation_review needs: the Stage-A records by (mission, group id), the file each came from (a
    reviewer's decision names it), and the photo folders (`input_dir`: the command's --input_dir or GROUP_QC_INPUT_DIR;
    each card also looks in its own record's folder where the page may follow it: review.page.trusted_record_folder;
    the other folders records name are named, not followed)."""
    named = [r.get("input_dir") for r in records]
    return {"records": {(r["mission"], r["group_id"]): r for r in records},
            "input_dirs": [Path(input_dir)] if input_dir else [], "named_dirs": named,
            "all": review_all, "record_files": group_files(files)}


def prepare_output_dir(path: Path, overwrite: bool) -> None:
    existing = [n for n in OUTPUTS if (path / n).exists()]
    if existing and not overwrite:
        raise EvaluationError(f"output folder {path} already holds {', '.join(existing)}; pass --overwrite "
                              f"to replace them or choose another --output_dir")
    path.mkdir(parents=True, exist_ok=True)
