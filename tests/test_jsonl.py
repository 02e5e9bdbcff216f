"""Crash-safe JSONL: torn tails, malformed lines, locks, atomic replace."""
import json
import multiprocessing

import pytest

from stage_a.jsonl import (JsonlAppender, JsonlError, LockedError, output_lock, iter_jsonl,
                           repair_torn_tail, write_jsonl_atomic)

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
