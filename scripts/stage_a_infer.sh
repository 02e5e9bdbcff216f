#!/usr/bin/env bash
# Stage-A launcher: per-photo summaries for one mission or all, on CPU or on GPUs (one process per
# GPU, each a data-parallel shard, merged at the end).
#
#   bash scripts/stage_a_infer.sh mission=<name|alias|all> cuda=<ids|cpu> \
#        [input_dir=… output_dir=… model=… adapters=… batch_size=8|auto backend=transformers|vllm \
#         max_pixels=… max_new_tokens=… num_shards=N (CPU only) unlabeled=1 extra="--more --flags" verbose=1]
# unlabeled=1: new, unreviewed work orders at <input_dir>/<mission>/<group>/*.jpg (no 审核通过/审核不通过
# folder); records get "label": null (passes --unlabeled).
# Each value is one argument as typed (adapters="/models/my lora/checkpoint-5" is one folder); extra= is split as a
# shell splits words, nothing expanded. Relative paths are the folder you run this from (defaults included).
#
# Examples:
#   bash scripts/stage_a_infer.sh mission=BBU接地线检查 cuda=0 model=/models/Qwen2.5-VL-7B-Instruct
#   bash scripts/stage_a_infer.sh mission=all cuda=0,1,2,3 backend=vllm batch_size=32 model=…
#   bash scripts/stage_a_infer.sh mission=all cuda=0 unlabeled=1 input_dir=data/today output_dir=output/today model=…
# Progress: tail -f <output_dir>/<mission>_stage_a.jsonl (or the .shard-* part files while sharded).
set -euo pipefail
source "$(dirname "$0")/launcher.sh"   # --help, repo root, $PY, settings

mission=all; cuda=cpu; input_dir=data/photos; output_dir=output/stage_a; model=""; adapters=""
batch_size=8; backend=transformers; max_pixels=""; max_new_tokens=""; num_shards=1; unlabeled=0; extra=(); verbose=0
settings "mission cuda input_dir output_dir model adapters batch_size backend max_pixels max_new_tokens
          num_shards:count unlabeled:flag extra:words verbose:flag" "model" "$@"
if ! [[ "$cuda" =~ ^(cpu|[A-Za-z0-9:_-]+(,[A-Za-z0-9:_-]+)*)$ ]]; then   # no id at all would run no shard
  echo "error: cuda=$cuda: expected cpu or GPU ids separated by commas (cuda=0,1)" >&2; exit 2
fi
if [ "$cuda" != "cpu" ] && [ "$num_shards" != 1 ]; then
  echo "error: num_shards=$num_shards is for cuda=cpu; with GPUs one shard runs per id in cuda=$cuda" >&2; exit 2
fi
from_caller_dir
library_log_in "$output_dir"

args=(--input_dir "$input_dir" --output_dir "$output_dir" --model "$model" --mission "$mission"
      --batch_size "$batch_size" --infer_backend "$backend")
[ -n "$adapters" ] && args+=(--adapters "$adapters")
[ -n "$max_pixels" ] && args+=(--max_pixels "$max_pixels")
[ -n "$max_new_tokens" ] && args+=(--max_new_tokens "$max_new_tokens")
[ "$unlabeled" = 1 ] && args+=(--unlabeled)
args+=("${extra[@]}")

if [ "$cuda" = "cpu" ]; then
  export CUDA_VISIBLE_DEVICES=""
  IFS=' ' read -r -a devices <<< "$(seq -s ' ' 1 "$num_shards")"
else
  IFS=',' read -r -a devices <<< "$cuda"
fi
n=${#devices[@]}
if [ "$n" -eq 1 ]; then
  [ "$cuda" != "cpu" ] && export CUDA_VISIBLE_DEVICES="$cuda"
  exec "$PY" -m group_qc stage-a "${args[@]}"
fi

mkdir -p "$output_dir/logs"
pids=()
for i in "${!devices[@]}"; do
  dev=""; [ "$cuda" != "cpu" ] && dev="${devices[$i]}"
  CUDA_VISIBLE_DEVICES="$dev" "$PY" -m group_qc stage-a "${args[@]}" --num_shards "$n" --shard_index "$i" \
    --no_progress > "$output_dir/logs/stage_a.shard-$i.log" 2>&1 &
  pids+=($!)
  echo "shard $i/$n on ${dev:-cpu}: pid ${pids[-1]}, log $output_dir/logs/stage_a.shard-$i.log"
done
status=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then echo "error: shard $i failed; see $output_dir/logs/stage_a.shard-$i.log" >&2; status=1; fi
done
[ "$status" -eq 0 ] || exit "$status"
exec "$PY" -m group_qc stage-a-merge --output_dir "$output_dir" --mission "$mission"
