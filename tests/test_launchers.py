"""The launchers in scripts/ take key=value settings one way (qc_core.key_values), find Python one way
(scripts/launcher.sh), and print their header on --help."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.key_values import KeyValueError, parse_key_values

REPO = Path(__file__).resolve().parent.parent
LAUNCHERS = ["stage_a_infer.sh", "run_grpo.sh", "eval.sh", "judge.sh"]
HELPED = [*LAUNCHERS, "demo.sh"]


@pytest.mark.parametrize("tokens, required, expected", [
    (["a=1", "b=x y"], (), {"a": "1", "b": "x y"}),
    (["a=1", "a=2"], (), {"a": "2"}),                       # the last one wins, as in a shell
    (["a=", "b=c=d"], (), {"a": "", "b": "c=d"}),           # empty values; '=' inside a value
    (["a"], (), KeyValueError("unknown argument 'a'; expected key=value with key in a, b")),
    (["c=1"], (), KeyValueError("unknown argument 'c=1'")),
    (["a=1"], ("b",), KeyValueError("b=… is required")),
    ([], ("a", "b"), KeyValueError("a=…, b=… are required")),
    (["a="], ("a",), KeyValueError("a=… is required")),    # an empty required value counts as missing
])
def test_key_values(tokens, required, expected):
    if isinstance(expected, Exception):
        with pytest.raises(KeyValueError, match=str(expected).replace("(", r"\(")):
            parse_key_values(tokens, ["a", "b"], required)
    else:
        assert parse_key_values(tokens, ["a", "b"], required) == expected


def _run(script, *args, cwd=REPO):
    # DEMO_OUT elsewhere: a demo.sh that failed to stop at --help must not clear the repository's demo_out
    env = {**os.environ, "PYTHON": sys.executable, "DEMO_OUT": str(Path(cwd) / "demo_out_of_a_test")}
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("script", LAUNCHERS)
def test_every_launcher_refuses_an_unknown_setting_naming_the_known_ones(script, tmp_path):
    result = _run(script, "model=m", "colour=blue", cwd=tmp_path)   # from another folder, too
    assert result.returncode == 2
    assert "unknown argument 'colour=blue'; expected key=value with key in" in result.stderr
    assert "mission" in result.stderr


@pytest.mark.parametrize("script", HELPED)
def test_every_launcher_prints_its_header_on_help_and_does_nothing_else(script, tmp_path):
    """--help anywhere among the arguments; for the demo above all, which starts by clearing stale outputs."""
    result = _run(script, "--help", cwd=tmp_path)
    header = (REPO / "scripts" / script).read_text(encoding="utf-8").splitlines()[1:]
    header = header[:next(i for i, line in enumerate(header) if not line.startswith("#"))]
    assert result.returncode == 0 and result.stdout.splitlines() == header


def test_the_demo_refuses_arguments_before_touching_anything(tmp_path):
    result = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), "fast=1"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "DEMO_OUT": str(tmp_path / "out")})
    assert result.returncode == 2 and "demo.sh takes no arguments" in result.stderr
    assert not (tmp_path / "out").exists()


def test_values_with_spaces_and_quotes_reach_the_command_intact(tmp_path):
    """Settings go through the shell twice (parsed, then eval'd): a value with spaces, quotes or $ must arrive at
    the Python command as typed. PYTHON is a wrapper that prints what `group-qc evaluate` would have been given."""
    wrapper = tmp_path / "python"
    wrapper.write_text(f"""#!/usr/bin/env bash
if [ "$2 $3" = "group_qc evaluate" ]; then shift 3; for a in "$@"; do printf '%s\\n' "$a"; done; exit 0; fi
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    odd = "out dir 'quoted' \"double\" $HOME `date`"
    result = subprocess.run(["bash", str(REPO / "scripts" / "eval.sh"), "model=/m", f"output_dir={odd}",
                             "target_miss_rate=0.05 BBU接地线检查=0.1", "overwrite=1"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHON": str(wrapper)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["--model", "/m", "--output_dir", odd, "--target_miss_rate", "0.05",
                                          "BBU接地线检查=0.1", "--overwrite"]


# ----------------------------------------------------------------- values stay whole, paths are the caller's (issue 26)
M = "BBU接地线检查"
COMMANDS = ("stage-a", "stage-a-merge", "evaluate", "judge", "compare")


def _recording_python(tmp_path: Path) -> Path:
    """PYTHON for the launchers: runs the real Python for their own helpers (key_values, the mission lookup) and,
    for the package's commands, prints the folder it was started in and each argument as [arg] instead of running.
    `group-qc day` (Stage-A, then the judge, in one process) is recorded as the two commands it runs, the
    judge only when Stage-A did not fail (tests/test_judging_day.py runs the real one)."""
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f"""#!/usr/bin/env bash
record() {{  # record <command> <args…>: prints them; fails (exit 3) where FAIL_MISSION and FAIL_COMMAND say
  local cmd=$1 prev="" fail=0 a; shift
  printf 'cwd=%s\\nlibrary_log=%s\\n@@ %s\\n' "$PWD" "${{GROUP_QC_LIBRARY_LOG:-}}" "$cmd"
  for a in "$@"; do
    printf '[%s]\\n' "$a"
    # FAIL_MISSION (and FAIL_COMMAND): fail the commands whose --mission names that mission
    if [ "$prev" = --mission ] && [ -n "${{FAIL_MISSION:-}}" ] && [[ "$a" == *"$FAIL_MISSION"* ]] \\
       && [[ "$cmd" == "${{FAIL_COMMAND:-$cmd}}" ]]; then fail=1; fi
    prev=$a
  done
  [ "$fail" = 0 ] || {{ echo "planted failure of $cmd" >&2; return 3; }}
}}
[ "$2" = group_qc ] && case "$3" in
  {'|'.join(COMMANDS)}) cmd=$3; shift 3; record "$cmd" "$@"; exit $? ;;
  day) shift 3; first=()
    while [ "$1" != -- ]; do first+=("$1"); shift; done; shift
    record stage-a "${{first[@]}}" || exit $?
    record judge "$@"; exit $? ;;
esac
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    return wrapper


def _launch(tmp_path, script, *args, cwd=None, env=None):
    """Runs a launcher from a folder holding files a glob would expand to; returns (result, {command: [args]})."""
    cwd = cwd or tmp_path / "caller"
    cwd.mkdir(exist_ok=True)
    for name in ("a.jpg", "b.jpg"):
        (cwd / name).write_text("x")
    result = subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=cwd, capture_output=True, text=True,
                            timeout=120, env={**os.environ, **(env or {}), "PYTHON": str(_recording_python(tmp_path))})
    calls, current = {}, None
    for line in result.stdout.splitlines():
        if line.startswith("@@ "):
            current = calls.setdefault(line[3:], [])
        elif line.startswith("cwd="):
            calls.setdefault("cwd", []).append(line[4:])
        elif line.startswith("library_log="):
            calls.setdefault("library_log", []).append(line[len("library_log="):])
        elif current is not None and line.startswith("[") and line.endswith("]"):
            current.append(line[1:-1])
    return result, calls


SPACED = "/models/my lora/checkpoint-5"
DOLLAR = "/m/$(touch pwned)`touch pwned2`"


def test_stage_a_infer_passes_each_value_as_one_argument_and_expands_nothing(tmp_path):
    result, calls = _launch(tmp_path, "stage_a_infer.sh", f"model={DOLLAR}", f"adapters={SPACED}", "input_dir=*",
                            """extra=--template 'a b' * --seed "7" """)
    assert result.returncode == 0, result.stderr
    assert calls["stage-a"] == ["--input_dir", "*", "--output_dir", "output/stage_a", "--model", DOLLAR,
                                    "--mission", "all", "--batch_size", "8", "--infer_backend", "transformers",
                                    "--adapters", SPACED, "--template", "a b", "*", "--seed", "7"]
    assert not list(tmp_path.rglob("pwned*")) and not list(REPO.glob("pwned*"))


def test_eval_passes_each_value_as_one_argument_and_splits_the_rate_lists_as_words(tmp_path):
    result, calls = _launch(tmp_path, "eval.sh", f"model={DOLLAR}", "output_dir=out", f"adapters={SPACED}",
                            f"target_miss_rate=0.05 '{M}=0.1'", "target_overkill_rate=*", "baseline=*")
    assert result.returncode == 0, result.stderr
    assert calls["evaluate"] == ["--model", DOLLAR, "--output_dir", "out", "--adapters", SPACED,
                                         "--target_miss_rate", "0.05", f"{M}=0.1", "--target_overkill_rate", "*"]
    assert calls["compare"] == ["*", "out/metrics.json", "--names", "baseline", "candidate"]
    assert not list(tmp_path.rglob("pwned*"))


def test_judge_passes_each_value_as_one_argument_to_both_steps(tmp_path):
    (tmp_path / "caller" / "photos" / M / "g1").mkdir(parents=True)
    result, calls = _launch(tmp_path, "judge.sh", f"mission={M}", "input_dir=photos", "output_dir=out",
                            f"stage_a_model={DOLLAR}", f"stage_a_adapters={SPACED} A", "model=/m",
                            f"adapters={SPACED} B", "threshold=0.5", "stage_a_extra=--max_new_tokens 48 --x 'a b' *",
                            """judge_extra=--max_new_tokens "64" *""")
    assert result.returncode == 0, result.stderr
    stage_a, judge = calls["stage-a"], calls["judge"]
    assert stage_a[stage_a.index("--model") + 1] == DOLLAR
    assert stage_a[stage_a.index("--adapters") + 1] == f"{SPACED} A"
    assert stage_a[-7:] == ["--unlabeled", "--no_progress", "--max_new_tokens", "48", "--x", "a b", "*"]
    assert judge[judge.index("--adapters") + 1] == f"{SPACED} B"
    assert judge[judge.index("--threshold"):judge.index("--stage_a_dir")] == [
        "--threshold", "0.5", "--max_new_tokens", "64", "*"]
    assert not list(tmp_path.rglob("pwned*"))


@pytest.mark.parametrize("script, args, command, expected", [
    ("stage_a_infer.sh", ["model=m", "input_dir=photos/today", "output_dir=out"], "stage-a",
     {"--input_dir": "photos/today", "--output_dir": "out", "--model": "m"}),
    ("eval.sh", ["model=models/base", "output_dir=out", "stage_a_dir=sa"], "evaluate",
     {"--model": "models/base", "--output_dir": "out", "--stage_a_dir": "sa"}),
    ("judge.sh", ["input_dir=photos/today", "output_dir=out", "stage_a_model=m", "model=m", "threshold=0.5"],
     "judge", {"--stage_a_dir": "out/stage_a", "--output_dir": "out"}),
])
def test_relative_paths_are_the_callers_folder(tmp_path, script, args, command, expected):
    """`judge.sh input_dir=photos/today` said 'does not exist': the launcher had moved to the repository. Now every
    command runs in the folder the user typed the paths in, with the package importable from there."""
    (tmp_path / "caller" / "photos" / "today" / M / "g1").mkdir(parents=True)
    result, calls = _launch(tmp_path, script, *args)
    assert result.returncode == 0, result.stderr
    assert set(calls.pop("cwd")) == {str(tmp_path / "caller")}
    argv = calls[command]
    assert {flag: argv[argv.index(flag) + 1] for flag in expected} == expected


@pytest.mark.parametrize("script, args, command", [
    ("stage_a_infer.sh", ["model=m", "input_dir=photos/today", "output_dir=out"], "stage-a"),
    ("eval.sh", ["model=models/base", "output_dir=out", "stage_a_dir=sa"], "evaluate"),
    ("judge.sh", ["input_dir=photos/today", "output_dir=out", "stage_a_model=m", "model=m", "threshold=0.5"],
     "judge"),
])
@pytest.mark.parametrize("verbose", [False, True])
def test_library_lines_go_to_the_output_folders_log_unless_verbose(tmp_path, script, args, command, verbose):
    """ms-swift's and transformers' own lines go to <output_dir>/libraries.log (qc_core.library_logs; every command
    of the launcher, Stage-A's included, is given the one file); verbose=1 prints them as they come."""
    (tmp_path / "caller" / "photos" / "today" / M / "g1").mkdir(parents=True)
    result, calls = _launch(tmp_path, script, *args, *(["verbose=1"] if verbose else []))
    assert result.returncode == 0, result.stderr
    expected = "" if verbose else str(tmp_path / "caller" / "out" / "libraries.log")
    assert command in calls and set(calls["library_log"]) == {expected}


def test_a_relative_stage_a_run_writes_under_the_callers_folder(tmp_path):
    """The real command, no stand-in: a Stage-A run from another folder (unreviewed photos without unlabeled=1, so
    discovery refuses every folder and no model loads) writes its errors file where the user pointed, exits 2."""
    caller = tmp_path / "caller"
    from group_qc_dev.photos import jpeg
    for group in ("g1", "g2"):
        jpeg(caller / "photos" / M / group / "1.jpg")
    (caller / "model").mkdir()
    (caller / "model" / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    result = subprocess.run(["bash", str(REPO / "scripts" / "stage_a_infer.sh"), f"mission={M}", "model=model",
                             "input_dir=photos", "output_dir=out", "extra=--no_progress"], cwd=caller,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"no group of {M} could be read" in result.stderr and "pass --unlabeled" in result.stderr
    assert len((caller / "out" / f"{M}_stage_a.errors.jsonl").read_text().splitlines()) == 2
    assert not (REPO / "out" / f"{M}_stage_a.errors.jsonl").exists()


@pytest.mark.parametrize("script, args, message", [
    ("stage_a_infer.sh", ["num_shards=abc"], "num_shards='abc' is not a whole number of at least 1"),
    ("stage_a_infer.sh", ["num_shards=0"], "num_shards='0' is not a whole number of at least 1"),
    ("stage_a_infer.sh", ["num_shards=-2"], "num_shards='-2' is not a whole number of at least 1"),
    ("stage_a_infer.sh", ["num_shards=1.5"], "num_shards='1.5' is not a whole number of at least 1"),
    ("stage_a_infer.sh", ["num_shards="], "num_shards='' is not a whole number of at least 1"),
    ("stage_a_infer.sh", ["cuda="], "cuda=: expected cpu or GPU ids separated by commas"),
    ("stage_a_infer.sh", ["cuda=0,,1"], "cuda=0,,1: expected cpu or GPU ids"),
    ("stage_a_infer.sh", ["cuda=0,1", "num_shards=4"], "num_shards=4 is for cuda=cpu"),
    ("stage_a_infer.sh", ["unlabeled=yes"], "unlabeled='yes': expected 1 or 0"),
    ("stage_a_infer.sh", ["extra=--template 'a b"], "extra=\"--template 'a b\": No closing quotation"),
    ("eval.sh", ["output_dir=o", "overwrite=yes"], "overwrite='yes': expected 1 or 0"),
    ("eval.sh", ["output_dir=o", "target_miss_rate='0.05"], "target_miss_rate=\"'0.05\": No closing quotation"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", 'judge_extra="x'],
     "judge_extra='\"x': No closing quotation"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", 'stage_a_extra="x'],
     "stage_a_extra='\"x': No closing quotation"),
    # a day's settings that cannot work are refused before Stage-A reads a photo (it used to run first)
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "audit_share=1.5"],
     "audit_share= '1.5' is out of range"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "audit_share=abc"],
     "audit_share= 'abc' is not a number"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "operating_point=typo.json"],
     "operating point file typo.json does not exist"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "labels=/etc/hostname"],
     "labels=/etc/hostname is a file"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "audit_seed=x"],
     "audit_seed='x' is not a whole number"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "monitor=missing.json"],
     "monitor file missing.json does not exist"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "audit_share=planned"],
     "audit_share= 'planned' is not a number"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "reviewers=a,b",
                  "overlap_share=x"], "overlap_share= 'x' is not a number"),
    ("judge.sh", ["input_dir=p", "output_dir=o", "stage_a_model=m", "threshold=0.5", "reviewers=a",
                  "overlap_share=0.5"], "needs two reviewers at least"),
])
def test_a_setting_of_the_wrong_kind_is_refused_before_anything_runs(tmp_path, script, args, message):
    """num_shards=abc used to run no shard, then merge stale shard parts and report success."""
    result, calls = _launch(tmp_path, script, "model=m", "output_dir=out", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert calls == {} and not (tmp_path / "caller" / "out").exists()


def test_stage_a_names_a_bad_world_size_variable(tmp_path):
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a",
                             "--input_dir", "x", "--output_dir", "y", "--model",
                             "z"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "WORLD_SIZE": "abc"})
    assert result.returncode == 2 and "WORLD_SIZE='abc' is not a whole number" in result.stderr, result.stderr


THREE = ["BBU安装方式检查（正装）", "BBU接地线检查", "挡风板安装检查"]
A, B, C = THREE


def _missions_per_run(stdout: str) -> dict[str, list[str]]:
    """{command: the --mission of each run, in order}."""
    runs, current = {}, None
    for line in stdout.splitlines():
        if line.startswith("@@ "):
            current = []
            runs.setdefault(line[3:], []).append(current)
        elif current is not None and line.startswith("[") and line.endswith("]"):
            current.append(line[1:-1])
    return {cmd: [argv[argv.index("--mission") + 1] for argv in argvs] for cmd, argvs in runs.items()}


@pytest.mark.parametrize("fail_mission, fail_command, stage_a_runs, judge_runs, error", [
    # every mission in one run of each step (the two in one process): one model load each, not one per mission
    (None, None, [f"{A},{B},{C}"], [f"{A},{B},{C}"], None),
    # Stage-A fails for B: the judge does not start; again mission by mission; A and C are judged, B named, exit
    # non-zero
    (B, "stage-a", [f"{A},{B},{C}", A, B, C], [A, C], f"error: Stage-A for {B} failed (exit 3)"),
    # the judge fails for B: again mission by mission (Stage-A resumes: nothing left to do), A and C judged
    (B, "judge", [f"{A},{B},{C}", A, B, C], [f"{A},{B},{C}", A, B, C], f"error: judging {B} failed (exit 3)"),
])
def test_judge_sh_runs_each_step_once_for_all_missions_and_one_broken_mission_stops_no_other(
        tmp_path, fail_mission, fail_command, stage_a_runs, judge_runs, error):
    for m in THREE:
        (tmp_path / "caller" / "photos" / m / "g1").mkdir(parents=True)
    env = {"FAIL_MISSION": fail_mission, "FAIL_COMMAND": fail_command} if fail_mission else {}
    result, _ = _launch(tmp_path, "judge.sh", "mission=all", "input_dir=photos", "output_dir=out",
                        "stage_a_model=m", "model=m", "threshold=0.5", env=env)
    runs = _missions_per_run(result.stdout)
    assert (runs["stage-a"], runs["judge"]) == (stage_a_runs, judge_runs)
    if error is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 3 and error in result.stderr
        assert f"not finished: {B} (" in result.stderr and "in one process: again mission by mission" in result.stderr


def test_judge_stops_the_day_when_the_monitor_cannot_check_the_promises(tmp_path):
    """The guard fails closed: a day folder the monitor refuses (verdicts of two operating points) stops judge.sh
    before Stage-A, saying why, instead of judging without the monitor."""
    from tests.test_monitor import make_op, normal_day
    from tests.helpers import write_day, write_labels
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "days" / "day1", digest, normal_day("a"))
    write_day(tmp_path / "days" / "day1", "another", normal_day("b"), mission="挡风板安装检查")
    write_labels(tmp_path / "labels", {})
    result = subprocess.run(["bash", str(REPO / "scripts" / "judge.sh"), "input_dir=photos", "stage_a_model=m",
                             "model=m", f"output_dir={tmp_path / 'days' / 'day2'}", f"operating_point={op_path}",
                             f"labels={tmp_path / 'labels'}"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "holds verdicts of this operating point and of another" in result.stderr
    assert "the monitor could not check the promises (above), so the day is not judged" in result.stderr
    assert "== Stage-A" not in result.stdout and not (tmp_path / "days" / "day2").exists()


def _op_for_judge_sh(tmp_path):
    from tests.test_monitor import make_op
    (tmp_path / "caller").mkdir(exist_ok=True)
    _, op_path, digest = make_op(tmp_path / "caller")
    return op_path, digest


@pytest.mark.parametrize("case, extra, earlier_day_at, judge_gets, refusal", [
    ("the first day at the operating point", [], None, "first day at this operating point", None),
    ("a day before it at another operating point only: still the first", [], "another", "first day", None),
    ("a day before it at this one, no labels= and no monitor=: nothing (the judge fails closed)", [], "this", None,
     None),
    ("monitor=none without words", ["monitor=none"], None, None, "monitor=none needs monitor_why="),
    ("monitor=none with too few words", ["monitor=none", "monitor_why=ok"], None, None, "say in words"),
    ("monitor_why= alone", ["monitor_why=the monitor host is down"], None, None, "monitor_why= goes with monitor=none"),
    ("a flag where the words go", ["monitor=none", "monitor_why=--overwrite"], None, None, "is a flag, not a reason"),
    ("words that move the terminal", ["monitor=none", "monitor_why=\x1b[2Jthe host is down"], None, None,
     "U+001B"),
    ("an audit seed that is no number", ["audit_seed=x"], None, None, "audit_seed='x' is not a whole number"),
    ("monitor=none with words", ["monitor=none", "monitor_why=the monitor host is down today"], "this",
     "the monitor host is down today", None),
])
def test_judge_sh_says_in_words_when_certified_work_is_decided_without_a_monitor(tmp_path, case, extra,
                                                                                  earlier_day_at, judge_gets, refusal):
    """Planted: judge.sh passing nothing on the first day -> the judge would send every certified group to review on
    the day a promise is new; passing the first-day words whenever no monitor.json is found -> a later day under a
    folder without labels= decided certified work with no monitor."""
    from tests.helpers import write_day
    op_path, digest = _op_for_judge_sh(tmp_path)
    (tmp_path / "caller" / "photos" / M / "g1").mkdir(parents=True)
    if earlier_day_at:
        write_day(tmp_path / "caller" / "days" / "d1", digest if earlier_day_at == "this" else "another", [
            ("x1", "通过", 0.1, "auto", False)])
    result, calls = _launch(tmp_path, "judge.sh", f"mission={M}", "input_dir=photos", "output_dir=days/d2",
                            "stage_a_model=m", "model=m", f"operating_point={op_path}", *extra)
    if refusal:   # an `error:` line before anything runs, never a traceback (the field case printed three)
        assert result.returncode == 2 and refusal in result.stderr and "stage-a" not in calls, case
        assert "Traceback" not in result.stderr and result.stderr.startswith("error: "), result.stderr
        return
    assert result.returncode == 0, result.stderr
    judge = calls["judge"]
    assert "--monitor" not in judge, case
    if judge_gets is None:
        assert "--no_monitor" not in judge, case
    else:
        assert judge_gets in judge[judge.index("--no_monitor") + 1], case


@pytest.mark.parametrize("earlier_day, returncode, message", [
    # the README's every-day command on the first day: nothing was reviewed yet, so nothing to monitor
    (False, 0, "labels=output/labels does not exist yet: nothing to monitor on the first day"),
    # a later day: the labels of the days before are needed, a typo must not skip the monitor
    (True, 2, "labels=output/labels does not exist, and 1 day(s) under days were judged at this operating point"),
])
def test_judge_sh_takes_a_labels_folder_that_the_first_day_has_not_made_yet(tmp_path, earlier_day, returncode,
                                                                             message):
    """Planted: the old check (labels= must exist) -> the first case is refused; no check -> the second runs."""
    from tests.helpers import write_day
    op_path, digest = _op_for_judge_sh(tmp_path)
    (tmp_path / "caller" / "photos" / M / "g1").mkdir(parents=True)
    if earlier_day:
        write_day(tmp_path / "caller" / "days" / "d1", digest, [("x1", "通过", 0.1, "auto", False)])
    result, calls = _launch(tmp_path, "judge.sh", f"mission={M}", "input_dir=photos", "output_dir=days/d2",
                            "stage_a_model=m", "model=m", f"operating_point={op_path}", "labels=output/labels")
    assert result.returncode == returncode, result.stderr
    assert message in result.stdout + result.stderr
    assert ("judge" in calls) == (returncode == 0)
    if returncode == 0:
        judge = calls["judge"]
        assert "first day at this operating point" in judge[judge.index("--no_monitor") + 1]


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("*.sh")))
def test_a_launcher_holds_no_python_program(script):
    """The launchers and the demo parse key=value settings and call commands; what they ask between commands is a
    command of its own (stage_b.judging.day_checks, group_qc_dev.demo_steps), not a program in a heredoc or a -c."""
    text = (REPO / "scripts" / script).read_text(encoding="utf-8")
    assert not re.search(r"<<-?\s*['\"]?\w+['\"]?\s*$", text, re.M), f"{script} runs a program from a heredoc"
    assert not re.search(r"\$\{?PY\}?\"?\s+(-c|-)\s", text), f"{script} runs Python given on its command line"


def test_the_days_checks_answer_as_the_launcher_reads_them(tmp_path, capsys):
    from stage_b.judging import day_checks
    (tmp_path / "photos" / M).mkdir(parents=True)
    assert day_checks.main(["missions", str(tmp_path / "photos"), "all"]) == 0
    assert capsys.readouterr().out.split() == [M]
    assert day_checks.main(["missions", str(tmp_path / "nope"), "all"]) == 2
    assert "input_dir" in capsys.readouterr().err
    assert day_checks.main(["settings", "", "0.05", "", "", "", "x", "", ""]) == 2
    assert "audit_seed='x' is not a whole number" in capsys.readouterr().err
    assert day_checks.main(["nonsense"]) == 2


def _imports_in_scripts() -> list[tuple[str, str, str]]:
    """(script, module, name) of every `from module import name` in the Python the launchers run inline."""
    found = []
    for script in sorted((REPO / "scripts").glob("*.sh")):
        for module, names in re.findall(r"^\s*from ((?:qc_core|stage_a|stage_b|review)[\w.]*) import ([\w, ]+)$",
                                        script.read_text(encoding="utf-8"), flags=re.M):
            found += [(script.name, module, name.strip()) for name in names.split(",") if name.strip()]
    return found


@pytest.mark.parametrize("script, module, name", _imports_in_scripts())
def test_every_name_a_launcher_imports_is_where_it_looks(script, module, name):
    """A module split that moves a name breaks the launcher's inline Python only when that line runs (judge.sh's
    monitor lookup runs from the second day on): each import is resolved here instead."""
    import importlib
    assert hasattr(importlib.import_module(module), name), f"{script}: from {module} import {name}"
