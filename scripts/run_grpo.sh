#!/usr/bin/env bash
# Stage-B GRPO launcher: ms-swift's `swift rlhf` with configs/stage_b_grpo.yaml, our plugin, and LoRA on
# the last K LLM blocks of the checkpoint.
#
#   bash scripts/run_grpo.sh mission=<name|alias|a,b|all> cuda=<ids|cpu> model=<dir> \
#        [stage_a_dir=output/stage_a output_dir=output/stage_b_grpo lora_last_k=4 num_generations=… prompts_per_step=… \
#         max_steps=… deepspeed=zero2|zero3|zero3_offload|none rollout=colocate|server|hf \
#         vllm_server=HOST:PORT config=configs/stage_b_grpo.yaml dry_run=1 model_type=… template=… \
#         images=1 max_pixels=200704 input_dir=<photos> \
#         extra="--more --flags"]
#
# cuda=0,1,2,3 trains data-parallel on 4 GPUs (NPROC_PER_NODE=4; set NNODES, NODE_RANK, MASTER_ADDR and
# MASTER_PORT in the environment for several machines); cuda=cpu drops vLLM and DeepSpeed and runs fp32.
# rollout=hf deepspeed=none: a GPU without vLLM or DeepSpeed (rollouts by the trainer's own generate). Where either
# is not installed the YAML's default that needs it is dropped with a note; a setting asking for it is refused.
# images=1 trains photo-aware: each group's photos beside their summaries, vision tower frozen.
# dry_run=1 prints the final command and exits. Follow a run: tail -f <output_dir>/v*/logging.jsonl
set -euo pipefail
source "$(dirname "$0")/launcher.sh"   # --help, repo root, $PY
from_caller_dir   # relative paths in the settings are the caller's (the plugin path is made absolute)
exec "$PY" -m group_qc grpo "$@"   # stage_b.train.launch parses the key=value settings (qc_core.key_values)
