"""group_qc_dev.score_judge: the demo's last table, on hand-made verdicts with a known truth."""
from __future__ import annotations

import json

import pytest

from group_qc_dev.score_judge import score, score_rows

M = "BBU接地线检查"


def _verdict(gid, verdict, needs_review, why=()):
    return {"group_id": gid, "mission": M, "verdict": verdict, "needs_review": needs_review, "review_why": list(why)}


ROWS = [_verdict("f1", "通过", False),                      # a miss the owner gets
        _verdict("f2", "通过", True, ["the reason contradicts 通过: …"]),   # a miss caught by review
        _verdict("f3", "不通过", False),
        _verdict("p1", "不通过", False),                    # an overkill the owner gets
        _verdict("p2", "通过", False),
        _verdict("p3", "不通过", True, ["not certified: …"])]
TRUTH = {(M, g): ("fail" if g.startswith("f") else "pass") for g in ("f1", "f2", "f3", "p1", "p2", "p3")}


def test_rates_count_only_what_was_decided_without_review():
    s = score_rows(ROWS, TRUTH)
    assert (s["judged"], s["auto_decided"]) == (6, 4) and s["automation_share"] == pytest.approx(4 / 6)
    assert s["miss_rate"] == pytest.approx(1 / 3) and s["overkill_rate"] == pytest.approx(1 / 3)
    assert s["verdict_miss_rate"] == pytest.approx(2 / 3) and s["verdict_overkill_rate"] == pytest.approx(2 / 3)
    assert s["reviewed_for_the_reason"] == 1


def test_score_reads_the_truth_the_verdicts_and_the_promise(tmp_path):
    photos, verdicts = tmp_path / "photos", tmp_path / "verdicts"
    photos.mkdir()
    verdicts.mkdir()
    (photos / "ground_truth.jsonl").write_text("".join(
        json.dumps({"image": f"{M}/{g}/1.jpg", "mission": M, "label": t, "group_id": g, "summary": "s"},
                   ensure_ascii=False) + "\n" for (_, g), t in TRUTH.items()), encoding="utf-8")
    (verdicts / f"{M}_verdicts.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS),
                                                   encoding="utf-8")
    op = tmp_path / "op.json"
    op.write_text(json.dumps({"confidence": 0.8, "automation": {"automation_share": 0.5}, "missions": {
        M: {"certified": False, "fail_groups_needed": 8, "promise": "cannot promise", "automation_share": 0.0}}},
        ensure_ascii=False), encoding="utf-8")
    s = score(photos, verdicts, op)
    assert s["per_mission"][M]["fail_groups_needed"] == 8 and s["per_mission"][M]["certified"] is False
    assert s["overall"]["judged"] == 6 and s["overall"]["validation_automation_share"] == 0.5
