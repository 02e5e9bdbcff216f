"""Stage-A under concurrent runs, vanishing files, full disks and signals (issue 13), with real processes and
real files. The rule: a file on disk is never removed or emptied while another process may hold it, and a
write that did not reach the disk is never reported as done."""
from __future__ import annotations

import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qc_core.jsonl import JsonlAppender, LockedError, OutputError, iter_jsonl, output_lock, write_jsonl_atomic
from stage_a.outputs import MissionOutputs

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(159)

REPO = Path(__file__).resolve().parent.parent
M = "BBU接地线检查"
STEM = f"{M}_stage_a"


# ------------------------------------------------------------------ one lock per mission
def _hold(target, shared, ready, release):
    with output_lock(target, shared=shared):
        ready.set()
        release.wait(30)


def _try(target, shared, queue):
    try:
        with output_lock(target, shared=shared):
            queue.put("acquired")
    except LockedError as exc:
        queue.put(str(exc))


@pytest.mark.parametrize("holder, contender, outcome", [
    ("shard", "shard", "acquired"),        # the shards of one mission run side by side
    ("shard", "unsharded", "refused"),     # an unsharded run (or a merge) never overlaps a shard ...
    ("unsharded", "shard", "refused"),     # ... nor the other way round
    ("unsharded", "unsharded", "refused"),
])
def test_the_mission_lock_keeps_sharded_and_unsharded_writers_apart(tmp_path, holder, contender, outcome):
    ctx = multiprocessing.get_context("fork")
    target = MissionOutputs(tmp_path, STEM).mission_lock
    ready, release, queue = ctx.Event(), ctx.Event(), ctx.Queue()
    keeper = ctx.Process(target=_hold, args=(target, holder == "shard", ready, release))
    keeper.start()
    assert ready.wait(10)
    other = ctx.Process(target=_try, args=(target, contender == "shard", queue))
    other.start()
    other.join(10)
    got = queue.get(timeout=5)
    release.set()
    keeper.join(10)
    assert ("acquired" if got == "acquired" else "refused") == outcome, got
    if outcome == "refused":
        assert "being written by another process" in got


def _cli(*args, timeout=300, **kwargs):
    return subprocess.run([sys.executable, "-m", "group_qc", "stage-a",
                           *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"}, **kwargs)


def _unloaded_model(tmp_path: Path) -> str:
    """A checkpoint folder that passes the path check; these runs stop before any model would load."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2_5_vl"}', encoding="utf-8")
    return str(folder)


def _merged_outputs(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    main, errors = folder / f"{STEM}.jsonl", folder / f"{STEM}.errors.jsonl"
    main.write_text('{"group_id": "kept"}\n', encoding="utf-8")
    errors.write_text('{"group_id": "history"}\n', encoding="utf-8")
    return main, errors


@pytest.mark.parametrize("held_by, args, exit_code", [
    # item 1: a shard with --overwrite while an unsharded run writes the merged files: refused, nothing deleted
    ("unsharded", ["--num_shards", "2", "--shard_index", "1", "--overwrite"], 3),
    # item 14: an unsharded run while a shard runs: refused instead of doing the work twice
    ("shard", [], 3),
    ("shard", ["--overwrite"], 3),
])
def test_a_run_that_would_overlap_another_is_refused_and_touches_nothing(tmp_path, synthetic, held_by, args,
                                                                         exit_code):
    photos = tmp_path / "photos"
    synthetic.generate(photos, seed=1, groups_per_label=1, missions=M)
    out = tmp_path / "out"
    main, errors = _merged_outputs(out)
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    keeper = ctx.Process(target=_hold, args=(MissionOutputs(out, STEM).mission_lock, held_by == "shard", ready,
                                             release))
    keeper.start()
    assert ready.wait(10)
    try:
        result = _cli("--input_dir", str(photos), "--output_dir", str(out), "--model", _unloaded_model(tmp_path),
                      "--mission", M, *args, timeout=120)
    finally:
        release.set()
        keeper.join(10)
    assert result.returncode == exit_code, result.stderr[-2000:]
    assert "being written by another process" in result.stderr
    assert main.read_text(encoding="utf-8") == '{"group_id": "kept"}\n'
    assert errors.read_text(encoding="utf-8") == '{"group_id": "history"}\n'


def test_the_output_file_exists_before_the_model_loads_so_tail_f_works_at_once(tmp_path, synthetic):
    """`tail -f <mission>_stage_a.jsonl` is what the README says to run: the file is there, empty, before the model
    loads. Here the model cannot load (a config without weights), and the file is there all the same."""
    photos = tmp_path / "photos"
    synthetic.generate(photos, seed=1, groups_per_label=1, missions=M)
    out = tmp_path / "out"
    result = _cli("--input_dir", str(photos), "--output_dir", str(out), "--model", _unloaded_model(tmp_path),
                  "--mission", M, timeout=180)
    assert result.returncode != 0   # the model never loaded
    assert (out / f"{STEM}.jsonl").read_bytes() == b""


# ------------------------------------------------------------------ a write that did not land is never "done"
@pytest.mark.parametrize("vanish", ["deleted", "replaced"])
def test_a_writer_whose_file_vanishes_stops_naming_it(tmp_path, vanish):
    path = tmp_path / f"{STEM}.jsonl"
    with JsonlAppender(path) as out:
        out.write({"group_id": "g1"})
        if vanish == "deleted":
            path.unlink()
        else:
            write_jsonl_atomic(path, [{"group_id": "other"}])
        with pytest.raises(OutputError, match=rf"{STEM}.jsonl was deleted or replaced while this run was writing "
                                              r"it.*rerun the same command to resume"):
            out.write({"group_id": "g2"})


def _small_file_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails (EFBIG) like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
    code = ("from qc_core.jsonl import JsonlAppender\n"
            "from qc_core.exits import run_cli\n"
            "import sys\n"
            "def body():\n"
            f"    with JsonlAppender({str(tmp_path / 'out.jsonl')!r}) as out:\n"
            "        for k in range(1000):\n"
            "            out.write({'group_id': f'g{k}', 'text': 'x' * 100})\n"
            "    return 0\n"
            "sys.exit(run_cli(body))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                            preexec_fn=_small_file_limit(4096))
    assert result.returncode == 2
    assert ("cannot write to" in result.stderr and "out.jsonl" in result.stderr
            and "rerun the same command" in result.stderr)
    assert "Traceback" not in result.stderr
    lines = (tmp_path / "out.jsonl").read_bytes().split(b"\n")
    assert all(json.loads(line) for line in lines[:-1])   # whole lines, at most a torn last one


def test_a_full_disk_is_found_before_the_model_loads(tmp_path, monkeypatch):
    """The rerun after a full disk used to load the model for minutes, then fail at the first write."""
    import shutil
    from stage_a.runner import ensure_writable
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(OSError, match=r"has 1.0 MiB free, less than the 16 MiB a run needs"):
        ensure_writable(tmp_path)


def test_retry_errors_keeps_the_error_history_when_the_main_file_is_refused(tmp_path, synthetic):
    photos = tmp_path / "photos"
    synthetic.generate(photos, seed=1, groups_per_label=1, missions=M)
    out = tmp_path / "out"
    main, errors = _merged_outputs(out)
    main.write_text('{"group_id": "kept"}\nnot json\n{"group_id": "x"}\n', encoding="utf-8")
    result = _cli("--input_dir", str(photos), "--output_dir", str(out), "--model", _unloaded_model(tmp_path),
                  "--mission", M, "--retry_errors", timeout=120)
    assert result.returncode == 2 and f"{STEM}.jsonl:2: malformed line" in result.stderr
    assert errors.read_text(encoding="utf-8") == '{"group_id": "history"}\n'


# ------------------------------------------------------------------ signals: every group exactly once after resume
def _own_signal_handlers():
    """Runs in the child before exec: the dispositions a user's terminal gives a command, not the caller's. Started
    from a script in the background (`make test &`, as a CI runner may), pytest inherits SIGINT ignored, and so would
    Stage-A: the interrupt was dropped, and the run the test meant to stop finished (issue 26)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.slow
# Each signal once (each case is two Stage-A processes, ~35 s): a kill after the first group, an interrupt mid-run,
# a terminate after two groups.
@pytest.mark.parametrize("sig, after_lines", [(signal.SIGKILL, 1), (signal.SIGINT, 4), (signal.SIGTERM, 2)])
def test_a_stopped_run_says_how_to_resume_and_resumes_to_every_group_once(tiny_qwen2_5_vl, synthetic, tmp_path,
                                                                          sig, after_lines):
    photos = tmp_path / "photos"
    synthetic.generate(photos, seed=5, groups_per_label=5, missions=M)
    n_groups = len({json.loads(line)["group_id"] for line in (photos / "ground_truth.jsonl").read_text().splitlines()})
    out = tmp_path / "out"
    args = ["--input_dir", str(photos), "--output_dir", str(out), "--model", str(tiny_qwen2_5_vl), "--mission", M,
            "--batch_size", "1", "--max_new_tokens", "8", "--max_pixels", "12544", "--no_progress"]
    # Started here as from a background script, SIGINT ignored (as `make test &` leaves it): the child sets its own.
    caller = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "group_qc", "stage-a", *args], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                                preexec_fn=_own_signal_handlers)
    finally:
        signal.signal(signal.SIGINT, caller)
    main = out / f"{STEM}.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not main.exists() or main.read_bytes().count(b"\n") < after_lines):
        time.sleep(0.02)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    written = main.read_bytes().count(b"\n")
    assert after_lines <= written < n_groups, "the signal must land mid-run"
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        with main.open("ab") as f:  # what a kill inside write() leaves behind
            f.write('{"group_id": "QC-torn", "per_image": {"图片_1": "接地'.encode())
    else:
        assert proc.returncode == 130, stderr[-2000:]
        assert "interrupted: rerun the same command to resume" in stderr and "Traceback" not in stderr
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    ids = [r["group_id"] for _, r in iter_jsonl(main, allow_torn_tail=False)]   # every line parses
    assert len(ids) == len(set(ids)) == n_groups and "QC-torn" not in ids


def test_merge_says_what_it_skips_in_a_finished_part(tmp_path, caplog):
    import logging
    from stage_a.merge import merge_mission
    from tests.helpers import write_stage_a_all_missions
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=4)
    whole = (folder / f"{STEM}.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / f"{STEM}.jsonl").unlink()
    for i, lines in enumerate([whole[:2], whole[2:]]):
        (folder / f"{STEM}.shard-{i:05d}-of-00002.jsonl").write_text("".join(lines), encoding="utf-8")
    with (folder / f"{STEM}.shard-00001-of-00002.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"group_id": "torn", "mission": "BBU')
    with caplog.at_level(logging.WARNING, logger="group_qc.stage_a.merge"):
        assert merge_mission(folder, STEM)[0] == 4
    assert f"{STEM}.shard-00001-of-00002.jsonl:3: torn last line skipped" in caplog.text


@pytest.mark.slow
def test_a_run_whose_output_is_deleted_stops_instead_of_reporting_success(tiny_qwen2_5_vl, synthetic, tmp_path):
    photos = tmp_path / "photos"
    synthetic.generate(photos, seed=5, groups_per_label=5, missions=M)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "group_qc", "stage-a", "--input_dir", str(photos),
                             "--output_dir", str(out),
                             "--model", str(tiny_qwen2_5_vl), "--mission", M, "--batch_size", "1", "--max_new_tokens",
                             "8", "--max_pixels", "12544", "--no_progress"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    main = out / f"{STEM}.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not main.exists() or main.read_bytes().count(b"\n") < 1):
        time.sleep(0.02)
    main.unlink()   # what a user's cleanup script or a second tool might do
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr[-2000:]
    assert f"{STEM}.jsonl was deleted or replaced while this run was writing it" in stderr
    assert "Traceback" not in stderr and "wrote" not in stderr


# ------------------------------------------------------------------ nothing readable is no success (issue 26)
def _checkpoint_config(folder: Path) -> Path:
    """A checkpoint folder as far as the checks before loading read it: these runs end before any model loads."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    return folder


@pytest.mark.parametrize("unlabeled", [False, True])
def test_a_run_where_every_group_failed_discovery_exits_2_saying_why_every_time(tmp_path, unlabeled):
    """The unreviewed layout read without --unlabeled (and the other way round) printed '0 failed', put one line
    per folder in the errors file and exited 0."""
    from group_qc_dev.photos import jpeg
    for group in ("g1", "g2"):
        jpeg(tmp_path / "in" / M / ("审核通过" if unlabeled else "") / group / "1.jpg")
    args = [sys.executable, "-m", "group_qc", "stage-a", "--input_dir", str(tmp_path / "in"), "--output_dir",
            str(tmp_path / "out"), "--model", str(_checkpoint_config(tmp_path / "model")), "--mission", M,
            "--no_progress", *(["--unlabeled"] if unlabeled else [])]
    for _ in range(2):   # the same on a rerun, with nothing added to the errors file
        result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr[-2000:]
        assert f"error: no group of {M} could be read: discovery found {1 if unlabeled else 2} problem(s)" \
            in result.stderr
        assert ("drop --unlabeled" if unlabeled else "pass --unlabeled") in result.stderr
        assert "Traceback" not in result.stderr
        assert len((tmp_path / "out" / f"{STEM}.errors.jsonl").read_text().splitlines()) == (1 if unlabeled else 2)


def test_an_input_dir_whose_name_is_not_utf8_is_refused_before_anything_runs(tmp_path):
    from group_qc_dev.photos import jpeg
    jpeg(tmp_path / "in" / M / "审核通过" / "g1" / "1.jpg")
    bad = os.fsencode(tmp_path) + b"/" + "照片".encode("gbk")
    os.rename(os.fsencode(tmp_path / "in"), bad)
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a", "--input_dir", bad, "--output_dir",
                             str(tmp_path / "out"), "--model", str(_checkpoint_config(tmp_path / "model")),
                             "--mission", M, "--no_progress"], cwd=REPO, capture_output=True, timeout=120)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr[-2000:]
    assert "\\xd5\\xd5Ƭ has a name that is not valid UTF-8" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "out").exists()


def test_a_shard_run_with_another_num_shards_than_the_parts_there_stops_before_the_model_loads(tmp_path):
    """A run with --num_shards 4 beside the part files of a --num_shards 2 run split the groups two ways (some
    written twice), found only at merge. It now stops naming the other run's part and what to do; the same
    --num_shards goes on (and then stops at the placeholder model, past the check)."""
    from group_qc_dev.photos import jpeg
    jpeg(tmp_path / "in" / M / "审核通过" / "g1" / "1.jpg")
    out = tmp_path / "out"
    out.mkdir()
    part = out / f"{STEM}.shard-00001-of-00002.jsonl"
    part.write_text("")
    base = ["--input_dir", str(tmp_path / "in"), "--output_dir", str(out), "--model", _unloaded_model(tmp_path),
            "--mission", M, "--no_progress"]
    result = _cli(*base, "--num_shards", "4", "--shard_index", "0")
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{part} is a part of a run with --num_shards 2" in result.stderr and "stage_a.merge" in result.stderr
    assert not (out / f"{STEM}.shard-00000-of-00004.jsonl").exists()
    same = _cli(*base, "--num_shards", "2", "--shard_index", "0")
    assert "is a part of a run with" not in same.stderr
