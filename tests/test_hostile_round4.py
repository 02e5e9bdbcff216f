"""Hostile input, round 4 (issue 34): promises read from files are recomputed, not trusted; decisions that would
destroy a Stage-A folder or poison a labels folder are refused before anything is written; temp files have one
writer."""
from __future__ import annotations

import json
import os
import threading

import pytest

from qc_core.jsonl import write_jsonl_atomic
from stage_b.decisions import DecisionsError, import_decisions, resolve
from stage_b.operating_point import OperatingPointError, build_operating_point, load_operating_point

M = "BBU接地线检查"


def real_op(tmp_path, **edit):
    preds = ([{"group_id": f"f{i}", "mission": M, "p_fail": 0.9, "expected": "不通过"} for i in range(12)]
             + [{"group_id": f"p{i}", "mission": M, "p_fail": 0.1, "expected": "通过"} for i in range(12)])
    op = build_operating_point(preds, [M], {"default": 0.2, "per_mission": {}}, review_share=0.8,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data=None, confidence=0.8,
                               overkill_targets={"default": 0.3, "per_mission": {}})
    assert op["missions"][M]["certified"] and op["missions"][M]["overkill_certified"]
    for key, value in edit.items():
        if key in ("adapters", "data"):
            op[key] = value
        else:
            op["missions"][M][key] = value
    path = tmp_path / "op.json"
    path.write_text(json.dumps(op, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("edit, message", [
    # a forged promise: 12 defective groups where 6,905 are needed for 0.1% at 99.9%
    ({"target_miss_rate": 0.001, "confidence": 0.999, "promise": "miss rate <= 0.1% with 99.9% confidence"},
     "certified, but 0 missed of 12 defective groups bound the miss rate at"),
    ({"misses": 3}, "certified, but 3 missed of 12"),
    ({"confidence": 5}, "confidence 5 is out of range"),
    ({"confidence": 0.05}, "Did you mean 0.95"),
    ({"target_miss_rate": -1}, "target_miss_rate -1 is out of range"),
    ({"threshold_fail": 0.05}, "threshold_fail 0.05 is below threshold"),
    ({"n_fail": "12"}, "n_fail is '12', not a count"),
    ({"auto_overkills": 9}, "overkill_certified does not follow from its counts"),
    ({"adapters": ["x"]}, "`adapters` a list of objects"),
    ({"data": "text"}, "`data` must be an object"),
    ({"data": {"selection": "x"}}, "`data` must be an object whose `selection` is an object"),
])
def test_a_promise_that_its_own_counts_do_not_support_is_refused(tmp_path, edit, message):
    assert load_operating_point(real_op(tmp_path))   # as written: it loads
    with pytest.raises(OperatingPointError, match=message.replace("(", r"\(").replace("`", ".")):
        load_operating_point(real_op(tmp_path, **edit))


# --------------------------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture
def day(tmp_path, synthetic):
    from tests.helpers import audited_day
    return audited_day(tmp_path, synthetic)


def one_decision(tmp_path, day, name="d.jsonl", **edit):
    from tests.helpers import write_decision_file
    out, verdicts = day
    path = write_decision_file(tmp_path, out, verdicts[0], name=name)
    line = {**json.loads(path.read_text(encoding="utf-8")), **edit}
    for key in [k for k, v in edit.items() if v is ...]:
        del line[key]
    write_jsonl_atomic(path, [line])
    return path


def test_an_import_into_a_stage_a_folder_is_refused_and_its_files_stay(tmp_path, day):
    stage_a = tmp_path / "stage_a"
    stage_a.mkdir()
    (stage_a / f"{M}_stage_a.jsonl").write_text('{"group_id": "x"}\n' * 6, encoding="utf-8")
    before = (stage_a / f"{M}_stage_a.jsonl").read_bytes()
    with pytest.raises(DecisionsError, match="is not a labels folder this import wrote"):
        import_decisions([one_decision(tmp_path, day)], stage_a)
    assert (stage_a / f"{M}_stage_a.jsonl").read_bytes() == before and not (stage_a / "decisions.jsonl").exists()


@pytest.mark.parametrize("decided_at, message", [
    (..., "is missing"), ("", "is missing"), (None, "is missing"),
    ("2026-11-27T09:00:00", "not an ISO time with a time zone"), ("0000-01-01T00:00:00Z", "not an ISO time"),
    ("9999-01-01T00:00:00Z", "is in the future"), ("1970-01-01T00:00:00Z", "before 2000"),
])
def test_a_decision_time_that_cannot_be_ordered_is_refused_and_the_folder_stays_usable(tmp_path, day, decided_at,
                                                                                       message):
    bad = one_decision(tmp_path, day, "bad.jsonl", decided_at=decided_at)
    with pytest.raises(DecisionsError, match=f"bad.jsonl:1: decided_at.*{message}"):
        import_decisions([bad], tmp_path / "labels")
    good = one_decision(tmp_path, day, "good.jsonl")
    assert import_decisions([good], tmp_path / "labels")["added"] == 1   # nothing was poisoned
    line = json.loads((tmp_path / "labels" / "decisions.jsonl").read_text(encoding="utf-8"))
    assert line["decided_at"].endswith("+00:00")   # normalised to UTC


def test_an_export_with_nothing_decided_is_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DecisionsError, match="no decision in .*empty.jsonl: decide groups on the review page"):
        import_decisions([tmp_path / "empty.jsonl"], tmp_path / "labels")
    assert not (tmp_path / "labels").exists()


def test_a_logged_decision_without_a_reviewer_or_time_resolves_without_a_traceback():
    log = [{"group_id": "g", "mission": M, "decision": "不通过", "record": {}, "verdict": None},
           {"group_id": "g", "mission": M, "decision": "不通过", "reviewer": "b", "decided_at": "2026-11-27T09:00:00Z",
            "record": {}, "verdict": None}]
    assert resolve(log)[(M, "g")]["status"] == "fail"


# --------------------------------------------------------------------------------------------------------------
# One writer per temp file
# --------------------------------------------------------------------------------------------------------------
def test_two_writers_of_one_thumbnail_never_share_a_temp_file(tmp_path, monkeypatch):
    """Two paths to one photo (a symlinked duplicate) give one thumbnail name; two threads make it at once. Each save
    waits until both threads are saving, so the race happens every run (it failed 2 renders in 5 by chance)."""
    from PIL import Image

    from group_qc_dev.photos import jpeg
    from qc_core import thumbnails
    jpeg(tmp_path / "in" / "p.jpg", size=(640, 480), color=(10, 120, 200))
    os.symlink(tmp_path / "in" / "p.jpg", tmp_path / "in" / "twin.jpg")
    both_saving = threading.Barrier(2, timeout=10)
    temps, real_save = [], Image.Image.save

    def save(im, fp, *args, **kwargs):
        temps.append(str(fp))
        both_saving.wait()
        return real_save(im, fp, *args, **kwargs)
    monkeypatch.setattr(Image.Image, "save", save)
    results = {}
    threads = [threading.Thread(target=lambda k=k, path=path: results.__setitem__(
        k, thumbnails._make(path, tmp_path / "thumbs", thumbnails.THUMBNAIL)))
        for k, path in enumerate([tmp_path / "in" / "p.jpg", tmp_path / "in" / "twin.jpg"])]
    (tmp_path / "thumbs").mkdir()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(temps)) == 2, temps
    assert all(r.name and r.error is None for r in results.values()) and results[0].name == results[1].name
    assert not list((tmp_path / "thumbs").glob(".*.tmp")) and len(list((tmp_path / "thumbs").glob("*.jpg"))) == 1


# --------------------------------------------------------------------------------------------------------------
# Pages, plots, messages
# --------------------------------------------------------------------------------------------------------------
def test_a_malformed_filter_address_leaves_the_page_working(browser, tmp_path, synthetic):
    from tests.helpers import judged_day
    out, verdicts = judged_day(tmp_path, synthetic)
    browser.get((out / "review" / "index.html").as_uri() + "#mission=%E4%B8&outcome=fail")
    assert browser.find_element("id", "total-count").text == str(len(verdicts))   # the script ran to the end
    assert browser.find_element("id", "mission-filter").get_attribute("value") == ""   # that filter stays off
    assert browser.execute_script("return typeof window.groupQcDecisionsJsonl") == "function"


def test_a_group_without_a_source_file_has_no_decide_buttons(tmp_path):
    from stage_b.cards import JUDGE_OUTCOMES
    from review.page import render_review
    cards = [{"group_id": "ERR-1", "mission": M, "outcome": "needs_review", "facts": [], "reason": None, "reply": None,
              "error": "unreadable photo", "images": [], "summaries": []},
             {"group_id": "OK-1", "mission": M, "outcome": "needs_review", "facts": [], "reason": None, "reply": None,
              "error": None, "images": [], "summaries": [], "source": 0}]
    index = render_review(tmp_path / "p", title="t", cards=cards, outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path],
                          sources=[{"file": "/f.jsonl", "sha256": "s"}])["index"]
    html = index.read_text(encoding="utf-8")
    err, ok = html.split('data-group-id="ERR-1"')[1].split('data-group-id="OK-1"')
    assert "data-decision" not in err and "no decision here" in err and "data-decision" in ok


def test_a_reliability_diagram_of_a_thousand_missions_stays_a_page_high(tmp_path):
    from PIL import Image

    from stage_b.calibration import calibration
    from stage_b.plot_operating import MAX_PANELS, plot_reliability
    missions = [f"m{i}" for i in range(1000)]
    cal = calibration({m: [(0.9, "不通过"), (0.1, "通过")] for m in missions}, missions)
    plot_reliability(cal, tmp_path / "r.png", "t")
    with Image.open(tmp_path / "r.png") as im:
        assert im.height <= 3.2 * 100 * (MAX_PANELS // 3 + 1)


def test_metrics_beside_predictions_without_a_split_is_an_error_not_a_traceback(tmp_path):
    import subprocess
    import sys
    (tmp_path / "p").mkdir()
    write_jsonl_atomic(tmp_path / "p" / "predictions.jsonl", [
        {"group_id": "g", "mission": M, "expected": "通过", "completion": "通过\n理由: x", "p_fail": 0.1,
         "summaries": ["s"]}])
    (tmp_path / "p" / "metrics.json").write_text(json.dumps({"data": {"mode": "x"}, "checkpoints": {}}),
                                                 encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "stage_b.evaluate", "--predictions",
                             str(tmp_path / "p" / "predictions.jsonl"), "--output_dir", str(tmp_path / "o")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "has no data.split" in result.stderr and "Traceback" not in result.stderr


def test_terminal_escape_codes_in_a_reviewer_name_are_shown_not_run():
    from stage_b.decisions import printable
    assert printable("王工\x1b[31m") == "王工\\x1b[31m"


def test_a_label_keeps_only_the_stage_a_records_own_fields_and_refuses_lines_of_other_files(tmp_path):
    """A decisions file may name any JSONL with its sha256 as its source: only a Stage-A record or a verdict line
    becomes a label, and a Stage-A record gives only its own fields."""
    from qc_core.jsonl import file_sha256
    from stage_b.decisions import decision_line
    good = {"group_id": "g", "mission": M, "label": None, "images": ["a.jpg"],
            "per_image": {"图片_1": "接地线×1/已捆扎"},
            "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00", "admin": True, "input_dir": "/photos"}
    other = {"group_id": "h", "mission": M, "anything": "else"}
    src = tmp_path / "src.jsonl"
    write_jsonl_atomic(src, [good, other])
    source = {"file": str(src), "sha256": file_sha256(src)}
    write_jsonl_atomic(tmp_path / "d.jsonl", [decision_line({"group_id": "h", "mission": M}, "通过", "r", source)])
    with pytest.raises(DecisionsError, match="neither a Stage-A record nor a verdict line"):
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    write_jsonl_atomic(tmp_path / "d.jsonl", [decision_line({"group_id": "g", "mission": M}, "通过", "r", source)])
    import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    (label,) = [json.loads(x) for x in (tmp_path / "labels" / f"{M}_stage_a.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert "admin" not in label and label["label"] == "pass" and label["per_image"] == good["per_image"]


def test_a_torn_decisions_file_names_what_to_do_and_never_suggests_a_flag_the_command_lacks(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"group_id": "g", "mission": "x"}\n{"group_id": "tor', encoding="utf-8")
    with pytest.raises(DecisionsError) as err:
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    assert "d.jsonl:2" in str(err.value) and "Export the decisions from the review page again" in str(err.value)
    assert "--overwrite" not in str(err.value)


# --------------------------------------------------------------------------------------------------------------
# Photos only from the folder the command names (case 5)
# --------------------------------------------------------------------------------------------------------------
def _secret_photo(tmp_path):
    """A readable image outside anything the user named, and a Stage-A record that points at it."""
    from PIL import Image
    secret = tmp_path / "secret"
    secret.mkdir()
    Image.new("RGB", (32, 32), "red").save(secret / "private.jpg")
    record = {"group_id": "g1", "mission": M, "label": None, "images": ["private.jpg"], "input_dir": str(secret),
              "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00"}
    return secret, record


def _stage_a_review(tmp_path, record, *flags):
    import subprocess
    import sys
    (tmp_path / "sa").mkdir(exist_ok=True)
    write_jsonl_atomic(tmp_path / "sa" / f"{M}_stage_a.jsonl", [record])
    result = subprocess.run([sys.executable, "-m", "stage_a.audit", "--stage_a_dir", str(tmp_path / "sa"),
                             "--output_dir", str(tmp_path / "page"), "--mission", M, *flags],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stderr


def _judge_page(tmp_path, record, *flags):
    import contextlib
    import io

    from stage_b import judge
    from stage_b.operating_point import manual_point
    (tmp_path / "page").mkdir(exist_ok=True)
    write_jsonl_atomic(judge.verdicts_path(tmp_path / "page", M),
                       [judge.verdict_record(record, 0.9, manual_point(0.5), "不通过\n理由: 图片_1", {})])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        judge.write_review(tmp_path / "page", [M], [flags[1]] if flags else None)
    return err.getvalue()


@pytest.mark.parametrize("render", [_stage_a_review, _judge_page], ids=["stage_a.audit", "judge"])
def test_a_page_shows_photos_only_from_the_folder_its_command_names(tmp_path, render):
    """A received file whose records say input_dir "/" (here: a private folder) must not get that folder's images
    thumbnailed and linked: the page names the folder and shows nothing until the command names it."""
    secret, record = _secret_photo(tmp_path)
    stderr = render(tmp_path, record)
    page = (tmp_path / "page" / "review" / "index.html").read_text(encoding="utf-8")
    assert not list((tmp_path / "page" / "review" / "thumbs").glob("*.jpg")) and "private.jpg\"" not in page
    assert "Photos not shown" in page and str(secret) in page
    assert "photo(s) not shown" in stderr and "pass --input_dir" in stderr
    render(tmp_path, record, "--input_dir", str(secret))   # named by the command: shown
    assert len(list((tmp_path / "page" / "review" / "thumbs").glob("*.jpg"))) == 1


def test_an_evaluation_page_takes_its_photo_folder_from_the_command_only():
    from stage_b.evaluate import review_inputs
    records = [{"group_id": "g", "mission": M, "input_dir": "/"}]
    assert review_inputs(records)["input_dirs"] == [] and review_inputs(records)["named_dirs"] == ["/"]
    assert review_inputs(records, "/photos")["input_dirs"] == [__import__("pathlib").Path("/photos")]


# --------------------------------------------------------------------------------------------------------------
# Reviewers are named (case 8)
# --------------------------------------------------------------------------------------------------------------
def _one_group_source(tmp_path):
    from qc_core.jsonl import file_sha256
    record = {"group_id": "g", "mission": M, "label": None, "images": ["a.jpg"],
              "per_image": {"图片_1": "接地线×1/已捆扎"},
              "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00", "input_dir": "/photos"}
    src = tmp_path / "src.jsonl"
    write_jsonl_atomic(src, [record])
    return record, {"file": str(src), "sha256": file_sha256(src)}


@pytest.mark.parametrize("first, second, unnamed, outcome", [
    ("", "", "", "no reviewer name"),                  # two nameless exports: refused, never merged into one
    ("王工", "", "", "no reviewer name"),
    ("王工", "", "李工", "conflict"),                   # --reviewer names the unnamed file: two people, who disagree
    ("王工", "王工\x1b[2J", "", "shows nothing or moves the text"),   # control characters are not a name
    ("王工", "x" * 81, "", "over 80"),
    ("王工", "李工", "", "conflict"),
])
def test_decisions_without_a_name_are_refused_not_merged(tmp_path, first, second, unnamed, outcome):
    from stage_b.decisions import decision_line
    record, source = _one_group_source(tmp_path)
    for name, reviewer, decision, at in [("a", first, "通过", "2026-11-27T09:00:00+00:00"),
                                         ("b", second, "不通过", "2026-11-27T10:00:00+00:00")]:
        write_jsonl_atomic(tmp_path / f"{name}.jsonl", [decision_line(record, decision, reviewer, source,
                                                                      decided_at=at)])
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    if outcome == "conflict":
        result = import_decisions(files, tmp_path / "labels", unnamed=unnamed)
        assert result["groups"][(M, "g")]["status"] == "conflict"
        return
    with pytest.raises(DecisionsError, match=outcome) as err:
        import_decisions(files, tmp_path / "labels", unnamed=unnamed)
    assert "b.jsonl:1" in str(err.value) and not (tmp_path / "labels").exists()
    assert "\x1b" not in str(err.value)


# --------------------------------------------------------------------------------------------------------------
# Numbers that hang on noise (case 11)
# --------------------------------------------------------------------------------------------------------------
def test_the_same_summaries_scored_twice_give_the_same_promise_and_the_same_verdicts():
    """Two evaluations of the same summaries differ by ~1e-8 (float32, another batch). The issue's case: a defective
    group at p_fail 0.0280751986 one time and 0.0280752246 the next turned "0 missed of 12" into "1 missed of 22".
    Ties are one value and no threshold lies within the tie tolerance of a validation p_fail, so the promise, the
    thresholds' sides and every verdict are the same both times."""
    import random

    from stage_b.operating_point import P_FAIL_TIE, MissionPoint, mission_point
    rng = random.Random(7)
    F, P = "不通过", "通过"
    first = ([(0.0280751986, F)] + [(rng.uniform(0.03, 1.0), F) for _ in range(30)]
             + [(0.0280752246, P)] + [(rng.uniform(0.0, 0.03), P) for _ in range(40)])
    for trial in range(200):
        noise = random.Random(trial)
        second = [(min(1.0, max(0.0, p + noise.uniform(-3e-8, 3e-8))), e) for p, e in first]
        a, b = (mission_point(points, 0.1, 0.8, 0.8, target_overkill=0.2) for points in (first, second))
        for key in ("certified", "overkill_certified", "misses", "n_fail", "auto_overkills", "promise"):
            assert a[key] == b[key], (trial, key, a[key], b[key])
        for entry, points in ((a, first), (b, second)):
            assert min(abs(p - entry["threshold"]) for p, _ in points) >= P_FAIL_TIE - 1e-15
        point = MissionPoint.of(a)
        for (p, _), (q, _) in zip(first, second):   # a group scored once more is decided as before
            assert point.decide(q).verdict == point.decide(p).verdict
            assert point.decide(q).automatic == point.decide(p).automatic


def _two_missions(split: str):
    """Mission M certified (12 defective groups, none missed); mission N with 10 defective groups 1.4e-4 apart, held
    to 5% (32 needed: not certified)."""
    preds = ([{"group_id": f"f{i}", "mission": M, "p_fail": 0.9 + i / 1000, "expected": "不通过"} for i in range(12)]
             + [{"group_id": f"p{i}", "mission": M, "p_fail": 0.1, "expected": "通过"} for i in range(12)]
             + [{"group_id": f"g{i}", "mission": N, "p_fail": 0.98213 + i * 1.4e-4, "expected": "不通过"}
                for i in range(10)]
             + [{"group_id": f"h{i}", "mission": N, "p_fail": 0.2, "expected": "通过"} for i in range(3)])
    op = build_operating_point(preds, [M, N], {"default": 0.2, "per_mission": {N: 0.05}}, review_share=0.8,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data={"split": split},
                               confidence=0.8)
    return preds, op


N = "挡风板安装检查"


@pytest.mark.parametrize("split, groups", [("val", "defective validation groups"),
                                           ("held_out", "defective held-out (validation and reviewed work orders) "
                                                        "groups")])
def test_every_printed_figure_says_what_it_measures(split, groups):
    """Issue 34 case 11: a re-certified promise named "validation groups" though it counted reviewed work orders; the
    pooled row said "certified: yes" with 1 of 2 missions certified; two thresholds 1.4e-4 apart both printed as
    0.982; the verdict line's rates sat beside the promises without saying they measure something else."""
    from stage_b.evaluate import operating_curves, render_operating, render_promises
    from stage_b.evaluate.report import curve_picks
    preds, op = _two_missions(split)
    assert groups in op["missions"][M]["promise"] and op["missions"][M]["certified"]
    metrics = {"operating_curve": operating_curves(preds, [M, N]), "operating_point": op, "data": {"split": split}}
    text = "\n".join(render_operating(metrics, curve_picks(metrics["operating_curve"])) + render_promises(metrics))
    assert "pooled bound only: yes; missions certified on their own: 1 of 2" in text
    assert f"Decided without review on these {op['evidence']} groups" in text
    row = next(line for line in text.splitlines() if line.startswith(f"| {N} | t="))
    shown = [cell.split(":")[0] for cell in row.split(" | ")[1:]]
    assert len(set(shown)) >= 2 and "t=0.982:" not in row, row   # 0.98213 and 0.98227 never print alike
    assert "miss rate at the threshold (upper)" in text


def test_two_thresholds_apart_never_print_alike():
    from stage_b.numbers import fmt_distinct
    assert fmt_distinct([0.98213, 0.98227]) == ["0.9821", "0.9823"]   # as many figures as it takes, no more
    assert fmt_distinct([0.5, 0.5, None]) == ["0.5", "0.5", "n/a"]
