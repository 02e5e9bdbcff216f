"""Crash-safe JSONL: torn tails, malformed lines, locks, atomic replace."""
import json
import multiprocessing

import pytest

from qc_core.jsonl import (JsonlAppender, JsonlError, LockedError, output_lock, iter_jsonl, repair_torn_tail,
                           write_jsonl_atomic)

A = {"group_id": "a", "text": "螺丝×4"}
B = {"group_id": "b", "text": "接地线/已捆扎"}


def lines(path):
    return [obj for _, obj in iter_jsonl(path)]


def test_appender_writes_utf8_without_escapes_one_flushed_line_each(tmp_path):
    path = tmp_path / "x.jsonl"
    with JsonlAppender(path) as w:
        w.write(A)
        # Flushed before close: a `tail -f` reader sees the line now.
        assert path.read_text(encoding="utf-8") == json.dumps(A, ensure_ascii=False) + "\n"
        w.write(B)
    text = path.read_text(encoding="utf-8")
    assert "\\u" not in text and "螺丝×4" in text
    assert lines(path) == [A, B]


@pytest.mark.parametrize("tail, removed, expected", [
    (b'{"group_id": "b", "te', 21, [A]),                                   # torn by a kill
    (json.dumps(B, ensure_ascii=False).encode(), 0, [A, B]),               # complete, lacks "\n"
    (b"", 0, [A]),
    ('{"group_id": "b", "text": "接'.encode()[:-1], None, [A]),            # torn inside a UTF-8 char
])
def test_repair_torn_tail(tmp_path, tail, removed, expected):
    path = tmp_path / "x.jsonl"
    path.write_bytes(json.dumps(A, ensure_ascii=False).encode() + b"\n" + tail)
    got = repair_torn_tail(path)
    if removed is not None:
        assert got == removed
    assert path.read_bytes().endswith(b"\n")
    assert lines(path) == expected


def test_reader_skips_a_torn_last_line_but_refuses_a_bad_middle_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"group_id": "a"}\n{"group_id": "b", "t', encoding="utf-8")
    assert lines(path) == [{"group_id": "a"}]
    with pytest.raises(JsonlError, match="x.jsonl:2: torn last line"):
        list(iter_jsonl(path, allow_torn_tail=False))
    path.write_text('{"group_id": "a"}\nnot json\n{"group_id": "c"}\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=r"x.jsonl:2: malformed line"):
        lines(path)


def test_atomic_replace(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("old\n")
    assert write_jsonl_atomic(path, [A, B]) == 2
    assert lines(path) == [A, B]
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]


def _try_lock(target, queue):
    try:
        with output_lock(target):
            queue.put("acquired")
    except LockedError as exc:
        queue.put(str(exc))


def test_second_process_is_refused_with_a_clear_message(tmp_path):
    target = tmp_path / "m_stage_a.jsonl"
    queue = multiprocessing.get_context("fork").Queue()
    with output_lock(target):
        p = multiprocessing.get_context("fork").Process(target=_try_lock, args=(target, queue))
        p.start()
        p.join(10)
        message = queue.get(timeout=5)
    assert "being written by another process" in message and "pid" in message
    p = multiprocessing.get_context("fork").Process(target=_try_lock, args=(target, queue))
    p.start()
    p.join(10)
    assert queue.get(timeout=5) == "acquired"  # released when the holder finished


# ------------------------------------------------------------------ pathological lines (issue 26, item 6)
def _nested(depth: int) -> bytes:
    return b'{"group_id": "deep", "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("last", [False, True])   # in the middle, and where a torn write would lie
def test_a_line_nested_100000_deep_is_refused_naming_file_and_line(tmp_path, last):
    path = tmp_path / "x.jsonl"
    deep = _nested(100_000)
    path.write_bytes(b'{"group_id": "a"}\n' + (deep if last else deep + b'\n{"group_id": "c"}\n'))
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: JSON nested more than 64 deep.*remove that line"):
        lines(path)


def test_nesting_is_counted_outside_strings_only(tmp_path):
    path = tmp_path / "x.jsonl"
    ok = {"group_id": "a", "text": "[" * 500 + "{" * 500, "x": json.loads(_nested(63)[26:-1])}
    path.write_bytes(json.dumps(ok).encode() + b"\n" + _nested(65) + b"\n")
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: JSON nested more than 64"):
        lines(path)
    path.write_bytes(json.dumps(ok).encode() + b"\n" + _nested(63) + b"\n")
    assert [r["group_id"] for r in lines(path)] == ["a", "deep"]


def test_a_line_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path):
    from qc_core.jsonl import MAX_LINE_BYTES
    path = tmp_path / "x.jsonl"
    with path.open("wb") as f:
        f.write(b'{"group_id": "a"}\n{"group_id": "big", "text": "')
        f.write(b"x" * MAX_LINE_BYTES)
        f.write(b'"}\n')
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: a line of over 67,108,864 bytes, the most a record may take"):
        lines(path)


def test_a_file_of_blank_lines_is_streamed_and_refused_after_the_bound(tmp_path, monkeypatch):
    """A gigabyte of newlines once took 9.4 GB to read: the reader streams, holds one line, and gives up after
    MAX_BLANK_LINES blank lines (here 20,000), naming the file."""
    import tracemalloc

    from qc_core import jsonl
    monkeypatch.setattr(jsonl, "MAX_BLANK_LINES", 20_000)
    path = tmp_path / "x.jsonl"
    with path.open("wb") as f:
        f.write(b"\n" * 500_000 + b'{"group_id": "a"}\n')
    tracemalloc.start()
    with pytest.raises(JsonlError, match=r"x\.jsonl: over 20,000 blank lines"):
        lines(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20, peak   # the old reader held the file whole, and its split list 50 times more


def test_an_appender_refuses_a_pathological_last_line_instead_of_cutting_or_crashing(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"group_id": "a"}\n' + _nested(100_000))
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: JSON nested more than 64"):
        JsonlAppender(path)
    assert path.read_bytes().endswith(b"]}")   # nothing cut: the user decides


def test_stage_a_resuming_onto_a_pathological_line_exits_2_naming_it(tmp_path):
    """The real command: Stage-A reads its own output first (to resume); no model loads, no traceback."""
    import subprocess
    import sys
    from pathlib import Path
    from group_qc_dev.photos import jpeg
    m = "BBU接地线检查"
    jpeg(tmp_path / "in" / m / "审核通过" / "g1" / "1.jpg")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / f"{m}_stage_a.jsonl").write_bytes(_nested(100_000) + b"\n")
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a",
                             "--input_dir", str(tmp_path / "in"), "--output_dir",
                             str(tmp_path / "out"), "--model", str(tmp_path / "model"), "--mission", m,
                             "--no_progress"], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{m}_stage_a.jsonl:1: JSON nested more than 64 deep" in result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


def _read_compare(path):
    from stage_b.evaluate.compare import load
    return load(str(path))


def _read_run_record(path):
    from stage_b.train.run_record import read_run_record
    return read_run_record(path)


def _read_operating_point(path):
    from stage_b.rules.operating_point import load_operating_point
    return load_operating_point(path)


@pytest.mark.parametrize("read, name", [(_read_compare, "metrics.json"), (_read_run_record, "group_qc_run.json"),
                                        (_read_operating_point, "operating_point.json")])
def test_whole_file_json_readers_refuse_a_file_nested_100000_deep_by_name(tmp_path, read, name):
    """The JSONL readers' depth limit has its counterpart in the readers of whole JSON files: a RecursionError
    traceback became a ValueError-type error naming the file."""
    path = tmp_path / name
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError) as exc:
        read(path)
    assert str(path) in str(exc.value)


def test_a_reader_offers_only_what_fixes_its_file(tmp_path):
    """--overwrite starts a command's own output afresh; a command that only reads a file (the monitor reading verdict
    files, the import reading exports) has nothing to overwrite. Planted: the writer's remedy as every reader's
    default -> the monitor advised --overwrite, which it does not have."""
    from qc_core.jsonl import OUTPUT_REMEDY, JsonlError, iter_jsonl
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n', encoding="utf-8")
    with pytest.raises(JsonlError) as read:
        list(iter_jsonl(path))
    assert "x.jsonl:2" in str(read.value) and "--overwrite" not in str(read.value)
    assert "the command that made it" in str(read.value)
    with pytest.raises(JsonlError, match="--overwrite"):
        list(iter_jsonl(path, remedy=OUTPUT_REMEDY))
