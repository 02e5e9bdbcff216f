#!/usr/bin/env bash
# The offline main job (make demo), CPU only, no model hub. It shows group-qc learning, end to end:
#   1 a tiny random-weight Qwen2.5-VL (real architecture, real Qwen tokenizer)
#   2 synthetic BBU photo groups: a "workshop" set to teach the tiny model, a "field" set it never saw
#   3 swift sft: the Stage-A summary model (photo -> one-line summary) on workshop photos
#   4 Stage-A over the field photos (streaming JSONL), again to show resume, then its summary accuracy
#   5 swift sft: the Stage-B start point on workshop groups. It writes the two-line format with grounded
#     reasons and can say which photo carries a remark, but saw every group with BOTH verdicts, so its
#     verdicts carry no signal
#   6 preflight, then GRPO (swift rlhf + swift_plugins/qc_plugin.py, LoRA on the last 4 of 6 LLM
#     blocks) on the field groups' train split
#   7 evaluation of the start point and the GRPO result on the field groups' validation split
# Sizes and steps are environment variables (DEMO_*), so tests/test_learning.py runs a reduced copy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
SWIFT=${SWIFT:-$(dirname "$PY")/swift}
OUT=${DEMO_OUT:-demo_out}
WORKSHOP_GROUPS=${DEMO_WORKSHOP_GROUPS:-40}   # per label and mission
FIELD_GROUPS=${DEMO_FIELD_GROUPS:-30}
STAGE_A_SFT_STEPS=${DEMO_STAGE_A_SFT_STEPS:-200}
STAGE_B_SFT_STEPS=${DEMO_STAGE_B_SFT_STEPS:-150}
GRPO_STEPS=${DEMO_GRPO_STEPS:-30}
MIN_STAGE_A_ACCURACY=${DEMO_MIN_STAGE_A_ACCURACY:-0.9}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false CUDA_VISIBLE_DEVICES=""
# A finished step is reused on the next run, but never from another version of the recipe: photos or
# models made by older code would silently disagree with this one. Only the demo's own outputs are removed.
RECIPE=$(cat scripts/demo.sh scripts/make_synthetic_qc.py scripts/make_sft_data.py scripts/make_tiny_model.py \
  | sha1sum | cut -c1-12)
if [ -d "$OUT" ] && [ "$(cat "$OUT/.recipe" 2>/dev/null)" != "$RECIPE" ]; then
  echo "$OUT was made by another version of the demo: starting afresh"
  rm -rf "$OUT"/{models,photos,sft,stage_a,grpo,eval} "$OUT"/stage_a_scores.json "$OUT"/grpo.log
fi
mkdir -p "$OUT"
echo "$RECIPE" > "$OUT/.recipe"
START=$(date +%s)
step() { echo; echo "== $1  [$(( $(date +%s) - START )) s]"; }
quiet() { grep -v -E "^\[INFO|^\[WARNING|^Loading|it/s\]|s/it\]|warn|^\s*$" || true; }

# Full-parameter SFT of the tiny model (it starts from random weights). ms-swift itself; --padding_side
# left keeps the vocabulary logits to the replies (5x faster on this CPU).
sft() {  # sft <model> <rows.jsonl> <out> <steps> [more flags]
  local model=$1 rows=$2 out=$3 steps=$4; shift 4
  # A finished run is reused (make demo again picks up where it stopped); DEMO_FRESH=1 retrains.
  if [ -z "${DEMO_FRESH:-}" ] && ls -d "$out"/v*/checkpoint-"$steps" > /dev/null 2>&1; then
    ls -d "$out"/v*/checkpoint-"$steps" | tail -1; return
  fi
  rm -rf "$out"
  "$SWIFT" sft --model "$model" --model_type qwen2_5_vl --template qwen2_5_vl --dataset "$rows" \
    --split_dataset_ratio 0 --tuner_type full --torch_dtype float32 --learning_rate 5e-3 --warmup_ratio 0.05 \
    --lr_scheduler_type cosine --per_device_train_batch_size 8 --max_steps "$steps" --padding_side left \
    --logging_steps 10 --save_steps "$steps" --save_only_model true --report_to none --check_model false \
    --dataloader_num_workers 0 --gradient_checkpointing false --max_length 1024 --output_dir "$out" "$@" > "$out.log" 2>&1 \
    || { tail -30 "$out.log"; exit 1; }
  ls -d "$out"/v*/checkpoint-"$steps"
}

step "1/7 tiny random-weight Qwen2.5-VL -> $OUT/models/tiny-qwen2_5_vl"
[ -f "$OUT/models/tiny-qwen2_5_vl/config.json" ] || \
  "$PY" scripts/make_tiny_model.py --arch qwen2_5_vl --out "$OUT/models/tiny-qwen2_5_vl" --force

step "2/7 synthetic photo groups: $OUT/photos/workshop (teaching) and $OUT/photos/field (held out)"
[ -f "$OUT/photos/workshop/ground_truth.jsonl" ] || \
  "$PY" scripts/make_synthetic_qc.py --out "$OUT/photos/workshop" --seed 0 --groups-per-label "$WORKSHOP_GROUPS"
[ -f "$OUT/photos/field/ground_truth.jsonl" ] || \
  "$PY" scripts/make_synthetic_qc.py --out "$OUT/photos/field" --seed 1 --groups-per-label "$FIELD_GROUPS"

# The random vision tower is frozen: its features already separate defect from fine photos (a linear
# probe on them: 100% held out), and training it at this lr destroyed that (84-88%) and left the
# summaries at 80%. Defect photos appear twice so each step sees enough of them (95% vs 90%, measured).
step "3/7 swift sft: Stage-A summary model on workshop photos ($STAGE_A_SFT_STEPS steps, aligner + LLM)"
"$PY" scripts/make_sft_data.py stage_a --photos "$OUT/photos/workshop" --out "$OUT/sft/stage_a.jsonl" --defect_repeats 2
STAGE_A_MODEL=$(sft "$OUT/models/tiny-qwen2_5_vl" "$OUT/sft/stage_a.jsonl" "$OUT/sft/stage_a" "$STAGE_A_SFT_STEPS" \
  --freeze_vit true --freeze_aligner false --max_pixels 37632)
echo "  summary model: $STAGE_A_MODEL"

step "4/7 Stage-A on the field photos: one JSONL line per group, streamed (tail -f $OUT/stage_a/*_stage_a.jsonl)"
"$PY" -m stage_a.cli --input_dir "$OUT/photos/field" --output_dir "$OUT/stage_a" --model "$STAGE_A_MODEL" \
  --mission all --batch_size 16 --max_new_tokens 48 --max_pixels 37632 --overwrite --no_progress --log_level WARNING
echo "  the same command again resumes: nothing left to do, the model is not even loaded"
"$PY" -m stage_a.cli --input_dir "$OUT/photos/field" --output_dir "$OUT/stage_a" --model "$STAGE_A_MODEL" \
  --mission all --batch_size 16 --max_new_tokens 48 --max_pixels 37632 --no_progress --log_level WARNING
"$PY" -c 'import json, sys; print(json.dumps(json.loads(open(sys.argv[1], encoding="utf-8").readline()),
  ensure_ascii=False, indent=2)[:900])' "$OUT/stage_a/BBU接地线检查_stage_a.jsonl"
echo "  Stage-A summaries vs the field photos' ground truth:"
"$PY" scripts/score_stage_a.py --photos "$OUT/photos/field" --stage_a_dir "$OUT/stage_a" \
  --min_accuracy "$MIN_STAGE_A_ACCURACY" --json "$OUT/stage_a_scores.json" \
  || echo "  WARNING: below the ${MIN_STAGE_A_ACCURACY} target: summaries that miss a defect make those fail groups unlearnable for Stage-B; the demo goes on"

step "5/7 swift sft: Stage-B start point on workshop groups (both verdicts per group + reading task)"
"$PY" scripts/make_sft_data.py stage_b --photos "$OUT/photos/workshop" --out "$OUT/sft/stage_b_start.jsonl" \
  --verdicts both --reading
START_MODEL=$(sft "$OUT/models/tiny-qwen2_5_vl" "$OUT/sft/stage_b_start.jsonl" "$OUT/sft/stage_b_start" \
  "$STAGE_B_SFT_STEPS")
echo "  start point: $START_MODEL"

step "6/7 preflight, then Stage-B GRPO ($GRPO_STEPS steps; follow with tail -f $OUT/grpo/v*/logging.jsonl)"
"$PY" -m stage_b.preflight --model "$START_MODEL" --stage_a_dir "$OUT/stage_a" --groups 4 \
  --num_generations 8 --max_new_tokens 32 2>&1 | quiet
# Demo recipe for a 10M-parameter model on 2 CPU cores (configs/stage_b_grpo.yaml holds the GPU one):
# label-balanced steps of 4 groups x 8 samples, LoRA r16 on the last 4 of 6 blocks, lr 2e-3 constant.
# Rollouts stop after the verdict line (3 tokens) and only qc_label scores them: over the whole
# two-line reply the reason tokens' noise drowned the verdict's signal (30 steps flat at lr 2e-3 and
# 5e-3, measured); the start point's grounded reasons are kept as they are.
rm -rf "$OUT/grpo"
bash scripts/run_grpo.sh mission=all cuda=cpu model="$START_MODEL" stage_a_dir="$OUT/stage_a" \
  lora_last_k=4 num_generations=8 prompts_per_step=4 max_steps="$GRPO_STEPS" output_dir="$OUT/grpo" \
  extra="--learning_rate 2e-3 --lr_scheduler_type constant --warmup_ratio 0 --max_completion_length 3 \
         --reward_funcs qc_label --reward_weights 1.0 --dynamic_sample false --save_steps $GRPO_STEPS \
         --logging_steps 1" > "$OUT/grpo.log" 2>&1 || { tail -30 "$OUT/grpo.log"; exit 1; }
grep -E "group_qc" "$OUT/grpo.log" | sed 's/^/  /' | cut -c1-200
GRPO_ADAPTER=$(ls -d "$OUT"/grpo/v*/checkpoint-"$GRPO_STEPS")
"$PY" - "$OUT" <<'PY'
import glob, json, sys
rows = [json.loads(l) for l in open(glob.glob(f"{sys.argv[1]}/grpo/v*/logging.jsonl")[0])]
label = [r["rewards/qc_label/mean"] for r in rows if "rewards/qc_label/mean" in r]
print("  label reward per step:", " ".join(f"{x:.2f}" for x in label))
k = max(1, len(label) // 5)
print(f"  first {k} steps {sum(label[:k]) / k:.2f} -> last {k} steps {sum(label[-k:]) / k:.2f}")
PY

step "7/7 evaluation on the field groups' validation split: start point vs GRPO"
for run in start grpo; do
  extra_args=(); [ "$run" = grpo ] && extra_args=(--adapters "$GRPO_ADAPTER")
  "$PY" -m stage_b.evaluate --model "$START_MODEL" "${extra_args[@]}" --stage_a_dir "$OUT/stage_a" \
    --split val --output_dir "$OUT/eval/$run" --overwrite --max_new_tokens 32 2>&1 | tail -1
done
"$PY" -m stage_b.compare "$OUT/eval/start/metrics.json" "$OUT/eval/grpo/metrics.json" --names start grpo
"$PY" -m stage_b.plot_training "$OUT/grpo"
echo
echo "Reports: $OUT/eval/start/report.md  $OUT/eval/grpo/report.md   Training plot: $(ls "$OUT"/grpo/v*/training.png)"
echo "Total: $(( $(date +%s) - START )) s"
