"""Stage-A end to end on tiny random-weight Qwen2.5-VL / Qwen3-VL checkpoints through ms-swift's real
TransformersEngine: output contract, batching, bad photos, resume, locks, shards (kills and signals:
tests/test_stage_a_faults.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.checkpoints import resolve_model
from stage_a.engine import SwiftSummaryEngine
from qc_core.jsonl import iter_jsonl, output_lock
from qc_core.records import validate_record
from stage_a.runner import StageAOptions, run_stage_a
from group_qc_dev.photos import broken, jpeg

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(114)]
REPO = Path(__file__).resolve().parent.parent
M = "BBU接地线检查"
SMALL = dict(max_new_tokens=8, max_pixels=12_544, progress=False)


@pytest.fixture(scope="module")
def engine25(tiny_qwen2_5_vl):
    return SwiftSummaryEngine(resolve_model(str(tiny_qwen2_5_vl)), batch_size=64, max_pixels=SMALL["max_pixels"],
                              max_new_tokens=SMALL["max_new_tokens"])


@pytest.fixture(scope="module")
def photos(tmp_path_factory, synthetic):
    root = tmp_path_factory.mktemp("photos")
    synthetic.generate(root, seed=3, groups_per_label=2, missions=M)
    return root


def records(path: Path) -> list[dict]:
    return [obj for _, obj in iter_jsonl(path, allow_torn_tail=False)]


def opts(photos, out, model, **kw) -> StageAOptions:
    return StageAOptions(input_dir=str(photos), output_dir=str(out), model=str(model), mission=M,
                         **{**SMALL, **kw})


def cli(*args, timeout=300, **popen):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "group_qc", "stage-a", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, **popen)


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_cli_end_to_end_writes_the_contract_for_both_architectures(arch, tiny_model_factory, photos, tmp_path):
    model = tiny_model_factory(arch)
    result = cli("--input_dir", str(photos), "--output_dir", str(tmp_path), "--model", str(model),
                 "--mission", "BBU接地线检查", "--batch_size", "4", "--max_new_tokens", "8", "--max_pixels", "12544")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "photo/s" in result.stderr  # tqdm progress in photos per second
    out = tmp_path / f"{M}_stage_a.jsonl"
    text = out.read_text(encoding="utf-8")
    assert "\\u" not in text.replace("\\\\", "") and M in text
    recs = records(out)
    truth = [json.loads(line) for line in (photos / "ground_truth.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["group_id"] for r in recs) == sorted({t["group_id"] for t in truth})
    for rec in recs:
        validate_record(rec, known_missions=[M])
        assert rec["model"] == str(model)
        assert all((photos / p).is_file() for p in rec["images"])
        assert rec["label"] == ("fail" if "审核不通过" in rec["images"][0] else "pass")


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_batched_summaries_equal_unbatched(arch, tiny_model_factory, photos, tmp_path):
    model = tiny_model_factory(arch)
    engine = SwiftSummaryEngine(resolve_model(str(model)), batch_size=64, max_pixels=SMALL["max_pixels"],
                                max_new_tokens=12, pre_encode=True)  # the GPU default, on both architectures
    summaries = {}
    for batch_size in (1, 8):
        out = tmp_path / f"b{batch_size}"
        run_stage_a(opts(photos, out, model, batch_size=batch_size, max_new_tokens=12), engine=engine)
        summaries[batch_size] = {r["group_id"]: r["per_image"] for r in records(out / f"{M}_stage_a.jsonl")}
    assert summaries[1] == summaries[8]
    assert len({s for per in summaries[1].values() for s in per.values()}) > 1  # not one constant string


def test_parallel_and_serial_photo_preparation_give_the_same_file(tiny_qwen2_5_vl, photos, engine25, tmp_path,
                                                                    monkeypatch):
    """Photos are decoded and encoded on several threads at once; groups are still written once each, in
    discovery order, with the same summaries as with one preparation thread."""
    import stage_a.runner as runner
    from stage_a.discovery import discover_mission, mission_folders
    from qc_core.missions import load_registry

    files = {}
    for workers in (4, 1):
        monkeypatch.setattr(runner, "PREPARATION_THREADS", workers)
        out = tmp_path / str(workers)
        run_stage_a(opts(photos, out, tiny_qwen2_5_vl, batch_size=3), engine=engine25)
        files[workers] = [(r["group_id"], r["per_image"]) for r in records(out / f"{M}_stage_a.jsonl")]
    registry = load_registry()
    mission = registry.resolve(M)
    folders = mission_folders(photos, registry, [mission], strict_unknown=True)[mission.name]
    discovered = [g.group_id for g in discover_mission(photos, mission, folders, registry)[0]]
    assert [gid for gid, _ in files[4]] == discovered
    assert files[4] == files[1]


def test_on_a_cpu_ms_swift_encodes_inside_infer_by_default(engine25):
    """Encoding beside a CPU model competes with its threads (measured 5% slower), so it is off there."""
    assert engine25.model_device() == "cpu" and not engine25.pre_encodes


def test_photos_encoded_ahead_never_reach_ms_swifts_own_encode_and_give_the_same_file(
        tiny_qwen2_5_vl, photos, engine25, tmp_path, monkeypatch):
    """With pre-encoding (the default on a GPU) the template runs on the preparation threads and ms-swift's
    own batch encode is never called; the file equals the one made with ms-swift encoding inside infer.
    Catches the hook going dead (e.g. an ms-swift upgrade renaming `_batch_encode`)."""
    calls = []
    inner = engine25._engine_batch_encode
    monkeypatch.setattr(engine25, "_engine_batch_encode",
                        lambda reqs, strict: calls.append(len(reqs)) or inner(reqs, strict))
    files = {}
    for ahead in (True, False):
        monkeypatch.setattr(engine25, "pre_encodes", ahead)
        calls.clear()
        run_stage_a(opts(photos, tmp_path / str(ahead), tiny_qwen2_5_vl, batch_size=4), engine=engine25)
        lines = (tmp_path / str(ahead) / f"{M}_stage_a.jsonl").read_text().splitlines()
        files[ahead] = ([{k: v for k, v in json.loads(line).items() if k != "created_at"} for line in lines],
                        sum(calls))
    assert files[True][1] == 0 and files[False][1] == sum(1 for _ in photos.rglob("*.jpg"))
    assert files[True][0] == files[False][0] and len(files[True][0]) > 0


def test_preparation_threads_leave_torch_threads_of_later_threads_alone(tiny_qwen2_5_vl, photos, engine25,
                                                                          tmp_path, monkeypatch):
    """Preparation threads run torch single-threaded; that must not leak into threads that start torch
    work after the run (torch.set_num_threads also sets the count new threads begin with)."""
    import threading

    import torch
    # 2, not the suite's 1 (make test runs OMP_NUM_THREADS=1): a leaked 1 must be able to show
    expected, before = 2, torch.get_num_threads()
    torch.set_num_threads(expected)
    monkeypatch.setattr(engine25, "torch_threads", expected)   # the count the engine was built with
    monkeypatch.setattr(engine25, "pre_encodes", True)  # torch runs on the preparation threads
    try:
        run_stage_a(opts(photos, tmp_path / "out", tiny_qwen2_5_vl, batch_size=4), engine=engine25)
        seen = []
        worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        worker.start()
        worker.join()
        assert torch.get_num_threads() == expected and seen == [expected]
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("ahead", [True, False], ids=["encoded-ahead", "encoded-in-engine"])
@pytest.mark.parametrize("batch_size", [8, 1], ids=["in-a-batch", "alone-in-its-batch"])
def test_a_photo_the_template_refuses_fails_its_group_only(ahead, batch_size, tiny_qwen2_5_vl, engine25, tmp_path,
                                                           monkeypatch):
    """A photo PIL reads but Qwen-VL cannot take (aspect ratio over 200) fails its own group at the
    summary stage, named; the other groups are written, whether it shares its batch or is alone in it (alone, it
    used to end the run with exit 2, the photo unnamed, no group written)."""
    monkeypatch.setattr(engine25, "pre_encodes", ahead)
    root = tmp_path / "in"
    jpeg(root / M / "审核通过" / "g1" / "1.jpg")
    jpeg(root / M / "审核通过" / "g2" / "1.jpg")
    jpeg(root / M / "审核通过" / "g2" / "细长.jpg", size=(2400, 10))
    jpeg(root / M / "审核通过" / "g3" / "1.jpg")
    run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl, batch_size=batch_size), engine=engine25)
    assert [r["group_id"] for r in records(tmp_path / "out" / f"{M}_stage_a.jsonl")] == ["g1", "g3"]
    (err,) = records(tmp_path / "out" / f"{M}_stage_a.errors.jsonl")
    assert err["group_id"] == "g2" and err["stage"] == "summary"
    assert f"{M}/审核通过/g2/细长.jpg" in err["error"] and "aspect ratio" in err["error"]


def test_bad_photos_fail_their_group_only_and_name_the_file(tiny_qwen2_5_vl, engine25, tmp_path):
    root = tmp_path / "in"
    base = root / M / "审核通过"
    jpeg(base / "QC-AB-20250101-1" / "QC-AB-20250101-1_1.jpg")
    broken(base / "QC-AB-20250101-2" / "2.jpg", "zero")
    jpeg(base / "QC-AB-20250101-2" / "1.jpg")
    broken(base / "QC-AB-20250101-3" / "照片.jpeg", "text")
    broken(base / "QC-AB-20250101-4" / "1.jpg", "truncated")
    for k in range(1, 41):  # a group of 40 photos, natural order, one EXIF-rotated
        jpeg(root / M / "审核不通过" / "大组" / f"{k}.jpg", size=(48, 32), exif_orientation=6 if k == 7 else None)
    jpeg(root / M / "审核不通过" / "单张组" / "只有一张.jpg")
    report = run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl, batch_size=8), engine=engine25)
    good = records(tmp_path / "out" / f"{M}_stage_a.jsonl")
    bad = records(tmp_path / "out" / f"{M}_stage_a.errors.jsonl")
    assert sorted(r["group_id"] for r in good) == ["QC-AB-20250101-1", "单张组", "大组"]
    big = next(r for r in good if r["group_id"] == "大组")
    assert list(big["per_image"]) == [f"图片_{k}" for k in range(1, 41)]
    assert [Path(p).name for p in big["images"]] == [f"{k}.jpg" for k in range(1, 41)]
    errors = {r["group_id"]: r for r in bad}
    assert set(errors) == {"QC-AB-20250101-2", "QC-AB-20250101-3", "QC-AB-20250101-4"}
    assert ("QC-AB-20250101-2/2.jpg" in errors["QC-AB-20250101-2"]["error"]
            and "zero-byte" in errors["QC-AB-20250101-2"]["error"])
    assert "照片.jpeg" in errors["QC-AB-20250101-3"]["error"] and "not an image" in errors["QC-AB-20250101-3"]["error"]
    assert "truncated" in errors["QC-AB-20250101-4"]["error"]
    assert all(r["stage"] == "image" for r in bad)
    assert report.written[M] == 3 and report.failed[M] == 3


class EmptyForOnePhoto:
    """Wraps the real engine; returns an empty summary for photos of one group (validation path)."""

    def __init__(self, engine, bad_size):
        self.engine, self.bad_size = engine, bad_size

    def summarize(self, requests):
        out = self.engine.summarize(requests)
        for (_, image), summary in zip(requests, out):
            if image.size == self.bad_size:
                summary.text = "  \n "
        return out


def test_invalid_summary_sends_the_group_to_errors_naming_photo_and_key(tiny_qwen2_5_vl, engine25, tmp_path):
    root = tmp_path / "in"
    jpeg(root / M / "审核通过" / "g1" / "1.jpg", size=(64, 48))
    jpeg(root / M / "审核通过" / "g1" / "2.jpg", size=(33, 33))
    jpeg(root / M / "审核通过" / "g2" / "1.jpg", size=(64, 48))
    run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl, batch_size=2),
                engine=EmptyForOnePhoto(engine25, (33, 33)))
    assert [r["group_id"] for r in records(tmp_path / "out" / f"{M}_stage_a.jsonl")] == ["g2"]
    (err,) = records(tmp_path / "out" / f"{M}_stage_a.errors.jsonl")
    assert err["group_id"] == "g1" and err["stage"] == "summary"
    assert f"{M}/审核通过/g1/2.jpg (图片_2)" in err["error"] and "empty summary" in err["error"]


def test_resume_skips_done_and_failed_groups_without_loading_the_model(tiny_qwen2_5_vl, photos, engine25, tmp_path):
    out = tmp_path / "out"
    first = run_stage_a(opts(photos, out, tiny_qwen2_5_vl, batch_size=4), engine=engine25)
    before = (out / f"{M}_stage_a.jsonl").read_bytes()
    second = run_stage_a(opts(photos, out, tiny_qwen2_5_vl, batch_size=4))  # no engine given
    assert not second.model_loaded and second.written.get(M, 0) == 0
    assert second.skipped[M] == first.written[M]
    assert (out / f"{M}_stage_a.jsonl").read_bytes() == before
    third = run_stage_a(opts(photos, out, tiny_qwen2_5_vl, batch_size=4, overwrite=True), engine=engine25)
    assert third.written[M] == first.written[M] and len(records(out / f"{M}_stage_a.jsonl")) == first.written[M]


def test_retry_errors_retries_a_fixed_photo(tiny_qwen2_5_vl, engine25, tmp_path):
    root = tmp_path / "in"
    bad = broken(root / M / "审核通过" / "g1" / "1.jpg", "zero")
    run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl), engine=engine25)
    jpeg(bad)
    again = run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl))
    assert not again.model_loaded  # failed groups are skipped without --retry_errors
    run_stage_a(opts(root, tmp_path / "out", tiny_qwen2_5_vl, retry_errors=True), engine=engine25)
    assert [r["group_id"] for r in records(tmp_path / "out" / f"{M}_stage_a.jsonl")] == ["g1"]
    assert records(tmp_path / "out" / f"{M}_stage_a.errors.jsonl") == []


def test_missing_model_fails_before_any_work(photos, tmp_path):
    result = cli("--input_dir", str(photos), "--output_dir", str(tmp_path / "out"), "--model", str(tmp_path / "nope"),
                 "--mission", M, timeout=60)
    assert result.returncode == 2
    assert "model path" in result.stderr and "nope" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag, value, message", [
    ("--batch_size", "0", "--batch_size 0 is out of range"),
    ("--max_pixels", "10", "--max_pixels 10 is out of range"),
    ("--temperature", "-1", "--temperature -1.0 is out of range"),
    ("--shard_index", "3", "--shard_index 3 is out of range"),
    ("--mission", "RRU安装检查", "unknown mission 'RRU安装检查'; known missions: BBU安装方式检查（正装）"),
])
def test_bad_settings_are_refused_with_the_value_named(photos, tiny_qwen2_5_vl, tmp_path, flag, value, message):
    result = cli("--input_dir", str(photos), "--output_dir", str(tmp_path / "out"), "--model", str(tiny_qwen2_5_vl),
                 "--mission", M, flag, value, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]


def test_output_folder_that_is_not_writable(photos, tiny_qwen2_5_vl, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = cli("--input_dir", str(photos), "--output_dir", str(blocker / "out"), "--model", str(tiny_qwen2_5_vl),
                 "--mission", M, timeout=60)
    assert result.returncode == 2 and "is not writable" in result.stderr and "a_file/out" in result.stderr


def test_second_writer_is_refused(photos, tiny_qwen2_5_vl, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out / f"{M}_stage_a"):   # the mission lock an unsharded run holds
        result = cli("--input_dir", str(photos), "--output_dir", str(out), "--model", str(tiny_qwen2_5_vl),
                     "--mission", M, timeout=60)
    assert result.returncode == 3 and "being written by another process" in result.stderr


def test_two_cpu_shard_processes_then_merge_equal_one_process(tiny_qwen2_5_vl, photos, engine25, tmp_path):
    single = tmp_path / "single"
    run_stage_a(opts(photos, single, tiny_qwen2_5_vl, batch_size=4), engine=engine25)
    sharded = tmp_path / "sharded"
    result = subprocess.run(
        ["bash", "scripts/stage_a_infer.sh", f"mission={M}", "cuda=cpu", "num_shards=2", f"input_dir={photos}",
         f"output_dir={sharded}", f"model={tiny_qwen2_5_vl}", "batch_size=4", "max_new_tokens=8",
         "max_pixels=12544"], cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHON": sys.executable})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    parts = sorted(p.name for p in sharded.glob("*.shard-*-of-00002.jsonl") if "errors" not in p.name)
    assert len(parts) == 2 and all(records(sharded / p) for p in parts)  # both shards did work
    one = records(single / f"{M}_stage_a.jsonl")
    merged = records(sharded / f"{M}_stage_a.jsonl")
    strip = lambda rs: [(r["group_id"], r["images"], r["per_image"]) for r in rs]  # noqa: E731
    assert strip(merged) == strip(one)


def test_lora_summary_adapter_is_applied_and_recorded(tiny_qwen2_5_vl, photos, tmp_path):
    from tests.helpers import random_adapter
    adapter = random_adapter(tiny_qwen2_5_vl, tmp_path / "adapter")
    outs = {}
    for name, adapters in [("base", ()), ("lora", (str(adapter),))]:
        run_stage_a(opts(photos, tmp_path / name, tiny_qwen2_5_vl, adapters=adapters, batch_size=8))
        outs[name] = records(tmp_path / name / f"{M}_stage_a.jsonl")
    assert [r["group_id"] for r in outs["base"]] == [r["group_id"] for r in outs["lora"]]
    assert [r["per_image"] for r in outs["base"]] != [r["per_image"] for r in outs["lora"]]
    assert all(r["adapters"] == [str(adapter)] for r in outs["lora"]) and "adapters" not in outs["base"][0]


# ------------------------------------------------------------------ unreviewed work orders (issue 14)
def _unreviewed(root: Path, synthetic, missions: list[str]) -> list[str]:
    """A labelled synthetic set turned into today's work orders: every group folder moved up to its mission
    folder, the label folders gone. Returns the group ids."""
    synthetic.generate(root, seed=5, groups_per_label=1, missions=",".join(missions))
    ids = []
    for label_dir in sorted(root.glob("*/审核*")):
        for group in sorted(label_dir.iterdir()):
            group.rename(label_dir.parent / group.name)
            ids.append(group.name)
        label_dir.rmdir()
    return ids


def test_unlabeled_writes_label_null_reports_a_label_folder_and_resumes_once(tiny_qwen2_5_vl, synthetic, tmp_path):
    """Two missions x two unreviewed groups: `stage_a_infer.sh unlabeled=1` (one CPU process: it execs
    `group-qc stage-a --unlabeled`), then the same command through the CLI directly. Every record has
    label null; a label folder left under a mission is one errors-file line naming it and the flag, and the
    rest goes on; the rerun finds every group done and writes nothing twice, not even the issue."""
    missions = [M, "挡风板安装检查"]
    ids = _unreviewed(tmp_path / "in", synthetic, missions)
    jpeg(tmp_path / "in" / M / "审核通过" / "QC-AB-20250101-9" / "1.jpg")   # a reviewed group among them
    common = {"input_dir": tmp_path / "in", "output_dir": tmp_path / "out", "model": tiny_qwen2_5_vl,
              "mission": ",".join(missions), "batch_size": 8, "max_new_tokens": 4, "max_pixels": 12544}
    first = subprocess.run(["bash", "scripts/stage_a_infer.sh", "unlabeled=1", "cuda=cpu",
                            *(f"{k}={v}" for k, v in common.items())], cwd=REPO, capture_output=True, text=True,
                           timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHON": sys.executable})
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    outputs = sorted((tmp_path / "out").glob("*_stage_a*.jsonl"))
    files = {p.name: p.read_bytes() for p in outputs}
    recs = [r for m in missions for r in records(tmp_path / "out" / f"{m}_stage_a.jsonl")]
    assert sorted(r["group_id"] for r in recs) == sorted(ids) and len(ids) == 4
    for rec in recs:
        validate_record(rec, known_missions=missions)
        assert rec["label"] is None and rec["images"][0].count("/") == 2   # <mission>/<group>/<photo>
    (issue,) = records(tmp_path / "out" / f"{M}_stage_a.errors.jsonl")
    assert issue["label"] is None and issue["stage"] == "discovery" and issue["path"] == f"{M}/审核通过"
    assert f"{M}/审核通过" in issue["error"] and "drop --unlabeled" in issue["error"]
    again = cli("--unlabeled", "--no_progress", *(a for k, v in common.items() for a in (f"--{k}", str(v))))
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in outputs} == files
    assert again.stdout.count("wrote 0 groups, 0 failed (see errors file), 2 skipped") == 2, again.stdout


def test_encoding_ahead_hooks_the_installed_ms_swift_and_says_when_it_cannot(caplog):
    """Encoding ahead replaces TransformersEngine's private `_batch_encode`: pinned against the installed ms-swift;
    an engine whose method is gone or takes other arguments gets one warning, and photos are encoded inside it."""
    from swift.infer_engine import TransformersEngine
    from stage_a import engine as adapter
    assert adapter.batch_encode_hook_problem(TransformersEngine.__new__(TransformersEngine)) is None

    class Renamed:
        def _encode_batch(self, infer_requests, strict):
            pass

    class Changed:
        def _batch_encode(self, infer_requests, strict, pool):
            pass
    adapter._warned_hook = False
    with caplog.at_level("WARNING", logger="group_qc.stage_a"):
        assert "has no _batch_encode" in adapter.batch_encode_hook_problem(Renamed())
        assert "takes ('self', 'infer_requests', 'strict', 'pool')" in adapter.batch_encode_hook_problem(Changed())
    warnings = [r.message for r in caplog.records if "encoded inside the engine calls" in r.message]
    assert len(warnings) == 1 and "Renamed has no _batch_encode" in warnings[0]


def test_names_from_a_windows_archive_go_to_the_errors_file_and_every_other_group_is_written(tiny_qwen2_5_vl,
                                                                                             engine25, tmp_path):
    """Issue 26: one GBK-named group folder or stray file stopped the whole mission ('surrogates not allowed'),
    naming nothing, on every rerun. Now: one errors-file line each (path escaped), the rest written; a mission of
    which no group can be read fails the run, after the other missions are written."""
    from stage_a.runner import NothingReadableError
    root = tmp_path / "in"
    label = os.fsencode(root / M / "审核通过")
    for name in ("a", "zz", "照片组"):
        jpeg(root / M / "审核通过" / name / "1.jpg")
    os.rename(label + "/照片组".encode(), label + b"/" + "照片组".encode("gbk"))        # unzipped from Windows
    (root / M / "审核通过" / "note.txt").write_text("x")
    os.rename(label + b"/note.txt", label + b"/" + "说明".encode("gbk") + b".txt")
    other = "挡风板安装检查"
    jpeg(root / other / "g1" / "1.jpg")              # unreviewed photos read without --unlabeled: nothing readable
    out = tmp_path / "out"
    run = StageAOptions(input_dir=str(root), output_dir=str(out), model=str(tiny_qwen2_5_vl), mission="all", **SMALL)
    with pytest.raises(NothingReadableError, match=f"no group of {other} could be read.*pass --unlabeled"):
        run_stage_a(run, engine=engine25)
    assert [r["group_id"] for r in records(out / f"{M}_stage_a.jsonl")] == ["a", "zz"]
    errors = records(out / f"{M}_stage_a.errors.jsonl")
    assert sorted(e["path"] for e in errors) == [f"{M}/审核通过/\\xd5\\xd5Ƭ\\xd7\\xe9", f"{M}/审核通过/˵\\xc3\\xf7.txt"]
    assert all("name not valid UTF-8" in e["error"] for e in errors)
    with pytest.raises(NothingReadableError):        # the same on a rerun: nothing loaded, nothing added
        run_stage_a(run)
    assert len(records(out / f"{M}_stage_a.errors.jsonl")) == 2
    os.rename(label + b"/" + "照片组".encode("gbk"), label + "/照片组".encode())    # renamed as the message says
    report = run_stage_a(opts(root, out, tiny_qwen2_5_vl), engine=engine25)
    assert report.written[M] == 1
    assert [r["group_id"] for r in records(out / f"{M}_stage_a.jsonl")] == ["a", "zz", "照片组"]
