"""The command line of `group-qc evaluate` (the package docstring says what it does)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from qc_core.exits import run_cli
from qc_core.jsonl import file_sha256
from qc_core.missions import MissionError, load_registry
from qc_core.records import StageARecord

from stage_b.stats.certify import DEFAULT_CONFIDENCE, check_confidence
from stage_b.data.dataset import load_records, stage_a_files
from stage_b.model.engine_settings import EngineSettings, add_engine_args
from stage_b.model.model_replies import guide_citations, verdict_probabilities
from stage_b.contract.numbers import fmt_p, pct1
from stage_b.rules.operating_point import DEFAULT_REVIEW_SHARE, load_operating_point, point_keys
from stage_b.rules.calibrate import Targets, parse_targets
from stage_b.rules.point_check import OperatingPointError, check_rate
from stage_b.rules.replacement import inherit_targets
from stage_b.train.run_record import selection_for, stage_a_changes
from stage_b.data.settings import add_selection_args, selection_flags
from stage_b.evaluate.held_out import (HELD_OUT, _check_operating_split, _records_for, held_out_rows, promise_basis,
                                       with_evidence)
from stage_b.evaluate.outputs import prepare_output_dir, read_back, review_inputs, write_outputs
from stage_b.evaluate.predictions import OURS, EvaluationError, Prediction, predictions_from_rows, read_prediction_file
from stage_b.evaluate.report import _ci
from stage_b.rules.promise_texts import automates_nothing
from stage_b.rules.withdrawals import recorded


@dataclass(frozen=True)
class EvaluateSettings:
    """One evaluation, typed and checked (built in `main` from the flags)."""
    engine: EngineSettings
    selection_flags: dict
    output_dir: Path
    split: str = "val"
    allow_train_overlap: bool = False
    predictions: Path | None = None
    overwrite: bool = False
    targets: Targets | None = None            # parse_targets of --target_miss_rate
    overkill_targets: Targets | None = None   # of --target_overkill_rate
    confidence: float = DEFAULT_CONFIDENCE
    family_wise: bool = False
    review_share: float = DEFAULT_REVIEW_SHARE
    review_page: bool = True
    review_all: bool = False
    replaces: Replaced | None = None          # --replaces: the operating point this one replaces

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "EvaluateSettings":
        # each flag's value, None when not given (inherit_targets fills those from a replaced point)
        given: dict[str, Any] = {"targets": parse_targets(args.target_miss_rate),
                 "overkill_targets": parse_targets(args.target_overkill_rate, "--target_overkill_rate"),
                 "confidence": None if args.confidence is None else check_confidence(args.confidence),
                 "review_share": None if args.review_share is None else check_rate(args.review_share,
                                                                                    "--review_share"),
                 "family_wise": True if args.family_wise else None}
        replaced = None
        if args.replaces:   # a re-certification keeps the replaced point's targets unless a flag changes them
            replaced = Replaced.read(args.replaces)
            given, said = inherit_targets(replaced.content, given)
            for line in said:
                print(f"--replaces {args.replaces}: {line}")
        if given["overkill_targets"] and not given["targets"]:
            raise EvaluationError("--target_overkill_rate sets the auto-fail side of an operating point: give "
                                  "--target_miss_rate too")
        return cls(EngineSettings.from_args(args), selection_flags(args), Path(args.output_dir), args.split,
                   args.allow_train_overlap, Path(args.predictions) if args.predictions else None, args.overwrite,
                   given["targets"], given["overkill_targets"],
                   DEFAULT_CONFIDENCE if given["confidence"] is None else given["confidence"],
                   bool(given["family_wise"]),
                   DEFAULT_REVIEW_SHARE if given["review_share"] is None else given["review_share"],
                   not args.no_review, args.review_all, replaced)

    def review(self, records: list[StageARecord], input_dir: str | None, files=()) -> dict | None:
        """What the review page needs (review_inputs), or None with --no_review."""
        return review_inputs(records, input_dir, files, review_all=self.review_all) if self.review_page else None


@dataclass(frozen=True)
class Replaced:
    """--replaces: the operating point a re-certification replaces, read and checked, with its digest."""
    path: str
    sha256: str
    content: dict
    withdrawals: dict = field(default_factory=dict)   # {mission: its withdrawal line} recorded beside the old point

    @classmethod
    def read(cls, path: str) -> "Replaced":
        old = load_operating_point(path)   # checked as the judge checks it (a forged or torn file is refused here)
        return cls(path, file_sha256(path), read_back(json.loads(Path(path).read_text(encoding="utf-8")),
                                                      Path(path).parent), recorded(path, point_keys(path, old)))


class Scored(NamedTuple):
    """What an evaluation has before it writes: the predictions and where they come from."""
    predictions: list[Prediction]
    missions: list[str]           # the missions scored (empty: those the predictions name)
    title: str
    data: dict | None             # which groups (split, selection), as metrics.json records it
    checkpoints: dict | None
    source: dict | None           # a re-scored file: its path and format
    stage_a: dict | None          # what the promise rests on (promise_basis)
    review: dict | None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc evaluate", description=sys.modules[__package__].__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_engine_args(p, model_required=False, reason_citations=(
        "guided (as the judge): a 不通过 reply's reason starts by citing every photo whose summary shows a defect; "
        "free: the model cites (default %(default)s)"))
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
    p.add_argument("--target_miss_rate", nargs="+", metavar="R|MISSION=R",
                   help="write operating_point.json: per mission the largest threshold on p_fail whose validation "
                        "miss rate is certified <= R at --confidence (one default R, plus MISSION=R overrides; a "
                        "mission's own R wins)")
    p.add_argument("--confidence", default=None,
                   help=f"confidence of the promises, strictly between 0 and 1 (exact one-sided Clopper-Pearson "
                        f"bounds; default {DEFAULT_CONFIDENCE}, or the replaced operating point's)")
    p.add_argument("--family_wise", action="store_true",
                   help="certify each claim (each mission's miss and overkill promise) at the Bonferroni-adjusted "
                        "confidence 1 - (1 - C) / claims, so that all promises hold together at --confidence")
    p.add_argument("--target_overkill_rate", nargs="+", metavar="O|MISSION=O",
                   help="also an auto-fail threshold per mission: the smallest whose overkill rate (good groups "
                        "auto-failed) is certified <= O; groups between the two thresholds go to review")
    p.add_argument("--no_review", action="store_true", help="no review page (review/index.html)")
    p.add_argument("--review_all", action="store_true",
                   help="the review page shows every group, not only misses, overkills and unparseable replies")
    p.add_argument("--replaces", metavar="OPERATING_POINT",
                   help="certify again in place of this operating_point.json: its targets (miss and overkill rate per "
                        "mission, confidence, review share, --family_wise) are kept unless a flag gives another, and "
                        "the new file puts each promise beside the old; a weaker one decides nothing until the owner "
                        "accepts it in words (group-qc judge --accept_weaker; stage_b.rules.replacement)")
    p.add_argument("--review_share", type=float, default=None,
                   help=f"the judge's needs_review band around each threshold covers this share of the validation "
                        f"errors (default {DEFAULT_REVIEW_SHARE}, or the replaced operating point's)")
    args = p.parse_args(argv)
    return run_cli(lambda: evaluate(EvaluateSettings.from_args(args)))


def _resolver(registry):

    def resolve(name):
        try:
            return registry.resolve(name).name
        except MissionError as exc:
            raise OperatingPointError(f"--target_miss_rate: {exc}") from None
    return resolve


def _rescore_provenance(settings: EvaluateSettings, beside: bool = True) -> tuple[dict | None, dict | None]:
    """(data, checkpoints) for re-scored predictions: --model/--adapters name the checkpoints (nothing is
    loaded); otherwise the metrics.json evaluate wrote beside the predictions file, when there is one (not for
    another tool's file: `beside` False)."""
    metrics_file = settings.predictions.with_name("metrics.json") if beside and settings.predictions else None
    earlier = {}
    if metrics_file and metrics_file.is_file():
        try:
            earlier = json.loads(metrics_file.read_text(encoding="utf-8"))
        except (ValueError, OSError, RecursionError) as exc:
            raise EvaluationError(f"{metrics_file} (beside the predictions) cannot be read ({exc}): it says which "
                                  f"model and split the predictions come from; restore it, or move it away and pass "
                                  f"--model (and --adapters) as used for the predictions") from None
        if not isinstance(earlier, dict) or not isinstance(earlier.get("data") or {}, dict) \
                or not isinstance(earlier.get("checkpoints") or {}, dict):
            raise EvaluationError(f"{metrics_file} (beside the predictions) is not a metrics.json group-qc evaluate "
                                  f"wrote: move it away and pass --model (and --adapters) as used for the predictions")
        earlier = read_back(earlier, metrics_file.parent)   # its paths are relative to its folder
    checkpoints = earlier.get("checkpoints")
    if settings.engine.model:
        checkpoints = settings.engine.checkpoints()
    return earlier.get("data"), checkpoints


def evaluate(settings: EvaluateSettings) -> int:
    resolve = _resolver(load_registry())
    scored = rescored(settings) if settings.predictions else score(settings)
    stage_a = scored.stage_a
    if settings.targets and stage_a is None:
        stage_a = promise_basis(_records_for(scored.data),
                                {(p["mission"], p["group_id"]) for p in scored.predictions}) or None
    metrics = write_outputs(settings.output_dir, scored.predictions, scored.missions, scored.title, scored.data,
                            scored.checkpoints, settings.targets, settings.review_share, resolve, scored.review,
                            scored.source, settings.confidence, settings.overkill_targets, stage_a,
                            settings.family_wise, settings.replaces)
    print_summary(metrics, settings.output_dir)
    return 0


def rescored(settings: EvaluateSettings) -> Scored:
    """A predictions file scored again (ours, `swift infer`'s or chat completions'): no model is loaded."""
    path = settings.predictions
    assert path is not None   # evaluate re-scores only with --predictions
    predictions, written_by = read_prediction_file(path)
    print(f"re-scoring {len(predictions)} groups from {written_by} {path}")
    data, checkpoints = _rescore_provenance(settings, beside=written_by == OURS)
    if settings.targets and not checkpoints:
        raise EvaluationError(f"an operating point names the model it is for, and nothing says which model wrote "
                              f"{path}: pass --model (and --adapters) as used for it (nothing is loaded)")
    if data is not None and not isinstance(data.get("split"), str):
        raise EvaluationError(f"metrics.json beside {path} has no data.split (which groups the "
                              f"predictions are): it was not written by group-qc evaluate, or was edited; move it "
                              f"away and pass --model (and --adapters) as used for the predictions")
    _check_operating_split(settings.targets, data["split"] if data else "val")
    review = settings.review(_records_for(data), settings.selection_flags.get("input_dir"))
    prepare_output_dir(settings.output_dir, settings.overwrite)
    title = f"re-scored {'' if written_by == OURS else written_by + ' '}{path}"
    return Scored(predictions, [], title, data, checkpoints, {"file": str(path), "format": written_by}, None, review)


def score(settings: EvaluateSettings) -> Scored:
    """The split's groups scored by the model: held-out rows chosen (a run's training groups refused), replies and
    p_fail generated, guided reasons as the judge writes them."""
    if not settings.engine.model:
        raise EvaluationError("--model is required (or --predictions to re-score)")
    _check_operating_split(settings.targets, settings.split)
    checkpoints = settings.engine.checkpoints()
    # a model merged from a run's adapter (swift export --merge_lora: <run>/checkpoint-N-merged) obeys the run too
    selection, run, run_path, notes = selection_for(settings.selection_flags,
                                                    settings.engine.adapters or [settings.engine.model])
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    registry = load_registry()
    records = load_records(selection, registry)   # read once: the rows to score, and the review page's photos
    rows, counts, data = held_out_rows(selection, settings.split, run, run_path, settings.allow_train_overlap,
                                       records)
    chosen = registry.select(selection.missions)
    files = stage_a_files(selection, chosen, registry)
    if run and (changed := stage_a_changes(run, files, run_path)):
        print(f"note: Stage-A input differs from the training run's ({', '.join(changed)}): the overlap "
              f"check counts every group the run's split puts in train", file=sys.stderr)
    print(f"scoring {len(rows)} groups of the {settings.split} split: {selection.describe_split()}"
          + (f" (training run {run_path})" if run else ""))
    review = settings.review(records, selection.input_dir, files)
    prepare_output_dir(settings.output_dir, settings.overwrite)
    predictions = model_predictions(settings.engine, rows)
    data["reason_citations"] = settings.engine.reason_citations
    return Scored(with_evidence(predictions, records), [m.name for m in chosen if m.name in counts],
                  f"{settings.engine.describe()}, {settings.split} split", data, checkpoints, None,
                  promise_basis(records, {(r["mission"], r["group_id"]) for r in rows}), review)


def model_predictions(engine_settings: EngineSettings, rows: list[dict]) -> list[Prediction]:
    """Greedy replies and p_fail for each row (a row the model cannot take is kept, counted wrong), timed."""
    engine = engine_settings.engine(temperature=0.0)
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
    if engine_settings.guided:
        completions = guide_citations(engine, rows, completions)
    return predictions_from_rows(rows, completions, failed, p_fails)


def no_automation(op: dict, mission: str) -> bool:
    """A certified rule that decides none of its groups without review is not called certified (it automates
    nothing)."""
    return automates_nothing(op["missions"].get(mission, {}))


def print_summary(metrics: dict, output_dir: Path) -> None:
    """The terminal's account: what was left out of each promise, each operating point, the automation, and the
    verdict line's own figures."""
    op = metrics.get("operating_point")
    for mission, e in (op or {}).get("missions", {}).items():
        if e.get("left_out"):
            print(f"note: {mission}: " + "; ".join(f"{n} {w}" for w, n in e["left_out"].items())
                  + ": left out of the promise's bound (not a fair sample), kept as training labels", file=sys.stderr)
    for mission, e in (op or {}).get("missions", {}).items():
        print(f"operating point {mission}: " + (f"threshold {fmt_p(e['threshold'])}; at the threshold (p_fail "
                                                f"against t, as the judge decides) miss {pct1(e['miss_rate'])} "
                                                f"({e['misses']}/{e['n_fail']}), overkill {pct1(e['overkill_rate'])} "
                                                f"({e['overkills']}/{e['n_pass']})"
                                                if e.get("threshold") is not None else f"none ({e['why_none']})")
              + f"; {e['promise']}")
    if op:
        a = op["automation"]
        print(f"decided without review on these {op.get('evidence', 'validation')} groups: "
              f"{a['validation_auto_decided']} of {a['validation_groups']} "
              f"({pct1(a['automation_share'])} {_ci(a['automation_share_ci95'])}); certified: "
              f"{', '.join(m for m in a['certified_missions'] if not no_automation(op, m)) or 'no mission'}"
              + "".join(f"; no automation (people decide every group): {m}" for m in a["certified_missions"]
                        if no_automation(op, m)))
    replaces = (op or {}).get("replaces")
    if replaces:
        for mission, e in replaces["missions"].items():
            print(f"replaces {replaces['path']}: {mission}: "
                  + (f"WEAKER PROMISE ({'; '.join(e['weaker_because'])}): the judge sends every group of it to review "
                     f"until the owner accepts it (--accept_weaker 'words')" if e["weaker_because"] else
                     "promises no less than before"))
    o = metrics["overall"]
    print(f"{o['n']} groups, the verdict line as written: accuracy {pct1(o['accuracy'])}, miss rate "
          f"{pct1(o['miss_rate'])}, overkill rate "
          f"{pct1(o['overkill_rate'])}, invalid {o['invalid_verdicts']}; reasons: contradiction rate "
          f"{pct1(o.get('reason_contradiction_rate'))}, citation precision {pct1(o.get('citation_precision'))}, "
          f"recall {pct1(o.get('citation_recall'))} -> {output_dir}/report.md")
