#!/usr/bin/env bash
# A day's work orders, one command: Stage-A (--unlabeled) then the verdict model, every mission in one run of each.
#
#   bash scripts/judge.sh mission=<name|alias|all> cuda=<ids|cpu> input_dir=<work orders> output_dir=<dir> \
#        stage_a_model=<dir> [stage_a_adapters=<dir>] model=<dir> [adapters=<run>/checkpoint-N] \
#        (operating_point=<operating_point.json> | threshold=<0..1>) \
#        [batch_size=16] [audit_share=0.05|plan] [audit_seed=N] [labels=<labels dir>]
#        [monitor=<monitor.json> | monitor=none monitor_why="why, in words"] [accept_weaker="the owner's words"]
#        [reviewers=王工,李工 [overlap_share=0.1]] [gold_share=0.05|0]
#        [stage_a_extra="--max_new_tokens 48"] [judge_extra="--max_new_tokens 64"]
#        [monitor_extra="--drift_alpha 0.001 --tightened_clean_days 5 --false_alarm_years 10"] [verbose=1]
#
# Live promises (group-qc monitor): each day is its own output_dir beside the others (days/2026-11-27, …). With
# labels=<the folder group-qc decisions writes>, the day starts by monitoring every day folder beside
# output_dir judged at this operating point into <their parent>/monitor/ (monitor.json, index.html); the judge then
# reads the latest <parent>/monitor/monitor.json (monitor= names another, monitor=none reads none) and sends every group
# of a mission whose promise it withdrew to review; a withdrawal is also recorded beside the operating point
# (<stem>.withdrawals.jsonl, stage_b.rules.withdrawals), which the judge reads with any monitor= or none. A certified
# mission decides work without review only with a monitor's state, or on the first day at its operating point under
# this parent (no day before it: said so on every verdict line), or with monitor=none and monitor_why= in words; else
# every group of it goes to review, saying why (the guard fails closed). audit_share= of the groups decided without
# review are drawn for a blind audit (stage_b.rules.routes): a share, or plan (group-qc plan-audits at the day's volume); a
# tightened mission is raised to the share the monitor asks for (stage_b.monitoring.day_shares). accept_weaker= is the owner's
# acceptance, in words, of an operating point that promises less than the one it replaces (stage_b.rules.replacement):
# without it every group of such a mission goes to review. reviewers= splits the groups
# sent to people among them, overlap_share= of them decided by two, blind to each other (stage_b.labels.assign; the import
# measures their agreement). With labels=, gold_share= of each mission's groups (default 0.05; 0 turns it off) are
# known-answer groups drawn from the labels, looking like blind audits, that measure each reviewer (stage_b.labels.gold).
#
# input_dir holds unreviewed groups: <mission>/<group folder>/*.jpg. Per mission: Stage-A summaries go to
# <output_dir>/stage_a/<mission>_stage_a.jsonl, then verdicts to <output_dir>/<mission>_verdicts.jsonl
# (tail -f it: one line per group as it is judged). Rerunning the same command resumes both steps.
# A mission that fails (its Stage-A, or its judge) does not stop the others: they are judged, then the command
# names the failed missions and exits non-zero. A mission the operating point has no threshold for is judged
# with every group sent to review (group-qc judge).
# The operating point comes from: group-qc evaluate --target_miss_rate R (see README).
# Each value is one argument as typed (adapters="/models/my lora/checkpoint-5" is one folder); stage_a_extra= and
# judge_extra= are split as a shell splits words, nothing expanded. Relative paths are the folder you run this from.
set -euo pipefail
source "$(dirname "$0")/launcher.sh"   # --help, repo root, $PY, settings

mission=all; cuda=cpu; input_dir=""; output_dir=""; stage_a_model=""; stage_a_adapters=""; model=""; adapters=""
operating_point=""; threshold=""; batch_size=16; stage_a_extra=(); judge_extra=(); audit_share=0.05; audit_seed=""
labels=""; monitor=""; monitor_why=""; accept_weaker=""; reviewers=""; overlap_share=""; monitor_extra=(); verbose=0; gold_share=""
settings "mission cuda input_dir output_dir stage_a_model stage_a_adapters model adapters operating_point threshold
          batch_size audit_share audit_seed labels monitor monitor_why accept_weaker reviewers overlap_share stage_a_extra:words
          judge_extra:words
          monitor_extra:words verbose:flag gold_share" \
         "input_dir output_dir stage_a_model model" "$@"
from_caller_dir
if [ -z "$operating_point" ] && [ -z "$threshold" ]; then
  echo "error: operating_point=<operating_point.json> or threshold=<0..1> is required" >&2; exit 2
fi
export HF_HUB_OFFLINE=1
library_log_in "$output_dir"
days_parent=$(dirname "$output_dir")
monitor_dir="$days_parent/monitor"

# Settings a day cannot run without are checked before Stage-A reads a single photo: the operating point file, the
# audit share and seed, the labels folder, a monitor= file.
"$PY" -m stage_b.judging.day_checks settings "$operating_point" "$audit_share" "$labels" "$reviewers" \
  "$overlap_share" "$audit_seed" "$monitor" "$monitor_why" || exit 2

# Days judged at this operating point under the parent, today's folder apart (a resumed day is still the first)
days_before=0
if [ -n "$operating_point" ]; then
  days_before=$("$PY" -m stage_b.judging.day_checks days-before "$days_parent" "$output_dir" "$operating_point")
fi
# labels= may not exist yet on the first day at an operating point (nothing was reviewed); later it must
if [ -n "$labels" ] && [ ! -d "$labels" ]; then
  if [ "$days_before" -gt 0 ] && [ "$monitor" != "none" ]; then
    echo "error: labels=$labels does not exist, and $days_before day(s) under $days_parent were judged at this" \
         "operating point before: give the folder group-qc decisions --output_dir wrote for them" >&2
    exit 2
  fi
  echo "== labels=$labels does not exist yet: nothing to monitor on the first day at this operating point" \
       "(group-qc decisions --output_dir $labels makes it)"
fi
if [ -n "$labels" ] && [ "$days_before" -gt 0 ] && [ "$monitor" != "none" ]; then
  echo "== monitor: the days under $days_parent judged at $operating_point -> $monitor_dir"
  # the guard fails closed: a monitor that cannot run stops the day (a withdrawn promise would be decided again)
  "$PY" -m group_qc monitor --operating_point "$operating_point" --days_under "$days_parent" --labels "$labels" \
    --output_dir "$monitor_dir" "${monitor_extra[@]}" || {
    echo "error: the monitor could not check the promises (above), so the day is not judged: a withdrawn or" \
         "tightened mission would be decided as if nothing were wrong. Fix what it names and run this again" >&2
    exit 2; }
fi
if [ -z "$monitor" ] && [ "$days_before" -gt 0 ] && [ -f "$monitor_dir/monitor.json" ]; then
  monitor="$monitor_dir/monitor.json"
fi

judge_args=(--model "$model" --output_dir "$output_dir" --batch_size "$batch_size" --audit_share "$audit_share")
[ -n "$audit_seed" ] && judge_args+=(--audit_seed "$audit_seed")
[ -n "$reviewers" ] && judge_args+=(--reviewers "$reviewers")
[ -n "$overlap_share" ] && judge_args+=(--overlap_share "$overlap_share")
[ -n "$gold_share" ] && judge_args+=(--gold_share "$gold_share")
[ -n "$accept_weaker" ] && judge_args+=(--accept_weaker "$accept_weaker")
[ -n "$labels" ] && [ -d "$labels" ] && judge_args+=(--labels "$labels")   # the reviewers' measured pace
if [ -n "$monitor" ] && [ "$monitor" != "none" ]; then
  echo "== promises checked against $monitor"
  judge_args+=(--monitor "$monitor")
elif [ "$monitor" = "none" ]; then
  judge_args+=(--no_monitor "$monitor_why")
elif [ -n "$operating_point" ] && [ "$days_before" -eq 0 ]; then
  judge_args+=(--no_monitor "first day at this operating point under $days_parent: no day judged at it before")
fi
[ -n "$adapters" ] && judge_args+=(--adapters "$adapters")
[ -n "$operating_point" ] && judge_args+=(--operating_point "$operating_point")
[ -n "$threshold" ] && judge_args+=(--threshold "$threshold")
judge_args+=("${judge_extra[@]}")
stage_a_words=$(shell_words --no_progress "${stage_a_extra[@]}")   # split back into these by stage_a_infer.sh

# The missions, resolved the way Stage-A resolves them (names, aliases, 'all' = every mission folder present).
mapfile -t missions < <("$PY" -m stage_b.judging.day_checks missions "$input_dir" "$mission")
[ "${#missions[@]}" -gt 0 ] || { echo "error: no mission folder of '$mission' under $input_dir" >&2; exit 2; }

stage_a() {   # stage_a <missions, comma-separated>
  if [ "$cuda" = "cpu" ]; then export CUDA_VISIBLE_DEVICES=""; else export CUDA_VISIBLE_DEVICES="$cuda"; fi
  bash "$REPO/scripts/stage_a_infer.sh" unlabeled=1 mission="$1" cuda="$cuda" input_dir="$input_dir" \
    output_dir="$output_dir/stage_a" model="$stage_a_model" adapters="$stage_a_adapters" batch_size="$batch_size" \
    extra="$stage_a_words" verbose="$verbose"
}
verdicts() {   # verdicts <missions, comma-separated>
  if [ "$cuda" = "cpu" ]; then export CUDA_VISIBLE_DEVICES=""; else export CUDA_VISIBLE_DEVICES="${cuda%%,*}"; fi
  "$PY" -m group_qc judge "${judge_args[@]}" --stage_a_dir "$output_dir/stage_a" --input_dir "$input_dir" --mission "$1"
}
failed=(); status=0
fail() {   # fail <mission> <what failed> <exit status>
  echo "error: $2 failed (exit $3); the other missions go on" >&2
  failed+=("$1 (${2%% *})"); [ "$status" -ne 0 ] || status=$3
}
# in_one_then_each <step> <function> <missions…>: the step for every mission in one process (one model load, not one
# per mission: 8 loads were 140 of the demo's 146 s here); when that fails, again mission by mission (both steps skip
# finished groups), so one broken mission stops none of the others. After the one-process run below failed
# (each_only=1), mission by mission at once. Leaves the missions it finished in `finished`.
each_only=0
in_one_then_each() {
  local step=$1 fn=$2 rc=0 m; shift 2
  finished=()
  [ "$#" -gt 0 ] || return 0
  if [ "$each_only" = 0 ] || [ "$#" -eq 1 ]; then
    "$fn" "$(IFS=,; echo "$*")" || rc=$?
    if [ "$rc" -eq 0 ]; then finished=("$@"); return 0; fi
    if [ "$#" -eq 1 ]; then fail "$1" "${step//@/$1}" "$rc"; return 0; fi
    echo "note: stopped (exit $rc) with $# missions in one run: again mission by mission, so the others finish" >&2
  fi
  for m in "$@"; do
    rc=0
    "$fn" "$m" || rc=$?
    if [ "$rc" -eq 0 ]; then finished+=("$m"); else fail "$m" "${step//@/$m}" "$rc"; fi
  done
}
# On one device (cpu, or one GPU id) the two steps run in one process, every mission in it (stage_b.judging.day): the
# second start of torch, transformers and ms-swift is saved (12 s a day on the demo's CPU). Should it fail, the steps
# run again one at a time below, mission by mission where needed; both resume, so nothing is done twice.
if [[ "$cuda" != *,* ]]; then
  echo "== Stage-A, then verdicts, in one process: ${missions[*]} -> $output_dir/stage_a, $output_dir/<mission>_verdicts.jsonl"
  stage_a_args=(--input_dir "$input_dir" --output_dir "$output_dir/stage_a" --model "$stage_a_model"
                --mission "$(IFS=,; echo "${missions[*]}")" --batch_size "$batch_size")
  [ -n "$stage_a_adapters" ] && stage_a_args+=(--adapters "$stage_a_adapters")
  stage_a_args+=(--unlabeled --no_progress)
  rc=0
  if [ "$cuda" = "cpu" ]; then export CUDA_VISIBLE_DEVICES=""; else export CUDA_VISIBLE_DEVICES="$cuda"; fi
  "$PY" -m group_qc day "${stage_a_args[@]}" "${stage_a_extra[@]}" -- "${judge_args[@]}" \
    --stage_a_dir "$output_dir/stage_a" --input_dir "$input_dir" --mission "$(IFS=,; echo "${missions[*]}")" || rc=$?
  case $rc in 0|130) exit "$rc" ;; esac   # done, or stopped by the user (Ctrl-C): nothing to retry
  echo "note: stopped (exit $rc) with Stage-A and the verdicts in one process: again mission by mission, so the" \
       "others finish" >&2
  each_only=1
fi
echo "== Stage-A: ${missions[*]} -> $output_dir/stage_a"
in_one_then_each "Stage-A for @" stage_a "${missions[@]}"
if [ "${#finished[@]}" -gt 0 ]; then
  echo "== verdicts: ${finished[*]} -> $output_dir/<mission>_verdicts.jsonl"
  in_one_then_each "judging @" verdicts "${finished[@]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "error: not finished: ${failed[*]}; fix what the messages above say and rerun the same command (it resumes)" >&2
  exit "$status"
fi
