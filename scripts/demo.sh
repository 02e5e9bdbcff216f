#!/usr/bin/env bash
# The offline main job (make demo): build a tiny Qwen2.5-VL with the real tokenizer, draw synthetic
# BBU photo groups for the four missions, run Stage-A over them, then run it again to show resume.
# CPU only, no model hub. Later stages (Stage-B GRPO, evaluation) join this script as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${DEMO_OUT:-demo_out}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"

echo "== 1/4 tiny random-weight Qwen2.5-VL (real architecture, real Qwen tokenizer) -> $OUT/models/tiny-qwen2_5_vl"
[ -f "$OUT/models/tiny-qwen2_5_vl/config.json" ] || \
  "$PY" scripts/make_tiny_model.py --arch qwen2_5_vl --out "$OUT/models/tiny-qwen2_5_vl" --force

echo "== 2/4 synthetic photo groups -> $OUT/photos"
[ -f "$OUT/photos/ground_truth.jsonl" ] || \
  "$PY" scripts/make_synthetic_qc.py --out "$OUT/photos" --seed 0 --groups-per-label 3

echo "== 3/4 Stage-A: one JSONL line per group, streamed (try: tail -f $OUT/stage_a/*_stage_a.jsonl)"
"$PY" -m stage_a.cli --input_dir "$OUT/photos" --output_dir "$OUT/stage_a" --model "$OUT/models/tiny-qwen2_5_vl" \
  --mission all --batch_size 8 --max_new_tokens 24 --max_pixels 37632 --overwrite

echo "== 4/4 the same command again: resumes, nothing left to do, the model is not even loaded"
"$PY" -m stage_a.cli --input_dir "$OUT/photos" --output_dir "$OUT/stage_a" --model "$OUT/models/tiny-qwen2_5_vl" \
  --mission all --batch_size 8 --max_new_tokens 24 --max_pixels 37632 --no_progress --log_level WARNING

echo
echo "Stage-A output (the tiny model is untrained, so its summaries are gibberish; the format is real):"
for f in "$OUT"/stage_a/*_stage_a.jsonl; do
  printf '  %-60s %3d groups\n' "$f" "$(wc -l < "$f")"
done
head -n 1 "$OUT/stage_a/BBU接地线检查_stage_a.jsonl" | "$PY" -m json.tool --no-ensure-ascii | head -20
