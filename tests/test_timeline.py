"""stage_b.monitoring.timeline: one timeline per mission across operating points. Certify, judge days, withdraw,
re-certify (weaker, accepted in words), judge more days: the monitor at the new point archives the old point's days
whole and its page shows both, the withdrawal and why, and who accepted the point that replaced it; the project moved
whole, exports made before the move import, and every audited group is accounted for."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from qc_core.jsonl import file_sha256, record_digest, write_jsonl_atomic
from stage_b.labels.decision_lines import decision_line
from stage_b.labels.decisions import import_decisions
from stage_b.monitoring import monitor as mon
from stage_b.rules import acceptances
from stage_b.rules.operating_point import load_operating_point, point_keys
from tests.helpers import write_day, write_labels
from tests.test_monitor import normal_day
from tests.test_replacement import A as M
from tests.test_replacement import TARGETS, certify, day_predictions

ACCEPTED = "新摄像头需要更低阈值，王经理签字"


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


def _withdrawn_then_recertified(project: Path):
    """Days 1-3 at the old point (withdrawn on day 2, day 3 judged after its last monitor ran), re-certified weaker
    and accepted in the review app's record, days 4-5 at the new point. Returns (old keys, new point file, labels)."""
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
    write_day(project / "days" / "day3", old_keys, [(g, v, p, "review", d) for g, v, p, _, d in normal_day("r")])
    rc, new = certify(project, "new", day_predictions(2), "--replaces", str(old))
    assert rc == 0
    new_keys = point_keys(new, load_operating_point(new))
    acceptances.record(new, new_keys, ACCEPTED, "王经理", "2026-11-29T08:00:00+00:00")
    write_day(project / "days" / "day4", new_keys, normal_day("c"))
    write_day(project / "days" / "day5", new_keys, normal_day("d"))
    return old_keys, new_keys, new, labels


def test_a_recertified_points_monitor_keeps_the_replaced_points_days_and_withdrawal(tmp_path, capsys):
    project = tmp_path / "project"
    old_keys, new_keys, new, labels = _withdrawn_then_recertified(project)
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
                                     "accepted": f"{ACCEPTED} (accepted by 王经理 at 2026-11-29T08:00:00+00:00)"}
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
    # an archive edited by hand (the withdrawal taken out, a day added so that no rerun replaces it) is read back
    # checked: named, never shown as the history
    edited = json.loads(archive.read_text(encoding="utf-8"))
    edited["missions"][M]["status"] = "holds"
    edited["days"].append("day0")
    archive.write_text(json.dumps(edited, ensure_ascii=False), encoding="utf-8")
    (entry,) = _monitor(new, project)["timeline"]
    assert "was edited" in entry["error"] and entry["missions"] == {}


def test_a_moved_project_imports_its_old_exports_and_shows_one_timeline_with_every_audit(tmp_path):
    """The owner's record, end to end: certify, judge, withdraw, re-certify with acceptance, judge more days; day 5's
    audits are exported from its page, the project is moved whole, the exports (naming the old place) are imported
    in the new one, and the monitor there shows one timeline, every audited auto-passed group of every day counted:
    labelled, waiting for a second person, or unresolved (one in conflict)."""
    project = tmp_path / "before" / "project"
    project.parent.mkdir()
    old_keys, new_keys, new, labels = _withdrawn_then_recertified(project)
    labels.update({(M, g): ("不通过" if "f" in g else "通过") for g, *_ in normal_day("c")})
    write_labels(project / "labels", labels, records=True)
    day5 = project / "days" / "day5" / f"{M}_verdicts.jsonl"
    lines = [{**json.loads(x), "images": ["1.jpg"], "input_dir": "../../photos"}
             for x in day5.read_text(encoding="utf-8").splitlines()]
    write_jsonl_atomic(day5, lines)
    audits = [v for v in lines if v["route"] in ("audit", "review")]
    source = {"file": str(day5), "sha256": file_sha256(day5)}
    exports = tmp_path / "before" / "王工.jsonl"
    rows = [decision_line(v, "不通过" if "f" in v["group_id"] else "通过", "王工", source, seen=record_digest(v))
            for v in audits]
    conflict = next(v for v in audits if v["route"] == "audit" and v["verdict"] == "通过")
    rows.append(decision_line(conflict, "不通过", "李工", source, seen=record_digest(conflict)))
    write_jsonl_atomic(exports, rows)
    moved = tmp_path / "after" / "project"
    moved.parent.mkdir()
    shutil.move(str(project), str(moved))
    import_decisions([exports], moved / "labels")   # the sources named the old place: found under the project
    monitor = _monitor(moved / "new" / "operating_point.json", moved)
    assert [e["days"] for e in monitor["timeline"]] == [["day1", "day2", "day3"]]
    assert monitor["timeline"][0]["missions"][M]["withdrawn_day"] == "day2"
    for day in monitor["missions"][M]["days"]:
        folder = moved / "days" / day["day"]
        audited = [json.loads(x) for x in (folder / f"{M}_verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
        passed = sum(v["route"] == "audit" and v["verdict"] == "通过" for v in audited)
        assert passed == day["audited_auto_passed"] + day["escapes_unconfirmed"] + len(day["unresolved"]), day
    day5_row = monitor["missions"][M]["days"][-1]
    assert day5_row["unresolved"] == [{"group_id": conflict["group_id"], "why": "conflict"}]
    assert monitor["missions"][M]["status"] == "unverified"
