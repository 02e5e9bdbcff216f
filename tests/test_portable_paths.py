"""A project that still works when moved or copied (qc_core.paths): a run record stores its paths relative to the run
folder, so a copied project's run reads the copy's data and names the copy's checkpoint; old records with absolute
paths still read; `group-qc run-record best` prints the best checkpoint, resolved, or says it is gone."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.paths import resolved, stored
from stage_b.train.run_record import RUN_FILE, best_checkpoint, read_run_record, run_selection, stage_a_changes
from tests.helpers import REPO, overlap_ids, trained_run


@pytest.mark.parametrize("path, base, kept", [
    ("/p/out/run/checkpoint-5", "/p/out/run", "checkpoint-5"),
    ("/p/data/stage_a", "/p/out/run", "../../data/stage_a"),
    ("/p/data/*_stage_a.jsonl", "/p/out/run", "../../data/*_stage_a.jsonl"),   # a glob stays a glob
    ("/p/out/run", "/p/out/run", "."),
])
def test_a_path_is_stored_relative_to_the_file_that_names_it(path, base, kept):
    assert stored(path, base) == kept
    assert resolved(kept, base) == Path(path)
    assert resolved(kept, "/elsewhere/out/run") == Path(path.replace("/p", "/elsewhere"))   # moved whole
    assert resolved(path, "/elsewhere") == Path(path)   # an absolute path from an older file reads as it is


def _run_with_best(tmp_path: Path) -> Path:
    adapter = trained_run(tmp_path / "project", overlap_ids(8))
    run = adapter.parent
    record = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    record["validation"] = {"best_checkpoint": stored(adapter, run)}   # as the trainer callback writes it
    (run / RUN_FILE).write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    return run


def test_a_copied_project_reads_its_own_run(tmp_path):
    """The field report: in a copied project the docs' best_checkpoint one-liner pointed at the original clone.
    Planted: build_run_record storing absolute paths -> the copy's selection names the original's Stage-A folder."""
    run = _run_with_best(tmp_path)
    shutil.copytree(tmp_path / "project", tmp_path / "copy", symlinks=True)
    shutil.rmtree(tmp_path / "project")   # the original is gone: nothing may lead there
    copy_run = tmp_path / "copy" / run.relative_to(tmp_path / "project")
    record = read_run_record(copy_run / RUN_FILE)
    selection = run_selection(record, copy_run / RUN_FILE)
    assert Path(selection.stage_a_dir) == tmp_path / "copy" / "sa"
    assert best_checkpoint(record, copy_run / RUN_FILE) == copy_run / "checkpoint-2"
    files = sorted((tmp_path / "copy" / "sa").glob("*.jsonl"))
    assert stage_a_changes(record, files, copy_run / RUN_FILE) == []   # the same content, found in the copy
    assert record["written_in"] == str(run)   # where it was written: a note for a person
    result = subprocess.run([sys.executable, "-m", "group_qc", "run-record", "best", str(tmp_path / "copy" / "run")],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == str(copy_run / "checkpoint-2"), result.stderr


def test_a_run_record_from_before_the_rule_still_reads(tmp_path):
    run = _run_with_best(tmp_path)
    record = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
    record["selection"]["stage_a_dir"] = str(tmp_path / "project" / "sa")   # absolute, as older runs wrote it
    record["validation"]["best_checkpoint"] = str(run / "checkpoint-2")
    assert Path(run_selection(record, run / RUN_FILE).stage_a_dir) == tmp_path / "project" / "sa"
    assert best_checkpoint(record, run / RUN_FILE) == run / "checkpoint-2"


@pytest.mark.parametrize("damage, message", [
    ("no run", "no group_qc_run.json in"),
    ("checkpoint gone", "does not exist (moved or deleted?)"),
    ("no best yet", "names no best checkpoint yet"),
])
def test_the_best_checkpoint_command_says_what_is_missing(tmp_path, damage, message):
    run = _run_with_best(tmp_path)
    target = run
    if damage == "no run":
        target = tmp_path / "empty"
        target.mkdir()
    elif damage == "checkpoint gone":
        shutil.rmtree(run / "checkpoint-2")
    else:
        record = json.loads((run / RUN_FILE).read_text(encoding="utf-8"))
        record["validation"] = {}
        (run / RUN_FILE).write_text(json.dumps(record), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "group_qc", "run-record", "best", str(target)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_label_records_name_their_photo_folder_relative_and_a_copy_reads_its_own(tmp_path, synthetic):
    """A label record's input_dir (the folder its photos were reviewed from) is stored relative to the labels folder:
    the copied project's training rows and gold photos come from the copy. Planted: the import writing the absolute
    folder -> the copy's records name the original (deleted) folder."""
    from qc_core.missions import load_registry
    from stage_b.data.dataset import load_records
    from stage_b.labels.decisions import import_decisions
    from stage_b.labels.gold import load_gold, photo_problem
    from stage_b.data.settings import Selection
    from tests.helpers import judged_day, write_decision_file
    project = tmp_path / "project"
    project.mkdir()
    out, verdicts = judged_day(project, synthetic)
    import_decisions([write_decision_file(project, out, verdicts[0])], project / "labels")
    (label_file,) = (project / "labels").glob("*_stage_a.jsonl")
    assert json.loads(label_file.read_text(encoding="utf-8").splitlines()[0])["input_dir"] == "../photos"
    shutil.copytree(project, tmp_path / "copy")
    shutil.rmtree(project)
    (record,) = load_records(Selection(stage_a_dir=str(tmp_path / "copy" / "labels")))
    assert record["input_dir"] == str(tmp_path / "copy" / "photos")
    gold = load_gold([tmp_path / "copy" / "labels" / label_file.name], load_registry())
    (rec,) = [r for records in gold.values() for r in records]
    assert rec["input_dir"] == str(tmp_path / "copy" / "photos") and photo_problem(rec) is None


def test_an_operating_point_and_its_metrics_name_their_files_relative(tmp_path):
    """metrics.json and operating_point.json store the checkpoints' and the replaced point's paths relative to their
    folder; re-scoring a copied evaluation reads them back in the copy. Planted: _rescore_provenance without
    read_back -> the copy's re-scored operating point names a path relative to the wrong folder."""
    from stage_b import evaluate
    from tests.test_replacement import TARGETS, day_predictions
    project = tmp_path / "project"
    (project / "model").mkdir(parents=True)
    model = {"path": str(project / "model"), "fingerprint": "f" * 32}
    source = project / "eval"
    source.mkdir()
    (source / "predictions.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n"
                                                      for p in day_predictions(0)), encoding="utf-8")
    (source / "metrics.json").write_text(json.dumps({"checkpoints": {"model": model, "adapters": []}}))
    assert evaluate.main(["--predictions", str(source / "predictions.jsonl"), "--output_dir", str(project / "op"),
                          "--no_review", *TARGETS]) == 0
    op = json.loads((project / "op" / "operating_point.json").read_text(encoding="utf-8"))
    assert op["model"]["path"] == "../model" and op["written_in"] == str(project / "op")
    shutil.copytree(project, tmp_path / "copy")
    shutil.rmtree(project)
    copy = tmp_path / "copy"
    assert evaluate.main(["--predictions", str(copy / "op" / "predictions.jsonl"),
                          "--output_dir", str(copy / "later" / "op2"),
                          "--no_review", "--replaces", str(copy / "op" / "operating_point.json")]) == 0
    op2 = json.loads((copy / "later" / "op2" / "operating_point.json").read_text(encoding="utf-8"))
    assert resolved(op2["model"]["path"], copy / "later" / "op2") == copy / "model"
    assert resolved(op2["replaces"]["path"], copy / "later" / "op2") == copy / "op" / "operating_point.json"


@pytest.mark.usefixtures("no_group_qc_environment")
def test_a_verdict_line_names_its_photo_folder_relative_and_an_import_in_a_copy_reads_the_copys(tmp_path, engine,
                                                                                                 model):
    """The field case: verdict lines stored input_dir absolute, so labels imported in a copied project pointed at the
    original's photos. The judge stores it relative to the verdict file; the import resolves it where the file is
    now (planted: the judge writing it as the record had it -> the copy's label names the original's folder)."""
    from qc_core.jsonl import file_sha256, record_digest, write_jsonl_atomic
    from stage_b.judging import judge, verdict_file
    from stage_b.labels.decision_lines import decision_line
    from stage_b.labels.decisions import import_decisions
    from tests.helpers import write_stage_a_groups
    project = tmp_path / "project"
    stage_a = write_stage_a_groups(project / "stage_a", {"BBU接地线检查": [("QC-PP-1", None)]})
    records = [json.loads(x) for x in (next(stage_a.glob("*.jsonl"))).read_text(encoding="utf-8").splitlines()]
    (project / "photos").mkdir()
    write_jsonl_atomic(next(stage_a.glob("*.jsonl")), [{**r, "input_dir": str(project / "photos")} for r in records])
    engine.P_FAIL[("BBU接地线检查", "QC-PP-1")] = 0.9
    day = project / "days" / "d1"
    assert judge.main(["--model", str(model), "--stage_a_dir", str(stage_a), "--threshold", "0.5", "--no_review",
                       "--output_dir", str(day)]) == 0
    path = verdict_file.verdicts_path(day, "BBU接地线检查")
    (line,) = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert line["input_dir"] == "../../photos"
    # the checkpoints too: relative to the verdict file, the same checkpoint read from where the file is
    assert not Path(line["model"]).is_absolute() and (day / line["model"]).resolve() == Path(model).resolve()
    shutil.copytree(project, tmp_path / "copy")
    shutil.rmtree(project)
    copied = verdict_file.verdicts_path(tmp_path / "copy" / "days" / "d1", "BBU接地线检查")
    export = tmp_path / "export.jsonl"
    write_jsonl_atomic(export, [decision_line(line, "不通过", "王工", {"file": str(copied),
                                                                     "sha256": file_sha256(copied)},
                                              seen=record_digest(line))])
    import_decisions([export], tmp_path / "copy" / "labels")
    (label,) = [json.loads(x) for x in next((tmp_path / "copy" / "labels").glob("*_stage_a.jsonl")).read_text(
        encoding="utf-8").splitlines()]
    assert resolved(label["input_dir"], tmp_path / "copy" / "labels") == tmp_path / "copy" / "photos"


@pytest.mark.parametrize("images", [["../../../../etc/x.jpg"], ["/etc/x.jpg"], ["a/../../x.jpg"]])
def test_a_label_never_names_a_photo_outside_its_folder(tmp_path, images):
    """A decision whose source is any JSONL with a photo path that climbs out (../, absolute) is refused: a label would
    name any file on the machine (planted: source_record_problem without the check -> imported)."""
    from qc_core.jsonl import file_sha256, write_jsonl_atomic
    from stage_b.labels.decision_lines import DecisionsError, decision_line
    from stage_b.labels.decisions import import_decisions
    source = tmp_path / "any.jsonl"
    write_jsonl_atomic(source, [{"group_id": "g1", "mission": "BBU接地线检查", "images": images, "label": None,
                                 "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/m"}])
    export = tmp_path / "export.jsonl"
    write_jsonl_atomic(export, [decision_line({"group_id": "g1", "mission": "BBU接地线检查"}, "通过", "王工",
                                              {"file": str(source), "sha256": file_sha256(source)})])
    with pytest.raises(DecisionsError, match="climbs out of its photo folder"):
        import_decisions([export], tmp_path / "labels")


class _SaysFine:
    """An engine that summarizes every photo the same way (the runner's `summarize` contract)."""

    def summarize(self, requests):
        from types import SimpleNamespace
        return [SimpleNamespace(error=None, finish_reason="stop", text="接地线连接牢固") for _ in requests]


def test_a_stage_a_record_names_its_photo_folder_relative_and_a_moved_project_reads_its_own(tmp_path):
    """Stage-A records store input_dir relative to the file that holds them (qc_core.paths), so a project moved whole
    loads its records with its own photo folder, never the old place (planted: the absolute folder stored)."""
    from group_qc_dev.photos import jpeg
    from stage_a.runner import StageAOptions, run_stage_a
    from stage_b.data.dataset import load_records
    from stage_b.data.settings import Selection
    from tests.helpers import M
    project = tmp_path / "project"
    for g in ("g1", "g2"):
        jpeg(project / "photos" / M / "审核通过" / g / "1.jpg")
    (project / "model").mkdir()
    (project / "model" / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    run_stage_a(StageAOptions(input_dir=str(project / "photos"), output_dir=str(project / "stage_a"),
                              model=str(project / "model"), mission=M, progress=False), engine=_SaysFine())
    (line,) = {json.loads(x)["input_dir"] for x in (project / "stage_a" / f"{M}_stage_a.jsonl").read_text(
        encoding="utf-8").splitlines()}
    assert line == "../photos"
    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    shutil.move(str(project), str(moved))
    records = load_records(Selection(stage_a_dir=str(moved / "stage_a"), missions=M))
    assert {r["input_dir"] for r in records} == {str(moved / "photos")}
    assert all((Path(r["input_dir"]) / r["images"][0]).is_file() for r in records)
