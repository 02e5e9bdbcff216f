"""Which groups an evaluation scores: a training run's split, or every group it did not train on (held out), with
the weight each may carry in a promise (stage_b.rules.routes) and what the promise rests on."""
from __future__ import annotations

from stage_b.data.dataset import build_rows, load_records
from qc_core.checkpoints import stage_a_identity
from qc_core.records import StageARecord
from stage_b.rules.routes import evidence_weight, why_not_fair
from stage_b.train.run_record import run_selection, train_overlap
from stage_b.data.settings import Selection
from stage_b.evaluate.predictions import EvaluationError, Prediction

HELD_OUT = "held_out"   # --split: every group the training run did not train on

def with_evidence(predictions: list[Prediction], records: list[StageARecord]) -> list[Prediction]:
    """Each prediction with its `evidence` (stage_b.rules.routes): the weight its group may have in a promise's bound,
    from
    the `review` record stage_b.labels.decisions wrote on its labelled Stage-A record (none: the original labelled
    data)."""
    reviews = {(r["mission"], r["group_id"]): r.get("review") for r in records}
    out: list[Prediction] = []
    for p in predictions:
        review = reviews.get((p["mission"], p["group_id"]))
        out.append({**p, "evidence": {"weight": evidence_weight(review), "why_not": why_not_fair(review),
                                      "route": (review or {}).get("route"),
                                      "decided_at": (review or {}).get("decided_at")}})
    return out

def promise_basis(records: list[StageARecord], scored: set) -> dict:
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

def _records_for(data: dict | None) -> list[StageARecord]:
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

def without_trained(rows: list[dict], trained: list[dict]) -> list[dict]:
    """The rows whose group (its mission and id: one work order in two missions is two groups) is not trained on."""
    keys = {(r["mission"], r["group_id"]) for r in trained}
    return [r for r in rows if (r["mission"], r["group_id"]) not in keys]

def held_out_rows(selection: Selection, split: str, run: dict | None, run_path, allow_overlap: bool,
                  records: list[StageARecord] | None = None):
    """The rows to score and what metrics.json records about them; refuses groups the run trained on. `held_out`:
    every group of the selection the run did not train on (its validation groups, and groups it never saw, such as
    work orders reviewers labelled since: stage_b.labels.decisions)."""
    if split == HELD_OUT:
        if not run:
            raise EvaluationError("--split held_out means the groups a training run did not train on: give the run's "
                                  "adapters (--adapters <run>/checkpoint-N), or use --split val or all")
        rows, counts = build_rows(selection, "all", allow_empty=True, records=records)
        trained = train_overlap(run, run_path, rows)
        rows = without_trained(rows, trained)
        counts = {m: {**c, "rows": sum(r["mission"] == m for r in rows)} for m, c in counts.items()}
        print(f"held out from the training run: {len(rows)} groups ({len(trained)} it trained on left out)")
        overlap = []   # checked once: the groups the run trained on were just left out
    else:
        rows, counts = build_rows(selection, split, allow_empty=True, records=records)
        overlap = train_overlap(run, run_path, rows) if run else []
    if overlap and run is not None and not allow_overlap:   # only a run has a train split to overlap
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
