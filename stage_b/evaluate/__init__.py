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

The package: `predictions` (scored and read back), `held_out` (which groups), `report` (report.md), `outputs`
(the folder), `cli` (the command); p_fail and guided reasons come from stage_b.model_replies, as the judge's do.
"""
from __future__ import annotations

from .cli import EvaluateSettings, evaluate, main  # noqa: F401
from .held_out import (  # noqa: F401
    HELD_OUT,
    _check_operating_split,
    _records_for,
    held_out_rows,
    promise_basis,
    with_evidence,
    without_trained,
)
from ..model_replies import guide_citations, verdict_probabilities  # noqa: F401
from .outputs import (  # noqa: F401
    OUTPUTS,
    operating_curves,
    prepare_output_dir,
    review_inputs,
    write_outputs,
    write_review,
)
from .predictions import (  # noqa: F401
    DATASET_FIELDS,
    OPENAI,
    OURS,
    PREDICTION_FIELDS,
    SWIFT_INFER,
    EvaluationError,
    _as_ours,
    _chat_text,
    _checked_row,
    _format_of,
    predictions_from_rows,
    read_prediction_file,
    read_predictions,
    score_prediction,
)
from .report import (  # noqa: F401
    CURVE_TARGETS,
    _ci,
    _md,
    _md_items,
    _pct,
    render_calibration,
    render_grounding,
    render_operating,
    render_promises,
    render_report,
)
