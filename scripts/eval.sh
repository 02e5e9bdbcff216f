#!/usr/bin/env bash
# Held-out verdict quality per mission (miss rate, overkill rate, ...), optionally against a baseline.
#
#   bash scripts/eval.sh model=<dir> stage_a_dir=<dir> output_dir=<dir> [adapters=<ckpt>] [mission=all]
#        [split=val] [baseline=<metrics.json to compare with>] [overwrite=1] [cuda=<ids|cpu>]
# Writes <output_dir>/predictions.jsonl, metrics.json, report.md.
set -euo pipefail
cd "$(dirname "$0")/.."
model=""; stage_a_dir=output/stage_a; output_dir=output/eval; adapters=""; mission=all; split=val
baseline=""; overwrite=0; cuda=cpu
for arg in "$@"; do
  case "$arg" in
    model=*|stage_a_dir=*|output_dir=*|adapters=*|mission=*|split=*|baseline=*|overwrite=*|cuda=*)
      declare "${arg%%=*}=${arg#*=}" ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "error: unknown argument '$arg' (expected key=value; see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] || { echo "error: model=<checkpoint folder> is required" >&2; exit 2; }
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
[ "$cuda" = "cpu" ] && export CUDA_VISIBLE_DEVICES="" || export CUDA_VISIBLE_DEVICES="$cuda"
export HF_HUB_OFFLINE=1
args=(--model "$model" --stage_a_dir "$stage_a_dir" --output_dir "$output_dir" --mission "$mission" --split "$split")
[ -n "$adapters" ] && args+=(--adapters $adapters)
[ "$overwrite" = "1" ] && args+=(--overwrite)
"$PY" -m stage_b.evaluate "${args[@]}"
if [ -n "$baseline" ]; then
  "$PY" -m stage_b.compare "$baseline" "$output_dir/metrics.json" --names baseline candidate
fi
