"""Known-answer (gold) checks (issue 35 item 5, stage_b.labels.gold): mixed into the day by the judge,
indistinguishable on
the page from the day's blind audits, scored per reviewer by the import instead of becoming labels, left out of the
day's automation figures and of the monitor."""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest

from qc_core.jsonl import file_sha256, record_digest, write_jsonl_atomic
from qc_core.missions import load_registry
from stage_b.labels.decisions import import_decisions
from stage_b.labels.decision_lines import decision_line
from stage_b.labels.gold import GoldError, check_gold_share, load_gold, mix_in
from stage_b.rules.routes import AUDIT
from tests.helpers import SEED, certified_op, judge_args
from tests.helpers import M, read_lines, run_judge, stage_a_folder
from stage_b.judging import day_review
from stage_b.judging import verdict_file


def _record(k: int, label=None, mission=M) -> dict:
    return {"group_id": f"QC-OLD-{k}", "mission": mission, "label": label, "images": ["1.jpg"],
            "per_image": {"图片_1": "接地线×1/已捆扎" if label != "fail" else "接地线×1/未捆扎"}, "model": "/sa",
            "created_at": "2026-11-20T00:00:00+00:00", "input_dir": "/photos"}


def test_the_gold_files_are_checked_line_by_line(tmp_path):
    write_jsonl_atomic(tmp_path / "g.jsonl", [_record(0, "fail"), _record(1, None), {"group_id": "x"}])
    with pytest.raises(GoldError) as err:
        load_gold([tmp_path / "g.jsonl", tmp_path / "nope.jsonl"], load_registry())
    text = str(err.value)
    assert ("g.jsonl:2: group QC-OLD-1 has no label" in text and "g.jsonl:3" in text
            and "nope.jsonl does not exist" in text)
    for bad in ("x", "-0.1", "2"):
        with pytest.raises(GoldError, match="--gold_share"):
            check_gold_share(bad)


def test_the_mix_is_the_seeds_draw_with_the_answer_out_of_sight():
    gold = {M: [{**_record(k, "fail" if k % 2 else "pass"), "_gold_from": "/g.jsonl"} for k in range(40)]}
    today = {M: [_record(100 + k) for k in range(30)] + [{**_record(3), "label": None}]}   # QC-OLD-3 is today's too
    mixed = mix_in(gold, today, 0.1, SEED)[M]
    assert len(mixed) == math.ceil(0.1 * 31) and mixed == mix_in(gold, today, 0.1, SEED)[M]
    assert all(g["label"] is None and g["gold_label"] in ("pass", "fail") and g["gold_from"] == "/g.jsonl"
               for g in mixed)
    assert "QC-OLD-3" not in {g["group_id"] for g in mixed} and mix_in(gold, today, 0.0, SEED)[M] == []


def _day_with_gold(tmp_path, audit_share=0.5):
    """Verdict lines as the judge writes them: 12 of the day's groups (half audited or reviewed) and 4 gold checks."""
    from stage_b.rules.operating_point import manual_point
    point = replace(manual_point(0.5), certified=True, promise="a test's", threshold_fail=0.5, review_margin=0)
    provenance = {"audit_share": audit_share, "audit_seed": SEED, "gold_share": 0.3}
    today = [_record(200 + k) for k in range(12)]
    gold = [{**_record(k), "label": None, "gold_label": "fail" if k % 2 else "pass", "gold_from": "/g.jsonl"}
            for k in range(4)]
    lines = [verdict_file.verdict_record(r, 0.2, point, "通过\n理由: 图片_1 接地线已捆扎", provenance)
             for r in today + gold]
    out = tmp_path / "day"
    out.mkdir()
    write_jsonl_atomic(verdict_file.verdicts_path(out, M), lines)
    return out, lines


def test_a_gold_card_cannot_be_told_from_a_blind_audit_on_the_page(tmp_path):
    out, lines = _day_with_gold(tmp_path)
    gold = [v for v in lines if v.get("gold")]
    audits = [v for v in lines if v["route"] == AUDIT and not v.get("gold")]
    assert len(gold) == 4 and audits and all(v["route"] == AUDIT and v["label"] is None for v in gold)
    day_review.write_day_review(out, [M], [tmp_path])
    html = (out / "review" / "index.html").read_text(encoding="utf-8")
    index = (out / "review" / "groups.js").read_text(encoding="utf-8")
    bare = (html + index).replace(str(tmp_path), "TMP").lower()   # the test's own folder is named after it
    assert "gold" not in bare and "/g.jsonl" not in bare
    assert "审核不通过" not in html and "审核通过" not in html   # no answer anywhere
    cards = {m.group(1): m.group(0) for m in re.finditer(r'<div class="card" data-mission="[^"]*" '
                                                          r'data-group-id="([^"]*)"[^>]*>.*?<div class="decide"',
                                                          html, re.S)}

    def shape(card_html: str, v: dict) -> str:
        """The card with what differs between any two groups blanked: id, anchor, seal, summaries, photo names."""
        text = card_html.replace(v["group_id"], "ID")
        text = re.sub(r'id="card-\d+"', 'id="card-N"', text)
        text = re.sub(r'data-sealed="[^"]*"', 'data-sealed="S"', text)
        for s in v["summaries"]:
            text = text.replace(s, "SUMMARY")
        return text
    assert {shape(cards[v["group_id"]], v) for v in gold} == {shape(cards[v["group_id"]], v) for v in audits}
    entries = json.loads(index.split("=", 1)[1].rstrip().rstrip(";"))["groups"]
    keys = {frozenset(g) for g in entries if g["id"] in {v["group_id"] for v in gold + audits}}
    assert len(keys) == 1   # the same fields in the page's index


def test_the_import_scores_gold_and_labels_nothing_from_it(tmp_path, capsys):
    from stage_b.labels.decisions import main
    out, lines = _day_with_gold(tmp_path)
    path = verdict_file.verdicts_path(out, M)
    source = {"file": str(path.resolve()), "sha256": file_sha256(path)}
    gold = [v for v in lines if v.get("gold")]
    wrong = {"pass": "不通过", "fail": "通过"}
    right = {"pass": "通过", "fail": "不通过"}
    day = next(v for v in lines if not v.get("gold") and v["route"] == AUDIT)
    decided = [decision_line(v, (wrong if k < 3 else right)[v["gold"]["label"]], "粗心", source, seen=record_digest(v))
               for k, v in enumerate(gold)]
    decided.append(decision_line(day, "不通过", "粗心", source, seen=record_digest(day)))
    write_jsonl_atomic(tmp_path / "d.jsonl", decided)
    assert main(["--decisions", str(tmp_path / "d.jsonl"), "--output_dir", str(tmp_path / "labels"),
                 "--min_gold_accuracy", "0.8"]) == 0
    printed, err = capsys.readouterr()
    assert f"{M}: 粗心 on known-answer groups: right on 1 of 4 (25.0%), 0 unsure" in printed
    labels = [json.loads(x) for x in (tmp_path / "labels" / f"{M}_stage_a.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [r["group_id"] for r in labels] == [day["group_id"]]   # gold groups became no label
    assert "blind audits of work decided without review: 1 escape(s) in 1 auto-passed" in printed   # not 4 more
    # 4 known-answer groups are fewer than the 5 that measure a reviewer in one mission, but 3 wrong of 4 puts their
    # error rate above 0.2 at 90% confidence in the pooled reviewer table (stage_b.labels.reviewer_quality): named, and
    # their lone label certifies nothing
    review = labels[0]["review"]
    assert review["certifies"] is False and "wrong on 3 of 4 gold answers" in review["quality"]
    assert "粗心 is below the bar: wrong on 3 of 4 gold answers" in err
    result = import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels2", min_gold_accuracy=0.8)
    assert result["gold"][M]["粗心"] == {"n": 4, "correct": 1, "unsure": 0}


def test_a_reviewer_wrong_on_gold_certifies_nothing_alone(tmp_path):
    from stage_b.labels.agreement import gold_scores, quality
    groups = {(M, f"g{k}"): {"record": {"gold": {"label": "fail"}}, "decisions": [
        {"reviewer": "粗心", "decision": "通过" if k < 4 else "不通过"}]} for k in range(6)}
    bar = quality({}, 0.6, gold_scores(groups), 0.8)
    assert bar[M]["粗心"]["status"] == "below the bar" and "right on 2 of 6" in bar[M]["粗心"]["why"]


def test_gold_lines_are_not_the_days_work(tmp_path):
    from stage_b.monitoring.days import read_days
    out, lines = _day_with_gold(tmp_path)
    automation = day_review.automation_of(out, [M])["per_mission"][M]
    assert automation["judged"] == 12
    (day,) = read_days([out], None, load_registry())   # the monitor's audits are the day's own
    assert len(day.verdicts[M]) == 12 and not any(v.get("gold") for v in day.verdicts[M])


@pytest.mark.slow
def test_the_judge_mixes_gold_in_and_a_resume_keeps_them(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=8)
    other = "挡风板安装检查"   # a mission not judged today: said, not mixed in
    write_jsonl_atomic(tmp_path / "gold.jsonl", [_record(k, "fail" if k % 2 else "pass") for k in range(10)]
                       + [_record(50, "pass", mission=other)])
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    args = judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "v", "--audit_share", "0.5", "--audit_seed", str(SEED),
                      "--gold", str(tmp_path / "gold.jsonl"), "--gold_share", "0.25")
    result = run_judge(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = read_lines(verdict_file.verdicts_path(tmp_path / "v", M))
    gold = [v for v in lines if v.get("gold")]
    assert len(gold) == 2 and all(v["label"] is None and v["gold"]["label"] in ("pass", "fail") for v in gold)
    assert f"{M}: " in result.stdout and "of 8 groups" in result.stdout   # the day's figures leave gold out
    assert f"not judged today, not mixed in: {other} (1)" in result.stderr
    again = run_judge(*args)   # a resume: the same two, nothing judged again
    assert again.returncode == 0 and "0 to judge" in again.stdout, again.stderr[-2000:]


def test_a_gold_file_that_cannot_work_stops_the_judge_before_the_model_loads(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "o", "--gold",
                                   str(tmp_path / "nope.jsonl")),
                    timeout=120)
    assert result.returncode == 2 and "nope.jsonl does not exist" in result.stderr and "Loading" not in result.stderr


def test_a_gold_check_never_replaces_or_hides_the_label_it_was_drawn_from(tmp_path):
    """The documented flow: a day's groups reviewed and imported (their labels), later drawn as gold and decided
    again (wrongly, on purpose) into the same labels folder. Every earlier label stays as it was; the gold checks
    only score the reviewer."""
    from stage_b.rules.operating_point import manual_point
    point = replace(manual_point(0.5), certified=True, promise="a test's", threshold_fail=0.5, review_margin=0)
    earlier = [verdict_file.verdict_record(_record(k), 0.9, point, "不通过\n理由: 图片_1 接地线未捆扎",
                                    {"audit_share": 0.0, "audit_seed": SEED}) for k in range(4)]
    (tmp_path / "earlier").mkdir()
    write_jsonl_atomic(verdict_file.verdicts_path(tmp_path / "earlier", M), earlier)
    path = verdict_file.verdicts_path(tmp_path / "earlier", M)
    source = {"file": str(path.resolve()), "sha256": file_sha256(path)}
    truth = {f"QC-OLD-{k}": ("不通过" if k % 2 else "通过") for k in range(4)}
    write_jsonl_atomic(tmp_path / "first.jsonl", [decision_line(v, truth[v["group_id"]], "王工", source,
                                                                seen=record_digest(v)) for v in earlier])
    import_decisions([tmp_path / "first.jsonl"], tmp_path / "labels")

    def labels():
        rows = [json.loads(x) for x in (tmp_path / "labels" / f"{M}_stage_a.jsonl").read_text(
            encoding="utf-8").splitlines()]
        return {r["group_id"]: r["label"] for r in rows}
    before = labels()
    assert len(before) == 4
    out, lines = _day_with_gold(tmp_path)
    day_path = verdict_file.verdicts_path(out, M)
    day_source = {"file": str(day_path.resolve()), "sha256": file_sha256(day_path)}
    flipped = {"通过": "不通过", "不通过": "通过"}
    write_jsonl_atomic(tmp_path / "gold.jsonl", [
        decision_line(v, flipped[truth[v["group_id"]]], "李工", day_source, seen=record_digest(v))
        for v in lines if v.get("gold")])
    result = import_decisions([tmp_path / "gold.jsonl"], tmp_path / "labels")
    assert labels() == before
    assert result["gold"][M]["李工"]["n"] == 4 and result["gold"][M]["李工"]["correct"] == 0


def test_gold_given_twice_is_read_once_and_an_empty_gold_file_is_named(tmp_path, capsys):
    """--gold F F, or two files holding one group: each known answer once; a file without a labelled group is refused
    (nothing would be mixed in, silently)."""
    write_jsonl_atomic(tmp_path / "g.jsonl", [_record(k, "pass" if k % 2 else "fail") for k in range(4)])
    write_jsonl_atomic(tmp_path / "h.jsonl", [_record(k, "pass" if k % 2 else "fail") for k in range(2, 6)])
    registry = load_registry()
    assert [g["group_id"] for g in load_gold([tmp_path / "g.jsonl", tmp_path / "g.jsonl"], registry)[M]] == \
        [f"QC-OLD-{k}" for k in range(4)]
    both = load_gold([tmp_path / "g.jsonl", tmp_path / "h.jsonl"], registry)[M]
    assert sorted(g["group_id"] for g in both) == [f"QC-OLD-{k}" for k in range(6)]
    assert "was read already" in capsys.readouterr().err
    write_jsonl_atomic(tmp_path / "empty.jsonl", [])
    with pytest.raises(GoldError, match="holds no labelled group"):
        load_gold([tmp_path / "empty.jsonl"], registry)


def test_a_group_judged_today_is_never_drawn_as_gold():
    """Every gold group is drawn (share 1, more of today's groups than gold ones), so the one judged today would be
    drawn too if the draw did not leave it out, whatever the seed."""
    gold = {M: [{**_record(k, "fail"), "_gold_from": "/g.jsonl"} for k in range(3)]}
    today = {M: [_record(k) for k in (1, 10, 11, 12, 13)]}   # QC-OLD-1 is today's work too
    for seed in range(5):
        drawn = [g["group_id"] for g in mix_in(gold, today, 1.0, seed)[M]]
        assert sorted(drawn) == ["QC-OLD-0", "QC-OLD-2"], seed


@pytest.mark.parametrize("flags, labels_has_files, gold, share", [
    ([], True, "labels", 0.05),                      # labels exist: their groups are the gold, at 5%
    (["--gold_share", "0.1"], True, "labels", 0.1),
    (["--gold_share", "0"], True, None, 0.0),        # turned off, said on the summary
    (["--gold_share", "0.000"], True, None, 0.0),    # the share, not its spelling (planted: "0" and "0.0" only)
    (["--gold_share", " 0e0 "], True, None, 0.0),
    ([], False, None, 0.0),                          # an empty labels folder: no gold yet
    (["--gold", "g.jsonl"], True, "g.jsonl", 0.05),  # --gold names the files: the labels are not added
])
def test_gold_is_on_by_default_once_labels_exist(tmp_path, flags, labels_has_files, gold, share):
    """Every reviewer is measured within days: with --labels, the labelled groups are the day's gold at 5%
    (planted: default_gold returning nothing -> a plain day has no gold check)."""
    from stage_b.judging.settings import JudgeSettings, build_parser
    labels = tmp_path / "labels"
    labels.mkdir()
    if labels_has_files:
        (labels / f"{M}_stage_a.jsonl").write_text("", encoding="utf-8")
    settings = JudgeSettings.from_args(build_parser().parse_args(
        ["--model", "m", "--stage_a_dir", "sa", "--output_dir", "o", "--threshold", "0.5", "--labels", str(labels),
         *flags]))
    expected = {"labels": (str(labels / f"{M}_stage_a.jsonl"),), "g.jsonl": ("g.jsonl",), None: ()}[gold]
    assert settings.gold == expected and settings.gold_share == share


@pytest.mark.parametrize("gold, share, says", [
    (("labels/x_stage_a.jsonl",), 0.05, "gold: 1 known-answer group(s) among the day's review cards (0.05 of each "
                                        "mission's groups, from labels)"),
    ((), 0.0, "gold: off (--gold_share 0): no reviewer is measured on known answers today"),
])
def test_the_summary_says_whether_the_day_holds_gold(capsys, gold, share, says):
    from stage_b.judging.day_summary import print_gold
    print_gold(gold, share, "labels", [{"gold": {"label": "pass"}}, {}])
    assert says in capsys.readouterr().out
