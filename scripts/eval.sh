#!/usr/bin/env bash
# Held-out verdict quality per mission (miss rate, overkill rate, ...), optionally against a baseline.
#
#   bash scripts/eval.sh model=<dir> output_dir=<dir> [adapters=<run>/checkpoint-N] [stage_a_dir=<dir>]
#        [mission=…] [split=val] [val_ratio=…] [split_seed=…] [allow_train_overlap=1]
#        [baseline=<metrics.json to compare with>] [overwrite=1] [cuda=<ids|cpu>]
#        [target_miss_rate="0.05 [MISSION=R …]"] [review_share=0.8] [images=0|1 max_pixels=N input_dir=<photos>]
# With adapters from a GRPO run, its group_qc_run.json supplies the Stage-A input, missions and split; a
# setting given here (or exported as GROUP_QC_*) overrides it, and groups the run trained on are refused.
# A photo-aware run's record also supplies images=1 and its max_pixels.
# Writes <output_dir>/predictions.jsonl, metrics.json, report.md, operating_curve.png, and with target_miss_rate
# operating_point.json (the thresholds scripts/judge.sh uses).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=cpu; baseline=""
args=()
for arg in "$@"; do
  value=${arg#*=}
  case "$arg" in
    model=*|output_dir=*|stage_a_dir=*|mission=*|split=*|val_ratio=*|split_seed=*|images=*|max_pixels=*|input_dir=*)
      args+=("--${arg%%=*}" "$value") ;;
    adapters=*) [ -n "$value" ] && args+=(--adapters $value) ;;
    target_miss_rate=*) [ -n "$value" ] && args+=(--target_miss_rate $value) ;;
    review_share=*) args+=(--review_share "$value") ;;
    overwrite=1|allow_train_overlap=1) args+=("--${arg%%=*}") ;;
    overwrite=*|allow_train_overlap=*) ;;
    baseline=*) baseline=$value ;;
    cuda=*) cuda=$value ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "error: unknown argument '$arg' (expected key=value; see --help)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
[ "$cuda" = "cpu" ] && export CUDA_VISIBLE_DEVICES="" || export CUDA_VISIBLE_DEVICES="$cuda"
export HF_HUB_OFFLINE=1
"$PY" -m stage_b.evaluate "${args[@]}"
if [ -n "$baseline" ]; then
  output_dir=$(printf '%s\n' "$@" | sed -n 's/^output_dir=//p' | tail -1)
  "$PY" -m stage_b.compare "$baseline" "$output_dir/metrics.json" --names baseline candidate
fi
