#!/usr/bin/env bash
# Held-out verdict quality per mission (miss rate, overkill rate, ...), optionally against a baseline.
#
#   bash scripts/eval.sh model=<dir> output_dir=<dir> [adapters=<run>/checkpoint-N] [stage_a_dir=<dir>]
#        [mission=…] [split=val] [val_ratio=…] [split_seed=…] [allow_train_overlap=1]
#        [baseline=<metrics.json to compare with>] [overwrite=1] [cuda=<ids|cpu>]
#        [target_miss_rate="0.05 [MISSION=R …]"] [confidence=0.9] [target_overkill_rate="0.2 [MISSION=O …]"]
#        [review_share=0.8] [images=0|1 max_pixels=N input_dir=<photos>] [verbose=1]
# With adapters from a GRPO run, its group_qc_run.json supplies the Stage-A input, missions and split; a
# setting given here (or exported as GROUP_QC_*) overrides it, and groups the run trained on are refused.
# A photo-aware run's record also supplies images=1 and its max_pixels.
# Writes <output_dir>/predictions.jsonl, metrics.json, report.md, operating_curve.png, reliability.png, and with
# target_miss_rate operating_point.json (the thresholds scripts/judge.sh uses, each mission's promise certified at
# the confidence, or not, with the number of defective validation groups that would certify it).
# Each value is one argument as typed (adapters="/models/my lora/checkpoint-5" is one folder); target_miss_rate= and
# target_overkill_rate= are split as a shell splits words, nothing expanded. Relative paths are the folder you run
# this from.
set -euo pipefail
source "$(dirname "$0")/launcher.sh"   # --help, repo root, $PY, settings

FLAGS="model output_dir stage_a_dir mission split val_ratio split_seed images max_pixels input_dir review_share confidence"
for key in $FLAGS adapters baseline; do declare "$key="; done
target_miss_rate=(); target_overkill_rate=(); cuda=cpu; overwrite=0; allow_train_overlap=0; verbose=0
settings "$FLAGS adapters target_miss_rate:words target_overkill_rate:words overwrite:flag allow_train_overlap:flag
          baseline cuda verbose:flag" "model output_dir" "$@"
from_caller_dir
args=()
for key in $FLAGS; do [ -n "${!key}" ] && args+=("--$key" "${!key}"); done
[ -n "$adapters" ] && args+=(--adapters "$adapters")
[ "${#target_miss_rate[@]}" -gt 0 ] && args+=(--target_miss_rate "${target_miss_rate[@]}")
[ "${#target_overkill_rate[@]}" -gt 0 ] && args+=(--target_overkill_rate "${target_overkill_rate[@]}")
[ "$overwrite" = 1 ] && args+=(--overwrite)
[ "$allow_train_overlap" = 1 ] && args+=(--allow_train_overlap)
[ "$cuda" = "cpu" ] && export CUDA_VISIBLE_DEVICES="" || export CUDA_VISIBLE_DEVICES="$cuda"
export HF_HUB_OFFLINE=1
library_log_in "$output_dir"
"$PY" -m group_qc evaluate "${args[@]}"
if [ -n "$baseline" ]; then
  "$PY" -m group_qc compare "$baseline" "$output_dir/metrics.json" --names baseline candidate
fi
