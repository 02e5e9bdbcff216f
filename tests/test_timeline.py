"""stage_b.monitoring.timeline: one timeline per mission across operating points. Certify, judge days, withdraw,
re-certify (weaker, accepted in words), judge more days: the monitor at the new point archives the old point's days
whole and its page shows both, the withdrawal and why, and who accepted the point that replaced it."""
from __future__ import annotations

import json

from stage_b.monitoring import monitor as mon
from stage_b.rules import acceptances
from stage_b.rules.operating_point import load_operating_point, point_keys
from tests.helpers import write_day, write_labels
from tests.test_monitor import normal_day
from tests.test_replacement import TARGETS, certify, day_predictions

from tests.test_replacement import A as M


def _shifted(prefix: str) -> list:
    """Every defective group looks fine to the model: auto-passed, half of them audited, all labelled 不通过."""
    return [(f"{prefix}f{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(20)] + \
        [(f"{prefix}p{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(10)]


def _monitor(op_path, project, *extra) -> dict:
    rc = mon.main(["--operating_point", str(op_path), "--days_under", str(project / "days"), "--labels",
                   str(project / "labels"), "--output_dir", str(project / "days" / "monitor"),
                   "--false_alarm_years", "1", *extra])
    assert rc == 0
    return json.loads((project / "days" / "monitor" / "monitor.json").read_text(encoding="utf-8"))


def test_a_recertified_points_monitor_keeps_the_replaced_points_days_and_withdrawal(tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    rc, old = certify(project, "old", day_predictions(0), *TARGETS)
    assert rc == 0
    old_keys = point_keys(old, load_operating_point(old))
    write_day(project / "days" / "day1", old_keys, normal_day("a"))
    write_day(project / "days" / "day2", old_keys, _shifted("b"))
    labels = {(M, g): ("不通过" if "f" in g else "通过") for g, *_ in normal_day("a") + _shifted("b")}
    write_labels(project / "labels", labels)
    first = _monitor(old, project)
    assert first["missions"][M]["status"] == "withdrawn" and first["missions"][M]["withdrawn_day"] == "day2"
    # the day after, judged at the withdrawn point (every group to review): its monitor never ran again
    write_day(project / "days" / "day3", old_keys, [(g, v, p, "review", d) for g, v, p, _, d in normal_day("r")])
    # re-certified on more evidence, weaker (two misses), accepted by the owner in words (the review app's record)
    rc, new = certify(project, "new", day_predictions(2), "--replaces", str(old))
    assert rc == 0
    new_keys = point_keys(new, load_operating_point(new))
    acceptances.record(new, new_keys, "新摄像头需要更低阈值，王经理签字", "王经理", "2026-11-29T08:00:00+00:00")
    write_day(project / "days" / "day4", new_keys, normal_day("c"))
    write_day(project / "days" / "day5", new_keys, normal_day("d"))
    labels.update({(M, g): ("不通过" if "f" in g else "通过") for g, *_ in normal_day("c") + normal_day("d")})
    write_labels(project / "labels", labels)
    capsys.readouterr()
    second = _monitor(new, project)
    assert second["days"] == ["day4", "day5"]
    assert second["replaced"]["identity"] == old_keys.identity
    (before,) = second["timeline"]
    # every day of the old point, the one judged after its last monitor too (planted: the monitor.json it left)
    assert before["identity"] == old_keys.identity and before["days"] == ["day1", "day2", "day3"]
    withdrawn = before["missions"][M]
    assert withdrawn["withdrawn_day"] == "day2" and "the miss rate is above the promised" in withdrawn["withdrawn_why"]
    assert withdrawn["status_line"].startswith("withdrawn on day2 because")
    assert before["replaced_by"] == {"identity": new_keys.identity,
                                     "accepted": "新摄像头需要更低阈值，王经理签字 (accepted by 王经理 at "
                                                 "2026-11-29T08:00:00+00:00)"}
    page = (project / "days" / "monitor" / "index.html").read_text(encoding="utf-8")
    assert page.index("Timeline") < page.index("withdrawn on day2") < page.index("This operating point")
    assert "王经理签字" in page
    printed = capsys.readouterr().out
    assert printed.startswith("before: operating point") and f"{M}: withdrawn on day2 because" in printed
    # archived by the point's identity, never cut: the monitor run again keeps it whole
    archive = project / "days" / "monitor" / "points" / old_keys.identity[:16] / "monitor.json"
    assert json.loads(archive.read_text(encoding="utf-8"))["days"] == ["day1", "day2", "day3"]
    third = _monitor(new, project)
    assert [e["days"] for e in third["timeline"]] == [["day1", "day2", "day3"]]
