"""`group-qc evaluate`: held-out verdict quality per mission.

    group-qc evaluate --model DIR [--adapters RUN/checkpoint-N] [--stage_a_dir DIR] [--mission all]
                      [--split val] --output_dir DIR [--overwrite]
    group-qc evaluate --predictions predictions.jsonl --output_dir DIR   # re-score, no model
    group-qc evaluate --predictions swift_infer_result.jsonl --output_dir DIR
        # score `swift infer --external_plugins swift_plugins/qc_plugin.py --val_dataset group_qc_val
        # --result_path swift_infer_result.jsonl` (or group_qc_val rows carrying `swift deploy` chat completions)

Generates greedy verdicts for the split (the same group-id hash split as training) through an ms-swift
engine, in batches, and writes predictions.jsonl, metrics.json and report.md (stage_b.stats.metrics). Each
prediction also carries p_fail, the model's probability of 不通过 against 通过 as the first line
(stage_b.rules.operating_point), and metrics.json, report.md and operating_curve.png give the miss/overkill
curve over thresholds. With --target_miss_rate R (plus MISSION=R overrides) on the validation split,
operating_point.json holds each mission's threshold for `group-qc judge`.

Given an adapter from a GRPO run, the run's group_qc_run.json supplies the Stage-A input, missions and
split unless a flag or GROUP_QC_* variable says otherwise, and any group the run trained on is refused
(--allow_train_overlap scores it anyway and the report says so).

The package: `predictions` (scored and read back), `held_out` (which groups), `report` (report.md), `outputs`
(the folder), `cli` (the command); p_fail and guided reasons come from stage_b.model.model_replies, as the judge's do.
"""
from __future__ import annotations

# The package's public names (what commands, tests and the dev tools use); the rest lives in its modules.
from stage_b.model.model_replies import verdict_probabilities
from stage_b.evaluate.cli import EvaluateSettings, evaluate, main
from stage_b.evaluate.held_out import HELD_OUT, held_out_rows, without_trained
from stage_b.evaluate.outputs import OUTPUTS, operating_curves, prepare_output_dir, review_inputs, write_outputs
from stage_b.evaluate.predictions import EvaluationError, predictions_from_rows, read_prediction_file, read_predictions
from stage_b.evaluate.report import render_operating, render_promises, render_report

__all__ = ["EvaluateSettings", "EvaluationError", "HELD_OUT", "OUTPUTS", "evaluate", "held_out_rows", "main",
           "operating_curves", "predictions_from_rows", "prepare_output_dir", "read_prediction_file",
           "read_predictions", "render_operating", "render_promises", "render_report", "review_inputs",
           "verdict_probabilities", "without_trained", "write_outputs"]
