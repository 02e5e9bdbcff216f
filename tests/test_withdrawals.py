"""stage_b.rules.withdrawals: a withdrawal is recorded beside the operating point it breaks, so that every judge at that
operating point finds it: one judging the next day under another output folder, or told monitor=none, still sends the
mission's groups to review. Fails closed: a file that cannot be read or written stops the monitor or the judge."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stage_b.monitoring import monitor as mon
from stage_b.judging.judge import mission_withdrawals
from stage_b.rules.point_identity import PointKeys
from stage_b.rules.withdrawals import WithdrawalsError, record, recorded, withdrawals_path
from tests.helpers import M, write_day, write_labels
from tests.test_monitor import N, make_op, normal_day
from stage_b.monitoring import monitor_file
from stage_b.monitoring.days import MonitorError, days_under
from stage_b.rules.operating_point import load_operating_point, point_keys


def withdrawn_by_the_monitor(tmp_path):
    """The monitor command over a normal day and a day of 12 escapes of M: M withdrawn, N not."""
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "days" / "2026-11-27", digest, normal_day("a"))
    write_day(tmp_path / "days" / "2026-11-28", digest, [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})
    assert mon.main(["--operating_point", str(op_path), "--days_under", str(tmp_path / "days"), "--labels",
                     str(tmp_path / "labels"), "--output_dir", str(tmp_path / "days" / "monitor")]) == 0
    return op, op_path, digest


def test_a_judge_without_the_monitor_still_finds_the_withdrawal(tmp_path, capsys):
    op, op_path, digest = withdrawn_by_the_monitor(tmp_path)
    assert "withdrawal of BBU接地线检查 recorded beside the operating point" in capsys.readouterr().out
    lines = recorded(op_path, digest)
    assert list(lines) == [M] and lines[M]["withdrawn_day"] == "2026-11-28"
    # the next day judged under another folder, or with monitor=none: no monitor given, the mission still withdrawn
    # (planted: the judge reading the file only when given a monitor -> nothing withdrawn here)
    by_mission = {M: [{"group_id": "x"}], N: [{"group_id": "y"}]}
    withdrawn = mission_withdrawals(op, digest, None, None, by_mission, [M, N], op_path)
    assert list(withdrawn) == [M] and str(withdrawals_path(op_path)) in withdrawn[M]


def test_the_monitor_run_again_records_nothing_twice_and_another_digest_is_another_file_version(tmp_path):
    op, op_path, digest = withdrawn_by_the_monitor(tmp_path)
    monitor = monitor_file.load_monitor(tmp_path / "days" / "monitor" / "monitor.json")
    assert record(op_path, digest, monitor, "m.json") == []
    assert len(withdrawals_path(op_path).read_text(encoding="utf-8").splitlines()) == 1
    assert recorded(op_path, PointKeys("point-another", "another digest")) == {}


@pytest.mark.parametrize("damage, says", [
    (lambda text: text[:-20], "torn"),                                                       # cut short
    (lambda text: text + "not json\n", ":2: "),
    (lambda text: json.dumps({**json.loads(text), "why": None}) + "\n", "without why"),
])
def test_a_withdrawals_file_that_cannot_be_read_stops_the_judge(tmp_path, damage, says):
    op, op_path, digest = withdrawn_by_the_monitor(tmp_path)
    path = withdrawals_path(op_path)
    path.write_text(damage(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(WithdrawalsError, match=says):
        mission_withdrawals(op, digest, None, None, {M: [{"group_id": "x"}]}, [M], op_path)


def test_a_torn_withdrawal_is_no_dead_end_the_monitor_run_again_records_it_whole(tmp_path):
    """The fix the message names works: the monitor run again sets the torn piece aside (named, kept) and records the
    withdrawal whole; the judge then finds it (planted: the writer reading without repair -> the same error again)."""
    op, op_path, digest = withdrawn_by_the_monitor(tmp_path)
    path = withdrawals_path(op_path)
    path.write_text(path.read_text(encoding="utf-8")[:-20], encoding="utf-8")
    with pytest.raises(WithdrawalsError, match="run group-qc monitor again"):
        recorded(op_path, digest)
    assert mon.main(["--operating_point", str(op_path), "--days_under", str(tmp_path / "days"), "--labels",
                     str(tmp_path / "labels"), "--output_dir", str(tmp_path / "days" / "monitor")]) == 0
    assert list(recorded(op_path, digest)) == [M]
    assert path.with_name(path.name + ".torn").read_text(encoding="utf-8").strip()


def test_a_withdrawal_that_cannot_be_recorded_stops_the_monitor(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    withdrawals_path(op_path).mkdir()   # a folder where the file goes: nothing can be appended
    monitor = {"missions": {M: {"status": "withdrawn", "why": "escapes", "withdrawn_day": "d"}}}
    with pytest.raises(WithdrawalsError, match="cannot record the withdrawal in .*op.withdrawals.jsonl"):
        record(op_path, digest, monitor, "m.json")


def _newline(path, tmp_path):
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    return path


def _crlf(path, tmp_path):
    path.write_bytes(json.dumps(json.loads(path.read_text(encoding="utf-8")), ensure_ascii=False, indent=2)
                     .replace("\n", "\r\n").encode("utf-8"))
    return path


def _reordered(path, tmp_path):
    content = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(dict(reversed(list(content.items()))), ensure_ascii=True, indent=4), encoding="utf-8")
    return path


def _copied(path, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    return Path(shutil.copy(path, tmp_path / "elsewhere" / "operating_point.json"))


def _renamed(path, tmp_path):
    return path.rename(path.with_name("signed-2026-11-28.json"))


def _linked(path, tmp_path):
    link = tmp_path / "current.json"
    link.symlink_to(path)
    return link


@pytest.mark.parametrize("change", [_newline, _crlf, _reordered, _copied, _renamed, _linked])
def test_a_withdrawal_follows_the_promise_not_the_files_bytes(tmp_path, change):
    """An editor's final newline, CRLF line ends, keys reordered and re-indented, a copy into another folder, a rename
    or a symlink is the same point: the same identity, the same earlier days, the same withdrawal (the copy's through
    the labels folder, where the monitor records it too). Planted: the identity taken from the file's bytes (the old
    sha256 key) -> the newline, CRLF and reordered files are new, unwithdrawn points; the withdrawal read only beside
    the file, by its name -> the copy and the rename."""
    op, op_path, keys = withdrawn_by_the_monitor(tmp_path)
    moved = change(op_path, tmp_path)
    again = load_operating_point(moved)
    same = point_keys(moved, again)
    assert same.identity == keys.identity
    by_mission = {M: [{"group_id": "x"}], N: [{"group_id": "y"}]}
    assert list(mission_withdrawals(again, same, None, None, by_mission, [M, N], moved, tmp_path / "labels")) == [M]
    assert [d.name for d in days_under(tmp_path / "days", same)] == ["2026-11-27", "2026-11-28"]


def test_a_changed_promise_is_another_point(tmp_path):
    """A promise changed in any way (here one mission's target) is another point, with none of the old one's days
    or withdrawals: it must be certified (and, if weaker, accepted)."""
    op, op_path, keys = withdrawn_by_the_monitor(tmp_path)
    content = json.loads(op_path.read_text(encoding="utf-8"))
    content["missions"][N]["target_miss_rate"] = 0.15
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    other = point_keys(changed, load_operating_point(changed))
    assert other.identity != keys.identity and recorded(changed, other, tmp_path / "labels") == {}
    with pytest.raises(MonitorError, match="no day under"):
        days_under(tmp_path / "days", other)


def test_a_log_cut_after_the_monitor_read_it_stops_the_monitor_even_without_its_head(tmp_path, capsys):
    """The field case: the confirming reviewer's lines cut off the end of the log turned a withdrawn mission
    `unverified`. The monitor.json and the withdrawal record it made carry the log's head; cut lines (and the head
    beside the log deleted) stop the next monitor run, naming what is missing (planted: seen_heads returning nothing
    -> the run succeeds on the cut log)."""
    withdrawn_by_the_monitor(tmp_path)
    log = tmp_path / "labels" / "decisions.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines()
    log.write_text("\n".join(lines[:-12]) + "\n", encoding="utf-8")
    (tmp_path / "labels" / "decisions.head.json").unlink()
    op_path = tmp_path / "op.json"
    assert mon.main(["--operating_point", str(op_path), "--days_under", str(tmp_path / "days"), "--labels",
                     str(tmp_path / "labels"), "--output_dir", str(tmp_path / "days" / "monitor")]) == 2
    assert "line(s) were cut off" in capsys.readouterr().err
