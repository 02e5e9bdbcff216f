"""stage_b.rules.withdrawals: a withdrawal is recorded beside the operating point it breaks, so that every judge at that
operating point finds it: one judging the next day under another output folder, or told monitor=none, still sends the
mission's groups to review. Fails closed: a file that cannot be read or written stops the monitor or the judge."""
from __future__ import annotations

import json

import pytest

from stage_b.monitoring import monitor as mon
from stage_b.judging.judge import mission_withdrawals
from stage_b.rules.withdrawals import WithdrawalsError, record, recorded, withdrawals_path
from tests.helpers import M, write_day, write_labels
from tests.test_monitor import N, make_op, normal_day
from stage_b.monitoring import monitor_file


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
    assert recorded(op_path, "another digest") == {}


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


def test_a_withdrawal_that_cannot_be_recorded_stops_the_monitor(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    withdrawals_path(op_path).mkdir()   # a folder where the file goes: nothing can be appended
    monitor = {"missions": {M: {"status": "withdrawn", "why": "escapes", "withdrawn_day": "d"}}}
    with pytest.raises(WithdrawalsError, match="cannot record the withdrawal beside the operating point"):
        record(op_path, digest, monitor, "m.json")
