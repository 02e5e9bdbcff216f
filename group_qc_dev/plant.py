"""Planted bugs, each beside the fast test that must catch it: break the code on purpose, run the test, put the code
back (DEVELOPERS.md: for each guarantee, watch its test fail once).

    python -m group_qc_dev.plant            # every plant: CAUGHT or MISSED, one line each; exit 1 on a miss

Each plant changes a number or a decision without an exception, as the silent bugs a review found did. The files are
restored whatever happens (the original copied aside first); run it on a clean working tree."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# (file, text, planted text, test file, -k expression)
PLANTS = [
    ("stage_b/labels/decision_lines.py", '"decided_at": _decided_at(rec["decided_at"]),',
     '"decided_at": rec["decided_at"],', "tests/test_decisions.py", "another_zone"),
    ("stage_b/monitoring/inspection.py", "(-m * a, day.reviewed_defects)", "(-m, day.reviewed_defects)",
     "tests/test_inspection.py", "scale_reviewed"),
    ("stage_b/monitoring/monitor_replay.py", 'volume = sum(int(r["auto_passed"]) for r in recent) / len(recent)',
     'volume = sum(int(r["auto_passed"]) for r in recent)', "tests/test_monitor.py", "mean_daily"),
    ("stage_b/monitoring/inspection.py", "volume = groups_today * (promise.auto_pass_share or 1.0)",
     "volume = groups_today", "tests/test_inspection.py", "same_day_tightened"),
    ("stage_b/monitoring/monitor_replay.py", 'self.misses_w += int(row["escapes"]) / a',
     'self.misses_w += int(row["escapes"])', "tests/test_monitor.py", "one_over"),
    ("stage_b/monitoring/monitor_replay.py", 'self.waiting += int(row.get("escapes_unconfirmed") or 0)',
     'self.waiting = int(row.get("escapes_unconfirmed") or 0)', "tests/test_monitor.py", "waiting_for_a_second"),
    ("stage_b/labels/reviewer_quality.py",
     'by = sorted({d["reviewer"] for d in g["decisions"] if d["decision"] == FAIL}',
     'by = sorted({d["reviewer"] for d in g["decisions"]}', "tests/test_resolve.py", "unsure_second"),
    ("stage_b/monitoring/monitor.py", "    return max(seen, default=None)", "    return min(seen, default=None)",
     "tests/test_monitor.py", "dated_by_the_latest"),
    ("stage_b/monitoring/plan_audits.py", "chosen * auto_decided * seconds_per_decision / 3600",
     "chosen * auto_passed * seconds_per_decision / 3600", "tests/test_plan_audits.py", "reviewer_hours_price"),
    ("stage_b/monitoring/plan_audits.py", "    return sorted_days[max(0, math.ceil(quantile * len(sorted_days)) - 1)]",
     "    return sorted_days[min(len(sorted_days) - 1, math.ceil(quantile * len(sorted_days)))]",
     "tests/test_plan_audits.py", "rank"),
    ("stage_b/labels/resolve.py", '"input_dir",\n                       "model_fingerprint")', '"input_dir")',
     "tests/test_resolve.py", "fingerprint"),
    ("stage_b/labels/resolve.py", '        reviewer = person[d.get("reviewer") or ANONYMOUS]',
     '        reviewer = d.get("reviewer") or ANONYMOUS', "tests/test_resolve.py", "look_alike"),
    ("stage_b/labels/decisions_log.py", "        _check_against(path, records, chains, h, where)", "        pass",
     "tests/test_decisions_log.py", "tail_was_cut"),
    ("stage_b/rules/point_identity.py", "    return PointKeys(point_identity(content), file_sha256(path))",
     "    return PointKeys(PREFIX + file_sha256(path), file_sha256(path))", "tests/test_withdrawals.py", "follows"),
    ("stage_b/labels/decision_lines.py", "    problem = problem or history_problem(history, reviewer, rec[",
     "    problem = problem or None and history_problem(history, reviewer, rec[", "tests/test_decisions.py",
     "not_this_decisions"),
    ("stage_b/labels/resolve.py", "    return _order(new) >= _order(old) - FUTURE_SLACK",
     "    return _order(new) >= _order(old)", "tests/test_decisions.py", "which_decision_labels"),
    ("stage_b/monitoring/plan_audits.py", "            if mission in out:   # the last of two numbers would win",
     "            if False:   # the last of two numbers would win", "tests/test_plan_audits.py", "named_twice"),
    ("stage_b/rules/point_check.py", '        rate_or_none(getattr(point, key), f"{where}: {key}")',
     "        pass", "tests/test_operating_point.py", "uncertified_entry_too"),
    ("stage_b/contract/grounding.py", '        joined = denied_end is not None and text[denied_end:start].strip() in',
     "        joined = False and text[denied_end:start].strip() in", "tests/test_grounding.py", "coordinated"),
    ("stage_b/contract/grounding.py", "    reason = _arabic(reason)\n", "", "tests/test_grounding.py",
     "chinese_numeral"),
    ("stage_b/labels/resolve.py", '        elif g["verdict"] not in (PASS, FAIL):', '        elif False:',
     "tests/test_decisions.py", "without_a_models"),
    ("stage_b/judging/scoring.py", "                                                               allow_uncertified), "
     "path.parent))", "                                                               allow_uncertified), "
     "Path('/')))", "tests/test_portable_paths.py", "verdict_line_names"),
    ("stage_b/labels/decision_lines.py", "    climbs = _climbs_out(record.get(\"images\"))",
     "    climbs = None", "tests/test_portable_paths.py", "outside_its_folder"),
    ("stage_b/monitoring/days.py",
     '{key: g["status"] for key, g in resolved.items() if g["status"] not in (PASS, FAIL)})',
     "{})", "tests/test_monitor.py", "listed_never_dropped"),
    ("stage_b/rules/workload.py", "    seconds = [s for s in timed if s >= floor]", "    seconds = timed",
     "tests/test_workload.py", "pace_is_measured"),
    ("stage_b/rules/workload.py", "if median < floor else None", "if False else None", "tests/test_workload.py",
     "faster_than_the_floor"),
    ("qc_core/engines.py", "    if route_library_logs() is None:\n        return\n",
     "    route_library_logs\n    return\n", "tests/test_judging_day.py", "one_process_writes"),
    ("stage_b/monitoring/monitor.py", "        if folders:\n", "        if False:\n", "tests/test_timeline.py",
     "keeps_the_replaced"),
    ("stage_b/monitoring/plan_audits.py", "max(min(DETECT_FACTOR * r, DETECT_AT_MOST), 2 * r)",
     "min(0.9 / 0.99, DETECT_FACTOR * r)", "tests/test_plan_audits.py", "rise_is_a_rate"),
    ("stage_b/monitoring/plan_audits.py", "        if mission in withdrawn:", "        if False:",
     "tests/test_plan_audits.py", "withdrawn_mission_is_marked"),
    ("stage_a/runner.py", "input_dir=stored(self.input_dir.resolve(), self.main.path.resolve().parent),",
     "input_dir=self.input_dir.resolve(),", "tests/test_portable_paths.py", "stage_a_record_names"),
    ("stage_b/labels/source_files.py", '*self.under_roots(source["file"]), source["file"]]', 'source["file"]]',
     "tests/test_timeline.py", "moved_project"),
    ("stage_b/rules/promise_texts.py", "if upper is not None and upper >= NO_BOUND else", "if False else",
     "tests/test_operating_point.py", "one_sentence_with_both"),
    ("stage_b/evaluate/outputs.py", "        if folder is not None:\n            card[\"photo_dir\"]",
     "        if False:\n            card[\"photo_dir\"]", "tests/test_review_page.py", "own_records_folder"),
    ("stage_b/judging/settings.py", '    return tuple(str(p) for p in sorted(Path(labels).glob("*_stage_a.jsonl")))',
     "    return ()", "tests/test_gold.py", "default_once_labels"),
    ("stage_b/evaluate/outputs.py", 'after_withdrawals(getattr(replaces, "withdrawals", {}), predictions)',
     "after_withdrawals({}, predictions)", "tests/test_replacement.py", "names_the_withdrawal"),
    ("stage_b/train/launch.py",
     "    args = reward_args(model_args(settings, args, int(env[ENV_LORA_LAST_K]), selection))",
     "    args = model_args(settings, args, int(env[ENV_LORA_LAST_K]), selection)", "tests/test_rewards.py",
     "new_reward"),
    ("stage_b/monitoring/timeline.py", "            monitor: dict = dict(load_monitor(path))",
     "            monitor = json.loads(path.read_text(encoding=\"utf-8\"))", "tests/test_timeline.py",
     "keeps_the_replaced"),
    ("qc_core/renamed.py", "    print(renamed_line(old, command), file=sys.stderr)\n", "", "tests/test_entry_points.py",
     "older_module_name"),
    ("stage_b/monitoring/owner_status.py", '    days = m.get("days") or []\n',
     '    from stage_b.rules.routes import AUDIT  # noqa: F401\n    days = m.get("days") or []\n',
     "tests/test_core_is_light.py", "inside_a_function_says_why"),
    ("group_qc_dev/demo_steps.py", "reverse=True)\n    return", ")\n    return", "tests/test_demo_steps.py",
     "candidates"),
]


def run(plant) -> bool:
    """True when the test caught the plant (it failed with the code broken)."""
    path, old, new, test, expression = plant
    target = REPO / path
    text = target.read_text(encoding="utf-8")
    if old not in text:
        raise SystemExit(f"{path}: the planted line is no longer there ({old[:60]!r}): update group_qc_dev/plant.py")
    with tempfile.TemporaryDirectory() as keep:
        saved = Path(keep) / "original"
        shutil.copy2(target, saved)
        try:
            target.write_text(text.replace(old, new, 1), encoding="utf-8")
            result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test, "-k",
                                     expression], cwd=REPO, capture_output=True, text=True)
        finally:
            shutil.copy2(saved, target)
    return result.returncode != 0


def main(argv=None) -> int:
    missed = 0
    for plant in PLANTS:
        caught = run(plant)
        missed += not caught
        print(f"{'CAUGHT' if caught else 'MISSED'}  {plant[0]}  ({plant[3]} -k {plant[4]})", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
