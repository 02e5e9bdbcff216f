"""stage_b.judging.day: a day's Stage-A and verdicts in one process (scripts/judge.sh on one device) are the two
commands' work, the judge starting only after Stage-A succeeded."""
from __future__ import annotations

import subprocess
import sys

import pytest

from qc_core.paths import with_input_dir_resolved

from stage_b.judging import day, judge
from tests.helpers import read_lines, run_judge
from tests.test_judge import ENV, MISSIONS, REPO, unreviewed  # noqa: F401 (a fixture)
from stage_b.judging import verdict_file

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(53)


@pytest.mark.parametrize("argv, expected", [
    (["--model", "a", "--", "--model", "b"], (["--model", "a"], ["--model", "b"])),
    (["--", "--x"], ([], ["--x"])),
    (["--model", "a"], None),              # no separator: which arguments are whose cannot be told
    (["a", "--", "b", "--", "c"], None),   # two
])
def test_the_arguments_split_at_one_separator(argv, expected):
    if expected is None:
        with pytest.raises(day.UserError, match="exactly one --"):
            day.split_arguments(argv)
    else:
        assert day.split_arguments(argv) == expected


def test_the_judge_does_not_start_when_stage_a_failed(tmp_path, monkeypatch, capsys):
    """Planted: judging after a failed Stage-A would judge a day from summaries that are not all there."""
    started = []
    monkeypatch.setattr(judge, "main", lambda argv: started.append(argv) or 0)
    status = day.main(["--input_dir", str(tmp_path / "no such folder"), "--output_dir", str(tmp_path / "sa"),
                       "--model", str(tmp_path), "--", "--model", "m"])
    assert status == 2 and started == []
    assert "no such folder" in capsys.readouterr().err


def test_a_call_without_the_separator_is_refused_before_anything_runs(capsys):
    assert day.main(["--model", "a"]) == 2
    assert "exactly one --" in capsys.readouterr().err


@pytest.mark.slow
def test_one_process_writes_the_verdicts_the_two_commands_write(unreviewed, tiny_qwen2_5_vl, tmp_path):  # noqa: F811
    root, groups = unreviewed   # Stage-A by its own command, then the judge by its own
    judge_args = ["--model", str(tiny_qwen2_5_vl), "--mission", MISSIONS, "--threshold", "0.5",
                  "--max_new_tokens", "8"]
    apart = run_judge(*judge_args, "--stage_a_dir", str(root / "stage_a"), "--output_dir", str(tmp_path / "apart"))
    assert apart.returncode == 0, apart.stderr[-3000:]
    together = subprocess.run(
        [sys.executable, "-m", "group_qc", "day", "--unlabeled", "--input_dir", str(root / "photos"),
         "--output_dir", str(tmp_path / "sa"), "--model", str(tiny_qwen2_5_vl), "--mission", MISSIONS,
         "--max_new_tokens", "6", "--batch_size", "8", "--max_pixels", "12544", "--no_progress",
         "--", *judge_args, "--stage_a_dir", str(tmp_path / "sa"), "--output_dir", str(tmp_path / "together")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**ENV, "GROUP_QC_LIBRARY_LOG": str(tmp_path / "together" / "libraries.log")})
    assert together.returncode == 0, together.stderr[-3000:]
    # quiet logs (qc_core.library_logs): ms-swift's and transformers' lines went to the file, not the terminal; the
    # run without the file printed them (planted: route_library_logs not called -> they print here)
    library = (":swift]", "Loading weights")
    assert any(s in apart.stderr for s in library), apart.stderr[-2000:]
    assert not any(s in together.stdout + together.stderr for s in library), together.stderr[-2000:]
    assert "[INFO:swift]" in (tmp_path / "together" / "libraries.log").read_text(encoding="utf-8")
    assert "photos in" in together.stdout and "to judge" in together.stdout   # both steps ran, in this order
    assert together.stdout.index("photos in") < together.stdout.index("to judge")
    for mission in MISSIONS.split(","):
        name = f"{mission}_stage_a.jsonl"
        # input_dir is stored relative to each file (qc_core.paths): compared as the folder it names
        summaries = ({r["group_id"]: {k: v for k, v in with_input_dir_resolved(r, f.parent).items()
                                      if k != "created_at"} for r in read_lines(f)}
                     for f in (root / "stage_a" / name, tmp_path / "sa" / name))
        assert next(summaries) == next(summaries)
        kept = ("group_id", "summaries", "verdict", "reply", "needs_review", "review_why")
        one, two = (sorted(read_lines(verdict_file.verdicts_path(tmp_path / d, mission)), key=lambda r: r["group_id"])
                    for d in ("apart", "together"))
        assert [{k: r[k] for k in kept} for r in one] == [{k: r[k] for k in kept} for r in two]
        assert max(abs(a["p_fail"] - b["p_fail"]) for a, b in zip(one, two)) < 1e-6
    assert {r["group_id"] for m in MISSIONS.split(",")
            for r in read_lines(verdict_file.verdicts_path(tmp_path / "together", m))} == groups
