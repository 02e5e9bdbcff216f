"""Evaluation does not bend its input (issue 26): every prediction row checked (types, a known mission with its
aliases folded in, duplicates, p_fail a real probability), a malformed metrics.json beside the predictions named,
and a set of outputs written all or nothing."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from stage_b import evaluate
from stage_b.evaluate import EvaluationError, predictions_from_rows, read_predictions

M = "BBU线缆布放要求"
ROWS = [{"group_id": f"g{k}", "mission": M, "solution": "不通过" if k % 2 else "通过",
         "summaries": ["光纤×2/已套保护管"]} for k in range(4)]


def _file(tmp_path: Path, edit=None) -> Path:
    preds = predictions_from_rows(ROWS, ["通过\n理由: 图片_1 正常"] * 4, p_fails=[0.1, 0.6, 0.3, 0.8])
    if edit:
        preds = edit(preds)
    path = tmp_path / "p" / "predictions.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in preds), encoding="utf-8")
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda ps: [{**ps[0], "mission": "屋顶检查"}] + ps[1:], "屋顶检查"),                        # no such mission
    (lambda ps: ps + [{**ps[0], "mission": "BBU线缆布放"}], "already at line 1"),                 # its alias: one group
    (lambda ps: [{**ps[0], "p_fail": True}] + ps[1:], "p_fail True is not a number"),
    (lambda ps: [{**ps[0], "p_fail": "0.4"}] + ps[1:], "p_fail '0.4' is not a number"),
    (lambda ps: [{**ps[0], "p_fail": 1.5}] + ps[1:], "out of range"),
    (lambda ps: [{**ps[0], "completion": ["通过"]}] + ps[1:], "completion must be the model's reply as text"),
    (lambda ps: [{**ps[0], "completion": None}] + ps[1:], "completion must be the model's reply as text"),
    (lambda ps: [{**ps[0], "summaries": "光纤"}] + ps[1:], "summaries must be a list of texts"),
    (lambda ps: [{**ps[0], "group_id": 7}] + ps[1:], "group_id must be a non-empty string"),
])
def test_a_bad_prediction_row_is_refused_naming_the_line(tmp_path, edit, message):
    path = _file(tmp_path, edit)
    with pytest.raises(EvaluationError, match="predictions.jsonl:") as err:
        read_predictions(path)
    assert message in str(err.value)


def test_an_alias_is_read_as_its_mission(tmp_path):
    path = _file(tmp_path, lambda ps: [{**p, "mission": "BBU线缆布放"} for p in ps])
    assert {p["mission"] for p in read_predictions(path)} == {M}


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"data": "x"})])
def test_a_malformed_metrics_json_beside_the_predictions_is_named(tmp_path, capsys, content):
    path = _file(tmp_path)
    (path.parent / "metrics.json").write_text(content, encoding="utf-8")
    assert evaluate.main(["--predictions", str(path), "--output_dir", str(tmp_path / "out"), "--no_review"]) == 2
    err = capsys.readouterr().err
    assert str(path.parent / "metrics.json") in err and "--model" in err and "Traceback" not in err


def test_a_full_disk_leaves_the_earlier_outputs_whole_and_names_the_file(tmp_path, capsys, monkeypatch):
    path = _file(tmp_path)
    out = tmp_path / "out"
    assert evaluate.main(["--predictions", str(path), "--output_dir", str(out), "--no_review"]) == 0
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "report.md":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", full)
    path.write_text(path.read_text(encoding="utf-8").replace("图片_1 正常", "图片_1 依据"), encoding="utf-8")
    assert evaluate.main(["--predictions", str(path), "--output_dir", str(out), "--no_review", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert f"could not write {out / 'report.md'}" in err and "nothing of this evaluation was written" in err
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before   # the earlier set, whole; no staging left


def test_report_md_writes_data_as_text_never_markup(tmp_path):
    """A group id, reason or summary holding markup is written escaped: a Markdown viewer that renders HTML runs
    nothing, and a `|` does not break the tables."""
    evil = '<img src=x onerror=alert(1)>|'
    path = _file(tmp_path, lambda ps: [{**ps[1], "group_id": evil, "completion": "通过\n理由: <script>x</script>",
                                         "summaries": ["<b>光纤</b>"]}] + ps[2:])
    out = tmp_path / "out"
    assert evaluate.main(["--predictions", str(path), "--output_dir", str(out), "--no_review"]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "<img" not in report and "<script>" not in report and "<b>" not in report
    assert "&lt;img src=x onerror=alert(1)&gt;\\|" in report and "&lt;script&gt;x&lt;/script&gt;" in report
