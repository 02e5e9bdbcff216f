"""A re-certified operating point (stage_b.rules.replacement): it keeps the replaced point's targets unless a flag
changes
them, puts each promise beside the old one, and a weaker promise decides nothing until the owner accepts it in words.
The whole path: predictions.jsonl -> `group-qc evaluate --predictions … --replaces OLD` (in process, the real
argument parser) -> operating_point.json and report.md -> the judge's reading of them."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from stage_b import evaluate
from stage_b.judging import judge
from stage_b.rules import acceptances
from stage_b.rules.point_identity import PointKeys
from qc_core.paths import resolved
from stage_b.rules.operating_point import load_operating_point, point_keys, thresholds_for
from stage_b.rules.replacement import (ReplacementError, check_words, inherit_targets, numbers_of, recomputed_weaker,
                                       weaker_because, weaker_missions)
from stage_b.contract.verdict import FAIL, PASS
from stage_b.judging import settings as judge_settings
from stage_b.judging import verdict_file

A = "BBU接地线检查"
MODEL = {"path": "/models/qc", "fingerprint": "f" * 32}
TARGETS = ("--target_miss_rate", "0.2", "--confidence", "0.8", "--target_overkill_rate", "0.4")


def prediction(k: int, p: float, expected: str) -> dict:
    said = FAIL if p >= 0.5 else PASS
    return {"group_id": f"QC-R-{k}", "mission": A, "expected": expected,
            "completion": f"{said}\n理由: 图片_1 接地线" + ("未捆扎" if said == FAIL else "已捆扎"),
            "summaries": ["接地线×1/已捆扎"], "p_fail": p}


def day_predictions(low_fails: int) -> list[dict]:
    """40 defective groups (`low_fails` of them with a low p_fail: misses the rule lets through) and 40 good ones."""
    fails = [prediction(k, 0.02 + 0.001 * k if k < low_fails else 0.6 + 0.005 * k, FAIL) for k in range(40)]
    return fails + [prediction(100 + k, 0.1 + 0.005 * k, PASS) for k in range(40)]


def certify(tmp_path: Path, name: str, predictions: list[dict], *flags: str) -> tuple[int, Path]:
    source = tmp_path / f"{name}-predictions"
    source.mkdir()
    (source / "predictions.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions),
                                              encoding="utf-8")
    (source / "metrics.json").write_text(json.dumps({"checkpoints": {"model": MODEL, "adapters": []}}))
    out = tmp_path / name
    rc = evaluate.main(["--predictions", str(source / "predictions.jsonl"), "--output_dir", str(out), "--no_review",
                        *flags])
    return rc, out / "operating_point.json"


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture()
def old_point(tmp_path) -> Path:
    rc, path = certify(tmp_path, "old", day_predictions(0), *TARGETS)
    assert rc == 0 and read(path)["missions"][A]["certified"]
    return path


def test_a_recertification_keeps_the_replaced_targets_and_says_so(tmp_path, old_point, capsys):
    """Planted: --replaces without inheriting the targets -> no miss target (refused) or no auto-fail rule."""
    rc, path = certify(tmp_path, "new", day_predictions(0), "--replaces", str(old_point))
    assert rc == 0, capsys.readouterr().err
    entry = read(path)["missions"][A]
    assert (entry["target_miss_rate"], entry["confidence"], entry["target_overkill_rate"]) == (0.2, 0.8, 0.4)
    assert entry["threshold_fail"] is not None   # the auto-fail rule came along
    out = capsys.readouterr().out
    assert f"--target_overkill_rate {A}=0.4 (kept from the replaced operating point)" in out
    assert f"{A}: promises no less than before" in out
    replaces = read(path)["replaces"]
    # stored relative to the new file (qc_core.paths): a copied project names its own old point
    assert replaces["weaker"] == [] and resolved(replaces["path"], path.parent) == old_point


def test_a_flag_changes_a_kept_target_and_is_named(tmp_path, old_point, capsys):
    rc, path = certify(tmp_path, "new", day_predictions(0), "--replaces", str(old_point), "--confidence", "0.7")
    assert rc == 0
    assert "--confidence 0.8 -> 0.7 (changed by a flag)" in capsys.readouterr().out
    assert read(path)["replaces"]["missions"][A]["weaker_because"] == ["confidence 80% -> 70%"]


def test_a_weaker_promise_is_put_beside_the_old_one_and_decides_nothing_until_accepted(tmp_path, old_point):
    """The case from the field: certified again after a withdrawal, the escape bound rose (9.0% -> 17.4%) and nobody
    was asked. Planted: weaker_because ignoring the escape bound -> the judge decides the weaker mission unasked."""
    rc, path = certify(tmp_path, "new", day_predictions(2), "--replaces", str(old_point))
    assert rc == 0
    op = read(path)
    (why,) = op["replaces"]["missions"][A]["weaker_because"]
    assert why.startswith("escape rate of auto-passed groups at most") and op["replaces"]["weaker"] == [A]
    report = (path.parent / "report.md").read_text(encoding="utf-8")
    assert f"WEAKER PROMISE for {A}" in report and "escape_upper" in report
    point = load_operating_point(path)
    points = thresholds_for(point, path, [A], model=MODEL, adapters=[])
    settings = SimpleNamespace(accept_weaker=None, operating_point=str(path))
    unaccepted, accepted, _ = judge.unaccepted_weaker(settings, point, points, [A], {})
    assert list(unaccepted) == [A] and accepted == () and "promises less than the one it replaces" in unaccepted[A]
    record = {"group_id": "g", "mission": A, "images": ["1.jpg"], "per_image": {"图片_1": "接地线×1/已捆扎"}}
    line = verdict_file.verdict_record(record, 0.0, points[A], "通过\n理由: 图片_1 接地线已捆扎",
                                {"audit_share": 0.0, "audit_seed": 1, "unaccepted": unaccepted[A]})
    assert (line["route"], line["review_scope"]) == ("review", "mission")
    assert line["review_why"][0].startswith("weaker promise not accepted: this operating point promises less")
    signed = SimpleNamespace(accept_weaker="新摄像头需要更低阈值，王经理签字", operating_point=str(path))
    assert judge.unaccepted_weaker(signed, point, points, [A], {}) == ({}, (A,), signed.accept_weaker)
    # the owner's acceptance recorded beside the operating point (by the review app) accepts it the same way
    keys = point_keys(path, load_operating_point(path))
    recorded = acceptances.words_of(acceptances.record(path, keys, "新摄像头需要更低阈值，王经理签字",
                                                       "王经理", "2026-11-29T08:00:00+00:00"))
    found = acceptances.recorded(path, keys)
    assert judge.unaccepted_weaker(settings, point, points, [A], {}, acceptances.words_of(found)) == \
        ({}, (A,), recorded)
    assert "accepted by 王经理 at 2026-11-29T08:00:00+00:00" in recorded
    assert acceptances.recorded(path, PointKeys("point-other", "other")) is None   # another promise: nothing
    # a withdrawn mission goes to review for its withdrawal; it needs no acceptance today
    assert judge.unaccepted_weaker(settings, point, points, [A], {A: "withdrawn"}) == ({}, (), None)


def test_accepting_when_nothing_is_weaker_is_refused(tmp_path, old_point):
    """A flag kept in a script must not accept tomorrow's weaker point unseen. Without the flag, a point that replaces
    nothing sends nothing to review (the demo caught a crash here that no fast test did)."""
    point = load_operating_point(old_point)
    points = thresholds_for(point, old_point, [A], model=MODEL, adapters=[])
    plain = SimpleNamespace(accept_weaker=None, operating_point=str(old_point))
    assert judge.unaccepted_weaker(plain, point, points, [A], {}) == ({}, (), None)
    assert judge.unaccepted_weaker(plain, None, {}, [A], {}) == ({}, (), None)
    signed = SimpleNamespace(accept_weaker="accepted by the owner", operating_point=str(old_point))
    with pytest.raises(judge_settings.JudgeError, match="promises nothing weaker"):
        judge.unaccepted_weaker(signed, point, points, [A], {})


def numbers(**changes) -> dict:
    base = {"certified": True, "threshold": 0.5, "threshold_fail": 0.9, "target_miss_rate": 0.2, "confidence": 0.8,
            "miss_rate_upper": 0.15, "escape": {"upper": 0.09}, "target_overkill_rate": 0.4,
            "overkill_rate_upper": 0.1, "automation_share": 0.6}
    return numbers_of({**base, **changes}, None)


@pytest.mark.parametrize("old, new, because", [
    (numbers(), numbers(), []),
    (numbers(), numbers(threshold=0.3, escape={"upper": 0.05}), []),                 # stricter: not weaker
    (numbers(), numbers(escape={"upper": 0.174}), ["escape rate of auto-passed groups at most 9% -> 17.4%"]),
    (numbers(), numbers(target_miss_rate=0.3), ["target miss rate 20% -> 30%"]),
    (numbers(), numbers(confidence=0.7), ["confidence 80% -> 70%"]),
    (numbers(threshold_fail=None), numbers(), ["groups now auto-fail (nothing auto-failed before)"]),
    (numbers(), numbers(overkill_rate_upper=0.2), ["overkill rate of auto-failed groups at most 10% -> 20%"]),
    (numbers(), numbers(certified=False, escape={"upper": 0.5}), []),   # people decide every group: no promise
    (numbers(certified=False), numbers(escape={"upper": 0.5}), []),     # a promise where there was none
    (numbers(), numbers(validation_auto_decided=0, escape={"upper": 0.5}), []),   # a rule that automates nothing
])
def test_what_makes_a_promise_weaker(old, new, because):
    assert weaker_because(old, new) == because


def test_an_edited_replaces_section_is_refused():
    replaces = {"missions": {A: {"weaker_because": ["confidence 80% -> 70%"]}}, "weaker": []}
    with pytest.raises(ReplacementError, match="does not list them as weaker"):
        weaker_missions(replaces)
    with pytest.raises(ReplacementError, match="without saying why"):
        weaker_missions({"missions": {A: {"weaker_because": []}}, "weaker": [A]})


def test_a_replaced_point_without_targets_is_refused():
    with pytest.raises(ReplacementError, match="no target miss rate"):
        inherit_targets({"missions": {A: {"certified": False}}}, {"targets": None})


@pytest.mark.parametrize("words, says", [
    ("ok", "say in words"), ("        ", "say in words"), ("--------", "is a flag, not a reason"),
    ("--overwrite", "is a flag, not a reason"), ("the \x1b[2Jcamera changed, signed", "U\\+001B"),
    ("accepted \u202ebackwards\u202c by the owner", "U\\+202E"), ("a" * 501, "over 500"),
])
def test_words_a_person_signs_are_plain_text_of_a_stated_length(words, says):
    """--no_monitor, monitor_why=, --accept_weaker and an owner's acceptance: a terminal escape (the field case cleared
    the judge's terminal), a bidi override, 100,000 characters, or a flag given where the words go are refused before
    anything runs."""
    with pytest.raises(ValueError, match=says):
        check_words(words, "--accept_weaker", "signed")
    assert check_words("  the new camera,\n signed by 王经理  ", "--accept_weaker", "x") == \
        "the new camera, signed by 王经理"


def _weaker_point(tmp_path, old_point) -> Path:
    rc, path = certify(tmp_path, "new", day_predictions(2), "--replaces", str(old_point))
    assert rc == 0 and read(path)["replaces"]["weaker"] == [A]
    return path


@pytest.mark.parametrize("edit", [
    lambda r: {**r, "weaker": [], "missions": {m: {**e, "weaker_because": []} for m, e in r["missions"].items()}},
    lambda r: {**r, "missions": {}, "weaker": []},
])
def test_whether_a_point_is_weaker_is_worked_out_from_the_replaced_file_not_the_block(tmp_path, old_point, edit):
    """An edited `replaces` block that calls nothing weaker still waits for the owner's words: the judge compares the
    two promises itself (planted: recomputed_weaker returning the block's own list -> A decides unasked)."""
    path = _weaker_point(tmp_path, old_point)
    content = read(path)
    content["replaces"] = edit(content["replaces"])
    path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    point = load_operating_point(path)
    assert list(recomputed_weaker(path, point)) == [A]
    settings = SimpleNamespace(accept_weaker=None, operating_point=str(path))
    unaccepted, _, _ = judge.unaccepted_weaker(settings, point, thresholds_for(point, path, [A], model=MODEL,
                                                                               adapters=[]), [A], {})
    assert list(unaccepted) == [A]


@pytest.mark.parametrize("damage, says", [
    (lambda old: old.unlink(), "which does not exist"),
    (lambda old: old.write_text(json.dumps({**read(old), "confidence": 0.7}), encoding="utf-8"), "no longer the point"),
])
def test_a_replaced_point_that_is_gone_or_changed_is_refused(tmp_path, old_point, damage, says):
    path = _weaker_point(tmp_path, old_point)
    damage(old_point)
    with pytest.raises(ReplacementError, match=says):
        recomputed_weaker(path, load_operating_point(path))


def test_a_point_whose_replaces_block_was_deleted_is_refused_where_earlier_points_judged(tmp_path, old_point):
    """The days beside today's were judged with this model at another point: a point that names no point it
    replaces is refused before a model loads (the field case: the block deleted, 13 of 16 groups decided unasked).
    Planted: check_names_what_it_replaces returning at once -> no refusal."""
    from stage_b.judging.earlier_points import check_names_what_it_replaces
    path = _weaker_point(tmp_path, old_point)
    content = read(path)
    del content["replaces"]
    path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    point = load_operating_point(path)
    keys = point_keys(path, point)
    checkpoints = {"model": {"path": "m", "fingerprint": "fp-model"}, "adapters": []}
    day = tmp_path / "days" / "day1"
    day.mkdir(parents=True)
    (day / f"{A}_verdicts.jsonl").write_text(json.dumps(
        {"group_id": "g", "mission": A, "operating_point": "point-the-old-one",
         "fingerprints": {"model": "fp-model", "adapters": []}}, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(judge_settings.JudgeError, match="names no operating point it replaces"):
        check_names_what_it_replaces(path, point, keys, checkpoints, tmp_path / "days" / "day2")
    # another model's days, or days at this very point, ask nothing
    check_names_what_it_replaces(path, point, keys, {**checkpoints, "model": {"path": "m", "fingerprint": "other"}},
                                 tmp_path / "days" / "day2")
    (day / f"{A}_verdicts.jsonl").write_text(json.dumps(
        {"group_id": "g", "mission": A, "operating_point": keys.identity,
         "fingerprints": {"model": "fp-model", "adapters": []}}, ensure_ascii=False) + "\n", encoding="utf-8")
    check_names_what_it_replaces(path, point, keys, checkpoints, tmp_path / "days" / "day2")


def test_a_recertified_report_names_the_withdrawal_it_follows_and_the_labels_after_it(tmp_path, old_point):
    """The owner's "what now": the report of a re-certification says the replaced point's withdrawal, when and why,
    and how many scored groups were decided after it (planted: the withdrawals not read -> the report is silent)."""
    from stage_b.evaluate.outputs import after_withdrawals
    from stage_b.rules.withdrawals import withdrawals_path
    keys = point_keys(old_point, load_operating_point(old_point))
    line = {"mission": A, "operating_point": keys.identity, "operating_point_sha256": keys.file_sha256,
            "why": "the miss rate is above the promised 20%", "withdrawn_day": "day4",
            "withdrawn_at": "2026-11-28T10:00:00+00:00", "monitor": "m.json",
            "recorded_at": "2026-11-28T10:00:01+00:00"}
    withdrawals_path(old_point).write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    rc, path = certify(tmp_path, "after", day_predictions(0), "--replaces", str(old_point))
    assert rc == 0
    report = (path.parent / "report.md").read_text(encoding="utf-8")
    assert f"**{A}** was withdrawn at the point this one replaces on day4 (2026-11-28T10:00:00+00:00) because the " \
           f"miss rate is above the promised 20%; 0 of the groups scored here were decided by reviewers after the " \
           f"withdrawal: none, so this re-certification rests on evidence from before it" in report
    # scored groups from the labels carry when they were decided (stage_b.evaluate.held_out.with_evidence)
    scored = [{"mission": A, "evidence": {"decided_at": at}} for at in
              ("2026-11-28T12:00:00+00:00", "2026-11-28T09:00:00+00:00", None, "2026-11-29T08:00:00+00:00")]
    assert after_withdrawals({A: line}, scored)[A]["labels_after"] == 2
