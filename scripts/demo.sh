#!/usr/bin/env bash
# The offline main job (make demo): build a tiny Qwen2.5-VL with the real tokenizer, draw synthetic
# BBU photo groups for the four missions, run Stage-A over them, then run it again to show resume.
# Then Stage-B: preflight (reward spread before training) and a short GRPO run through
# `swift rlhf --external_plugins swift_plugins/qc_plugin.py` with LoRA on the last 2 LLM blocks.
# CPU only, no model hub. Training the tiny model so that it visibly learns is the next step (issue 5).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${DEMO_OUT:-demo_out}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"

echo "== 1/7 tiny random-weight Qwen2.5-VL (real architecture, real Qwen tokenizer) -> $OUT/models/tiny-qwen2_5_vl"
[ -f "$OUT/models/tiny-qwen2_5_vl/config.json" ] || \
  "$PY" scripts/make_tiny_model.py --arch qwen2_5_vl --out "$OUT/models/tiny-qwen2_5_vl" --force

echo "== 2/7 synthetic photo groups -> $OUT/photos"
[ -f "$OUT/photos/ground_truth.jsonl" ] || \
  "$PY" scripts/make_synthetic_qc.py --out "$OUT/photos" --seed 0 --groups-per-label 3

echo "== 3/7 Stage-A: one JSONL line per group, streamed (try: tail -f $OUT/stage_a/*_stage_a.jsonl)"
"$PY" -m stage_a.cli --input_dir "$OUT/photos" --output_dir "$OUT/stage_a" --model "$OUT/models/tiny-qwen2_5_vl" \
  --mission all --batch_size 8 --max_new_tokens 24 --max_pixels 37632 --overwrite

echo "== 4/7 the same command again: resumes, nothing left to do, the model is not even loaded"
"$PY" -m stage_a.cli --input_dir "$OUT/photos" --output_dir "$OUT/stage_a" --model "$OUT/models/tiny-qwen2_5_vl" \
  --mission all --batch_size 8 --max_new_tokens 24 --max_pixels 37632 --no_progress --log_level WARNING

echo
echo "Stage-A output (the tiny model is untrained, so its summaries are gibberish; the format is real):"
for f in "$OUT"/stage_a/*_stage_a.jsonl; do
  printf '  %-60s %3d groups\n' "$f" "$(wc -l < "$f")"
done
head -n 1 "$OUT/stage_a/BBU接地线检查_stage_a.jsonl" | "$PY" -m json.tool --no-ensure-ascii | head -20

echo
echo "== 5/7 Stage-B preflight: does the starting model give GRPO any reward spread?"
"$PY" -m stage_b.preflight --model "$OUT/models/tiny-qwen2_5_vl" --stage_a_dir "$OUT/stage_a" --groups 2 \
  --num_generations 4 --max_new_tokens 16 2>&1 | grep -v -E "^\[INFO|^Loading|it/s\]|warn" || true

echo "== 6/7 Stage-B GRPO, 4 steps on CPU (swift rlhf + our plugin; follow with tail -f $OUT/grpo/v*/logging.jsonl)"
rm -rf "$OUT/grpo"
bash scripts/run_grpo.sh mission=all cuda=cpu model="$OUT/models/tiny-qwen2_5_vl" stage_a_dir="$OUT/stage_a" \
  lora_last_k=2 num_generations=4 max_steps=4 output_dir="$OUT/grpo" \
  extra="--max_completion_length 16 --save_steps 4 --dynamic_sample false" > "$OUT/grpo.log" 2>&1 \
  || { tail -30 "$OUT/grpo.log"; exit 1; }
grep -E "group_qc" "$OUT/grpo.log" | sed 's/^/  /'
echo "  adapter: $(ls -d "$OUT"/grpo/v*/checkpoint-4)"
echo "  per-step rewards (untrained model: all zero until issue 5's SFT start point lands):"
"$PY" - "$OUT" <<'PY'
import glob, json, sys
for line in open(glob.glob(f"{sys.argv[1]}/grpo/v*/logging.jsonl")[0]):
    r = json.loads(line)
    if "rewards/qc_label/mean" in r:
        print(f"    step {r['global_step/max_steps']}: label {r['rewards/qc_label/mean']:.2f} "
              f"format {r['rewards/qc_format/mean']:.2f} consistency {r['rewards/qc_consistency/mean']:.2f} "
              f"zero-std {r['frac_reward_zero_std']:.2f}")
PY

echo "== 7/7 evaluation on the validation split: starting point vs GRPO result"
CKPT=$(ls -d "$OUT"/grpo/v*/checkpoint-4)
for run in base grpo; do
  extra_args=(); [ "$run" = grpo ] && extra_args=(--adapters "$CKPT")
  "$PY" -m stage_b.evaluate --model "$OUT/models/tiny-qwen2_5_vl" "${extra_args[@]}" --stage_a_dir "$OUT/stage_a" \
    --split val --output_dir "$OUT/eval/$run" --overwrite --max_new_tokens 16 2>&1 | tail -1
done
"$PY" -m stage_b.compare "$OUT/eval/base/metrics.json" "$OUT/eval/grpo/metrics.json" --names start grpo | head -12
"$PY" -m stage_b.plot_training "$OUT/grpo"
echo
echo "Reports: $OUT/eval/base/report.md  $OUT/eval/grpo/report.md   Training plot: $(ls "$OUT"/grpo/v*/training.png)"
