"""Judging on the tiny model: p_fail pinned against transformers, unlabelled Stage-A -> operating point -> judge,
and the judge's faults (wrong operating point, bad threshold, a second judge, kill -9 and resume)."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qc_core.jsonl import output_lock, write_jsonl_atomic
from qc_core.missions import load_registry
from qc_core.paths import resolved
from stage_b.judging import judge
from stage_b.data.dataset import prompt_row
from stage_b.model.generate import VERDICT_LINES
from stage_b.contract.grounding import guided_reply
from stage_b.rules.operating_point import MissionPoint, p_fail
from tests.helpers import (A, B, M, jsonl_records, random_adapter, read_lines, run_judge, stage_a_folder,
                           write_stage_a_groups)
from stage_b.judging import settings as judge_settings
from stage_b.judging import day_review
from stage_b.judging import scoring
from stage_b.judging import verdict_file

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(175)

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
MISSIONS = "BBU接地线检查,挡风板安装检查"


def test_the_qwen_tokenizer_splits_the_verdict_lines_as_scored(tiny_qwen2_5_vl):
    """通过 is one token, 不通过 is 不 + 通过, and the line break that ends the verdict line is its own token:
    scoring the break keeps '通过' from counting as the first line when the model would go on writing."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tiny_qwen2_5_vl)
    pieces = {line: [tok.decode([i]) for i in tok.encode(line, add_special_tokens=False)]
              for line in VERDICT_LINES.values()}
    assert pieces == {"不通过\n": ["不", "通过", "\n"], "通过\n": ["通过", "\n"]}
    assert tok.encode("通过\n理由: x", add_special_tokens=False)[:2] == tok.encode("通过\n", add_special_tokens=False)


def _rows(n=5):
    registry = load_registry()
    records = [{"group_id": f"QC-PF-20250101-{k}", "mission": M, "label": None, "images": ["a.jpg"] * (1 + k % 3),
                "per_image": {f"图片_{i + 1}": f"接地线×1/{'未捆扎' if (k + i) % 2 else '已捆扎'}"
                              for i in range(1 + k % 3)}} for k in range(n)]
    return [prompt_row(r, registry) for r in records]


def _photo_rows(folder: Path, n=3):
    """Photo-aware rows over real JPEGs of different sizes and colours (1 to 3 photos per group)."""
    from stage_b.data.settings import Selection
    from stage_b.data.dataset import rows_for
    from group_qc_dev.photos import jpeg
    records = []
    for k in range(n):
        count = 1 + k % 3
        names = [f"g{k}/p{i}.jpg" for i in range(count)]
        for i, name in enumerate(names):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            jpeg(folder / name, size=(96 + 32 * i, 64 + 16 * k), color=(40 * i, 200 - 50 * k, 90))
        records.append({"group_id": f"QC-PH-20250101-{k}", "mission": M, "label": None, "images": names,
                        "input_dir": str(folder),
                        "per_image": {f"图片_{i + 1}": "接地线×1/已捆扎" for i in range(count)}})
    return rows_for(records, Selection(stage_a_dir=str(folder), images=True, max_pixels=12_544), load_registry(),
                    prompt_row)


def _uncached_logprobs(engine, rows) -> list[dict]:
    """Each verdict line's log-probability from one forward pass over prompt + line (as ms-swift encodes them, photos
    included): no cache, no position arithmetic, nothing batched."""
    import torch
    from stage_b.model.generate import _request
    template, model = engine.engine.template, engine.engine.model
    out = []
    for row in rows:
        logprobs = {}
        for verdict, line in VERDICT_LINES.items():
            n = len(template.tokenizer.encode(line, add_special_tokens=False))
            inputs = template.data_collator([template.encode(_request(row, line))])
            ids, length = inputs["input_ids"][0], inputs["input_ids"].shape[1]
            _, inputs = template.pre_forward_hook(model, None, inputs)
            with torch.no_grad():
                lp = torch.log_softmax(model(**inputs).logits.float(), dim=-1)[0]
            logprobs[verdict] = sum(float(lp[length - n - 1 + j, ids[length - n + j]]) for j in range(n))
        out.append(logprobs)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_photo_aware_p_fail_equals_one_uncached_pass(tiny_model_factory, tmp_path, arch):
    """Photo-aware prompts put images between text lines, and Qwen-VL's rope positions jump over each image: the
    cached continuation (batched, left-padded, photos of different sizes) must still score the tokens the model would
    write after the prompt, as one plain forward pass over prompt + line does."""
    from stage_b.model.generate import VerdictEngine
    rows = _photo_rows(tmp_path)
    assert [len(r["images"]) for r in rows] == [1, 2, 3]
    assert all(r["messages"][1]["content"].count("<image>") == len(r["images"]) for r in rows)
    engine = VerdictEngine(str(tiny_model_factory(arch)), batch_size=3)
    scores, errors = engine.verdict_logprobs(rows)
    assert not errors
    plain = _uncached_logprobs(engine, rows)
    assert max(abs(a[v] - b[v]) for a, b in zip(scores, plain) for v in VERDICT_LINES) < 1e-3, (scores, plain)
    swapped = engine.verdict_logprobs([{**rows[1], "images": rows[1]["images"][::-1]}])[0][0]
    assert abs(swapped["通过"] - scores[1]["通过"]) > 1e-5   # the photos reach the model, each in its place


def _direct_logprobs(model_dir, adapter, rows) -> list[dict]:
    """The two verdict lines' probabilities straight from transformers: the checkpoint's own chat template,
    one unpadded sequence per line, no ms-swift anywhere."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    if adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    out = []
    for row in rows:
        prompt = tok.apply_chat_template(row["messages"], tokenize=False, add_generation_prompt=True)
        logprobs = {}
        for verdict, line in VERDICT_LINES.items():
            ids = tok(prompt + line, return_tensors="pt", add_special_tokens=False).input_ids
            n = len(tok.encode(line, add_special_tokens=False))
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)[0]
            logprobs[verdict] = sum(float(lp[ids.shape[1] - n - 1 + j, ids[0, ids.shape[1] - n + j]]) for j in range(n))
        out.append(logprobs)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch, with_adapter", [("qwen2_5_vl", True), ("qwen2_5_vl", False), ("qwen3_vl", False)])
def test_p_fail_equals_a_direct_transformers_computation(tiny_model_factory, tmp_path, arch, with_adapter):
    """Batched (left-padded, prompts of different lengths) through ms-swift's engine and template, with a LoRA
    adapter or a plain (merged) checkpoint: within 1e-4 of the direct computation, group by group."""
    from stage_b.model.generate import VerdictEngine
    model = tiny_model_factory(arch)
    adapter = random_adapter(model, tmp_path / "adapter") if with_adapter else None
    rows = _rows()
    engine = VerdictEngine(str(model), adapters=[str(adapter)] if adapter else [], batch_size=4)
    scores, errors = engine.verdict_logprobs(rows)
    ours = [p_fail(s) for s in scores]
    assert not errors
    direct = _direct_logprobs(model, adapter, rows)
    assert max(abs(a - p_fail(b)) for a, b in zip(ours, direct)) < 1e-4, (ours, direct)
    assert max(abs(a[v] - b[v]) for a, b in zip(scores, direct) for v in VERDICT_LINES) < 1e-3
    assert len({round(p, 6) for p in ours}) > 1   # the prompts really differ in what the model makes of them
    if adapter:   # and the adapter is applied: without it the log-probabilities move
        base = _direct_logprobs(model, None, rows)
        assert max(abs(a[v] - b[v]) for a, b in zip(scores, base) for v in VERDICT_LINES) > 1e-2






@pytest.fixture(scope="module")
def unreviewed(tmp_path_factory, synthetic, tiny_qwen2_5_vl):
    """Stage-A --unlabeled over synthetic work orders (two missions), written by the real CLI."""
    root = tmp_path_factory.mktemp("unreviewed")
    truth = synthetic.generate(root / "photos", seed=3, groups_per_label=2, missions=MISSIONS, unlabeled=True)
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a",
                             "--unlabeled", "--input_dir", str(root / "photos"),
                             "--output_dir", str(root / "stage_a"), "--model", str(tiny_qwen2_5_vl), "--mission",
                             MISSIONS, "--max_new_tokens", "6", "--batch_size", "8", "--max_pixels", "12544",
                             "--no_progress"], cwd=REPO, capture_output=True, text=True, timeout=600, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return root, {t["group_id"] for t in truth}


@pytest.mark.slow
def test_unlabelled_stage_a_then_judge_writes_every_group_once_and_resumes(unreviewed, tiny_qwen2_5_vl, tmp_path):
    root, groups = unreviewed
    args = ["--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(root / "stage_a"), "--mission", MISSIONS,
            "--output_dir", str(tmp_path / "v"), "--threshold", "0.5", "--max_new_tokens", "8"]
    first = run_judge(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    verdicts = {m: read_lines(verdict_file.verdicts_path(tmp_path / "v", m)) for m in MISSIONS.split(",")}
    got = [r for rs in verdicts.values() for r in rs]
    assert sorted(r["group_id"] for r in got) == sorted(groups)
    for r in got:
        assert r["label"] is None and r["threshold"] == 0.5 and 0.0 <= r["p_fail"] <= 1.0
        assert r["verdict"] == ("不通过" if r["p_fail"] >= 0.5 else "通过")
        # the reason was generated after the chosen verdict; after 不通过 it cites the photos whose summaries show a
        # defect (guided citations, the default)
        start, complete = guided_reply(r["verdict"], r["summaries"], r["mission"])
        assert r["reply"] == start if complete else r["reply"].startswith(start)
        assert r["reason_citations"] == "guided"
        # a random model's reason line is rarely the contract: such replies are kept and flagged, never dropped
        assert r["needs_review"] == bool(r["review_why"])
        # the checkpoint named relative to the verdict file: a copied project names its own
        assert not Path(r["model"]).is_absolute() and r["operating_point"] is None
        assert (tmp_path / "v" / r["model"]).resolve() == Path(tiny_qwen2_5_vl).resolve()
    again = run_judge(*args)
    assert again.returncode == 0 and again.stdout.count("0 to judge") == 2
    assert "Loading" not in again.stderr   # nothing left to judge: the model is not even loaded
    assert {m: read_lines(verdict_file.verdicts_path(tmp_path / "v", m)) for m in verdicts} == verdicts
    other = run_judge(*args[:-4], "--threshold", "0.7")   # another threshold into the same files: refused
    assert other.returncode == 2 and "judged with another threshold" in other.stderr and "--overwrite" in other.stderr


def tie_candidates(values: list[float]) -> list[float]:
    """The rule's candidate thresholds, written out again from its statement (stage_b.rules.operating_point): p_fail
    values
    within 2 tau of their neighbour are one run of ties; each run's smallest minus tau (not below 0), and 1.0 unless a
    value lies within tau of it. (The tiny model's p_fail values all lie within a few 1e-7: one run.)"""
    tau, ordered, out = 2.0 ** -20, sorted(set(values)), []
    for k, p in enumerate(ordered):
        if k == 0 or p - ordered[k - 1] > 2 * tau:
            out.append(max(0.0, p - tau))
    return out + ([1.0] if ordered[-1] < 1.0 - tau else [])


@pytest.mark.slow
def test_evaluate_picks_an_operating_point_that_judge_uses_only_for_its_model(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=16)
    adapter = random_adapter(tiny_qwen2_5_vl, tmp_path / "adapter")
    model = ["--model", str(tiny_qwen2_5_vl), "--adapters", str(adapter)]
    ev = subprocess.run([sys.executable, "-m", "group_qc", "evaluate", *model, "--stage_a_dir", str(stage_a),
                         "--val_ratio", "0.5", "--max_new_tokens", "4", "--target_miss_rate", "0.25",
                         "--output_dir", str(tmp_path / "ev")], cwd=REPO, capture_output=True, text=True, timeout=600,
                        env=ENV)
    assert ev.returncode == 0, ev.stderr[-3000:]
    op = json.loads((tmp_path / "ev" / "operating_point.json").read_text(encoding="utf-8"))
    preds = read_lines(tmp_path / "ev" / "predictions.jsonl")
    entry = op["missions"][M]
    points = [(p["p_fail"], p["expected"]) for p in preds]
    fails = [p for p, e in points if e == "不通过"]
    # the rule, recomputed by hand from predictions.jsonl: 4 or so defective groups cannot certify 25% at 90% (9 are
    # needed), so the threshold is the point rule's and the entry says how many would
    assert not entry["certified"] and entry["fail_groups_needed"] == 9
    assert entry["threshold"] == max(t for t in tie_candidates([p for p, _ in points])
                                     if sum(p < t for p in fails) / len(fails) <= 0.25)
    # the adapter named relative to the operating point's folder (qc_core.paths), resolved where it is now
    assert op["data"]["split"] == "val" and resolved(op["adapters"][0]["path"], tmp_path / "ev").resolve() == \
        adapter.resolve()
    # the certified side, recomputed with scipy's exact bound (the rule: stage_b.rules.operating_point)
    from scipy.stats import binomtest
    bound = binomtest(sum(p < entry["threshold"] for p in fails), len(fails), alternative="less").proportion_ci(
        confidence_level=0.9).high
    assert entry["certified"] is (bound <= 0.25) and op["confidence"] == 0.9
    for p in preds:   # guided citations: a 不通过 reason starts with the photos whose summaries show a defect
        if p["predicted"] == "不通过":
            start, complete = guided_reply("不通过", p["summaries"], p["mission"])
            assert p["completion"] == start if complete else p["completion"].startswith(start)
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["operating_curve"]["per_mission"][M][0]["threshold"] == 1.0
    assert (tmp_path / "ev" / "operating_curve.png").stat().st_size > 5000
    report = (tmp_path / "ev" / "report.md").read_text(encoding="utf-8")
    assert "## Operating point" in report and "(review/index.html)" in report
    page = (tmp_path / "ev" / "review" / "index.html").read_text(encoding="utf-8")
    shown = [p for p in preds if p["predicted"] != p["expected"]]   # misses, overkills, unparseable: no correct ones
    assert page.count('class="card"') == len(shown) and all(p["group_id"] in page for p in shown)
    # re-scoring the predictions recomputes the same operating point, with no model
    re = subprocess.run([sys.executable, "-m", "group_qc", "evaluate",
                         "--predictions", str(tmp_path / "ev" / "predictions.jsonl"),
                         "--target_miss_rate", "0.25", "--output_dir", str(tmp_path / "re")], cwd=REPO,
                        capture_output=True, text=True, timeout=300, env=ENV)
    assert re.returncode == 0, re.stderr[-2000:]
    again = json.loads((tmp_path / "re" / "operating_point.json").read_text(encoding="utf-8"))
    assert again["missions"] == op["missions"] and again["model"] == op["model"]

    ok = run_judge(*model, "--stage_a_dir", str(stage_a),
                "--operating_point", str(tmp_path / "ev" / "operating_point.json"),
                "--output_dir", str(tmp_path / "j"), "--max_new_tokens", "4")
    assert ok.returncode == 0, ok.stderr[-3000:]
    judged = read_lines(verdict_file.verdicts_path(tmp_path / "j", M))
    assert len(judged) == 16 and {r["threshold"] for r in judged} == {entry["threshold"]}
    assert all(r["label"] in ("pass", "fail") for r in judged)   # labelled records may be judged (a dry run)
    page = (tmp_path / "j" / "review" / "index.html").read_text(encoding="utf-8")
    assert page.count('class="card"') == 16 and page.count('data-outcome="needs_review" data-tags') == sum(
        r["needs_review"] for r in judged)
    by_id = {p["group_id"]: p["p_fail"] for p in preds}
    assert all(abs(r["p_fail"] - by_id[r["group_id"]]) < 1e-5 for r in judged if r["group_id"] in by_id)

    base = run_judge("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a), "--operating_point",
                  str(tmp_path / "ev" / "operating_point.json"), "--output_dir", str(tmp_path / "j2"))
    assert base.returncode == 2 and str(adapter.resolve()) in base.stderr and "these are none" in base.stderr
    assert not (tmp_path / "j2").exists() or not any((tmp_path / "j2").iterdir())   # refused before anything


@pytest.mark.parametrize("args, message", [
    (["--threshold", "1.5"], "--threshold 1.5 is out of range"),
    (["--threshold", "-0.1"], "out of range"),
    ([], "no threshold: pass --operating_point"),
    (["--operating_point", "missing.json"], "missing.json does not exist"),
])
def test_judge_refuses_bad_thresholds_before_the_model_loads(tiny_qwen2_5_vl, tmp_path, args, message):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    started = time.monotonic()
    result = run_judge("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a),
                    "--output_dir", str(tmp_path / "o"), *args, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]
    assert time.monotonic() - started < 30 and "Loading" not in result.stderr


def test_an_operating_point_of_format_1_is_refused_not_misread(tiny_qwen2_5_vl, tmp_path):
    from qc_core.checkpoints import checkpoint_identities
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    op = tmp_path / "op.json"
    op.write_text(json.dumps({"format": 1, **checkpoint_identities(str(tiny_qwen2_5_vl), []),
                              "missions": {M: {"threshold": 0.5, "review_margin": 0}}}), encoding="utf-8")
    result = run_judge("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a), "--operating_point", str(op),
                    "--output_dir", str(tmp_path / "o"), timeout=120)
    assert result.returncode == 2 and "format 1 predates certified promises" in result.stderr
    assert "--confidence" in result.stderr and "Loading" not in result.stderr


@pytest.mark.slow
def test_a_mission_without_a_threshold_is_judged_with_every_group_sent_to_review(tiny_qwen2_5_vl, tmp_path):
    """One mission with no promise must not stop the day: the judge judges it, every group to review, naming why."""
    from qc_core.checkpoints import checkpoint_identities
    stage_a = stage_a_folder(tmp_path / "sa", n=3)
    op = tmp_path / "op.json"
    op.write_text(json.dumps({"format": 2, **checkpoint_identities(str(tiny_qwen2_5_vl), []), "confidence": 0.8,
                              "missions": {
        "挡风板安装检查": {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0, "certified": True,
                    "confidence": 0.8, "target_miss_rate": 0.2, "n_fail": 10, "misses": 0, "miss_rate_upper": 0.149,
                    "promise": "miss rate <= 20%", "profile": {"p_fail": [0.9] * 10, "defect_groups": 10,
                                                               "groups": 10}}}}, ensure_ascii=False), encoding="utf-8")
    result = run_judge("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a), "--operating_point", str(op),
                    "--output_dir", str(tmp_path / "o"), "--max_new_tokens", "4", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    judged = read_lines(verdict_file.verdicts_path(tmp_path / "o", M))
    assert len(judged) == 3 and all(r["needs_review"] and r["certified"] is False for r in judged)
    assert all("has no entry for it" in r["review_why"][0] for r in judged)
    assert all(r["verdict"] == ("不通过" if r["p_fail"] >= 0.5 else "通过") for r in judged)   # the model's own choice
    assert "0 of 3 groups decided without review" in result.stdout
    # the day's work and its price, and why nothing was decided without review (stage_b.rules.workload)
    assert (f"{M}: 3 groups: 0 decided without a person, 3 to people (3 review, 0 blind audits, 0 gold) = 3 "
            f"decisions, 0.03 person-hours at 30 s a decision (a stated default") in result.stdout
    assert "to review because: no threshold 3" in result.stdout
    page = (tmp_path / "o" / "review" / "index.html").read_text(encoding="utf-8")
    assert "The day&#39;s work, priced at 30 s a decision" in page or "The day's work, priced at 30 s" in page


def test_a_second_judge_on_the_same_output_is_refused(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    (tmp_path / "o").mkdir()
    with output_lock(verdict_file.verdicts_path(tmp_path / "o", M)):
        result = run_judge("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a), "--threshold", "0.5",
                        "--output_dir", str(tmp_path / "o"), timeout=120)
    assert result.returncode == 3 and "being written by another process" in result.stderr


@pytest.mark.slow
def test_a_judge_killed_mid_run_resumes_to_every_group_exactly_once(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=12)
    out = tmp_path / "o"
    args = ["-m", "group_qc", "judge", "--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a),
            "--threshold", "0.5", "--output_dir", str(out), "--batch_size", "2", "--max_new_tokens", "24"]
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    path = verdict_file.verdicts_path(out, M)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not path.exists() or len(path.read_bytes().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    before = read_lines(path)
    assert 2 <= len(before) < 12, "the kill came too late to test a resume"
    with path.open("ab") as f:   # what a kill inside a write leaves behind
        f.write(b'{"group_id": "QC-EV-20250101-99", "mission"')
    resumed = subprocess.run([sys.executable, *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = read_lines(path)
    assert sorted(r["group_id"] for r in after) == sorted(f"QC-EV-20250101-{k}" for k in range(12))
    assert after[:len(before)] == before   # nothing judged before the kill was judged again
    assert math.isfinite(sum(r["p_fail"] for r in after))


def test_one_work_order_in_two_missions_is_asked_about_twice_each_with_its_mission():
    """Group ids repeat across missions (one work order, photographed for each inspection): each group's prompt must
    be its own mission's, never the other's."""
    registry = load_registry()
    records = [{"group_id": "QC-SAME-20250101-1", "mission": m, "label": None, "images": ["a.jpg"],
                "per_image": {"图片_1": "接地线×1/已捆扎"}} for m in ("BBU接地线检查", "挡风板安装检查")]
    rows, failed = scoring.prompt_rows(records, judge.selection_from({}, environ={}), registry)
    assert not failed and len(rows) == 2
    for (mission, _), row in rows.items():
        assert row["mission"] == mission and f"检查任务：{mission}" in row["messages"][1]["content"]


def test_a_day_mixing_the_certified_stage_a_model_with_another_is_withdrawn():
    """Summaries of the certified Stage-A model and of a new one on one day: the mission goes to review (the set of
    today's models minus the certified ones is not empty), naming the new model; the certified model alone is not."""
    from stage_b.rules.operating_point import MissionPoint, OperatingPoint
    point = MissionPoint(threshold=0.5, threshold_fail=0.5, review_margin=0.0, certified=True, promise="p",
                         stage_a={"models": ["fp-old"]})
    op = OperatingPoint(model={}, adapters=[], missions={"M": point})
    mixed = {"M": [{"model_fingerprint": "fp-old"}, {"model_fingerprint": "fp-new"}]}
    assert "fp-new" in judge.mission_withdrawals(op, "d", None, None, mixed, ["M"])["M"]
    assert judge.mission_withdrawals(op, "d", None, None, {"M": [{"model_fingerprint": "fp-old"}]}, ["M"]) == {}


def test_audited_groups_are_decided_without_review_in_the_automation_share():
    verdicts = [{"mission": "M", "verdict": "通过", "route": r} for r in ("auto", "audit", "audit", "review")]
    counts = day_review.automation_of(None, ["M"], verdicts)["per_mission"]["M"]
    assert (counts["judged"], counts["auto_decided"], counts["audited"]) == (4, 3, 2)
    assert counts["automation_share"] == 0.75


def test_a_withdrawn_missions_groups_go_to_review_with_mission_scope():
    """Withdrawn: every group to review, scope `mission` (the group was not chosen by its own score, so its label is
    fair evidence, stage_b.rules.routes), the withdrawal named first."""
    from tests.helpers import AUDITED_POINT
    record = {"group_id": "g", "mission": "BBU接地线检查", "images": ["1.jpg"], "per_image": {"图片_1": "接地线松动"}}
    line = verdict_file.verdict_record(record, 0.1, AUDITED_POINT, "通过\n理由: 图片_1 接地线已捆扎",
                                {"audit_share": 1.0, "audit_seed": 1, "withdrawn": "the miss rate broke"})
    assert (line["route"], line["review_scope"]) == ("review", "mission")
    assert line["review_why"][0] == "promise withdrawn: the miss rate broke"


def test_a_group_sent_to_two_reviewers_is_in_both_queues():
    from stage_b.labels.assign import assignees
    both = [assignees(["王工", "李工", "张工"], 1.0, 7, "M", f"g{k}") for k in range(50)]
    assert all(len(a) == 2 and a[0] != a[1] for a in both)
    assert {r for a in both for r in a[1:]} == {"王工", "李工", "张工"}   # every reviewer is someone's second


@pytest.mark.parametrize("words, refusal", [
    (None, None), ("first day at this operating point", None), ("监控主机今天停机维护", None),
    ("ok", "say in words"), ("--------", "is a flag, not a reason"),
])
def test_no_monitor_takes_a_reason_in_words(words, refusal):
    if refusal is None:
        assert judge_settings.check_no_monitor(words, None) == (None if words is None else words)
    else:
        with pytest.raises(ValueError, match=refusal):
            judge_settings.check_no_monitor(words, None)
    with pytest.raises(judge_settings.JudgeError, match="give one"):
        judge_settings.check_no_monitor("first day at this operating point", "monitor.json")


def test_a_certified_mission_without_a_monitors_state_sends_its_groups_to_review():
    """The guard fails closed: no --monitor and no --no_monitor reason -> route review, scope mission, the reason
    first. Planted: the unmonitored reason dropped from the mission's reasons -> decided without review."""
    from tests.helpers import AUDITED_POINT
    record = {"group_id": "g", "mission": "BBU接地线检查", "images": ["1.jpg"],
              "per_image": {"图片_1": "接地线连接牢固"}}
    line = verdict_file.verdict_record(record, 0.01, AUDITED_POINT, "通过\n理由: 图片_1 接地线连接牢固",
                                {"audit_share": 0.0, "audit_seed": 1, "unmonitored": judge_settings.NO_MONITOR})
    assert (line["route"], line["review_scope"]) == ("review", "mission")
    assert line["review_why"][0].startswith("promise not monitored: no monitor state for this operating point")
    told = verdict_file.verdict_record(record, 0.01, AUDITED_POINT, "通过\n理由: 图片_1 接地线连接牢固",
                                {"audit_share": 0.0, "audit_seed": 1, "no_monitor": "first day at this point"})
    assert told["route"] == "auto" and told["no_monitor"] == "first day at this point"


# planted-bug test (issue 27, class 4): the judge resumes by group identity
IDS = [f"QC-RS-20250101-{k}" for k in range(6)]   # one work order per id, photographed for both missions


@pytest.mark.usefixtures("no_group_qc_environment")
@pytest.mark.parametrize("already", [
    {A: [IDS[4], IDS[1]], B: [IDS[0], IDS[5], IDS[2]]},   # out of input order, gaps before and after
    {A: [IDS[5]], B: [IDS[3], IDS[0]]},                    # only the last group; a later one before an earlier one
    {A: [], B: [IDS[2]]},                                  # one mission untouched, the other one group in
])
def test_the_judge_resumes_by_group_identity_not_by_position(tmp_path, engine, model, already):
    """Silent bug: the judge resuming by position (skipping the first k groups of the input when its verdicts file
    holds k lines) instead of by which groups the file holds. The kill -9 test cannot see it: a killed run's file
    always holds the first k groups in input order. Here the file holds groups out of input order: the resumed run
    must ask the model about exactly the missing groups of each mission, each once, keep the lines already there,
    and end with every group exactly once."""
    stage_a = write_stage_a_groups(tmp_path / "sa", {m: [(g, None) for g in IDS] for m in (A, B)})
    for m_index, m in enumerate((A, B)):
        for k, gid in enumerate(IDS):
            engine.P_FAIL[(m, gid)] = 0.05 + 0.15 * k + 0.04 * m_index
    args = ["--model", str(model), "--stage_a_dir", str(stage_a), "--mission", "all", "--threshold", "0.5",
            "--no_review", "--batch_size", "2"]
    assert judge.main([*args, "--output_dir", str(tmp_path / "full")]) == 0
    full = {m: {r["group_id"]: r for r in jsonl_records(verdict_file.verdicts_path(tmp_path / "full", m))}
            for m in (A, B)}
    assert all(list(full[m]) == IDS for m in (A, B))

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for m, gids in already.items():   # what an earlier run, of the same command, left behind
        verdict_file.verdicts_path(resumed, m).write_text(
            "".join(json.dumps(full[m][g], ensure_ascii=False) + "\n" for g in gids), encoding="utf-8")
    engine.asked.clear()
    assert judge.main([*args, "--output_dir", str(resumed)]) == 0

    for m in (A, B):
        missing = [g for g in IDS if g not in already[m]]
        asked = [g for method, mission, g in engine.asked if method == "verdict_logprobs" and mission == m]
        assert asked == missing, (m, asked)
        after = jsonl_records(verdict_file.verdicts_path(resumed, m))
        assert after[:len(already[m])] == [full[m][g] for g in already[m]]     # kept as they were
        assert sorted(r["group_id"] for r in after) == sorted(IDS)           # every group, exactly once
        for r in after:                                                       # each with its own p_fail
            assert r["mission"] == m and r["p_fail"] == pytest.approx(engine.P_FAIL[(m, r["group_id"])], abs=1e-9)


# --------------------------------------------------------------------------------------------------------------
# What a verdict rests on, which line is kept, the rule a resume must share, the reason after the verdict
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 36)
RECORD = {"group_id": "g1", "mission": M, "label": None, "images": ["a.jpg", "b.jpg"],
          "per_image": {"图片_1": "接地线×1/已捆扎", "图片_2": "接地排×1"}, "model": "/sa"}


def test_what_a_verdict_rests_on_includes_the_photo_list():
    from stage_b.judging.verdict_file import rests_on
    moved = {**RECORD, "images": ["a.jpg", "c.jpg"]}
    assert rests_on(moved)["sha256"] != rests_on(RECORD)["sha256"]


def test_a_kept_line_is_checked_at_its_own_threshold():
    from stage_b.judging.verdict_file import _line_problem
    line = {"group_id": "g1", "mission": M, "p_fail": 0.4, "threshold": 0.3, "verdict": "不通过"}
    assert _line_problem(line, M, {"g1": RECORD}, {}) is None
    assert "does not follow" in _line_problem({**line, "verdict": "通过"}, M, {"g1": RECORD}, {})


@pytest.mark.parametrize("key, value", [("allow_uncertified", True), ("audit_share", 0.5), ("audit_seed", 7),
                                        ("withdrawn", "drift"), ("reason_citations", "guided")])
def test_a_resume_under_another_decision_rule_is_refused(tmp_path, key, value):
    from stage_b.judging.verdict_file import PROVENANCE, check_resumable
    from stage_b.judging.settings import JudgeError
    path = tmp_path / "v.jsonl"
    line = {"group_id": "g1", "mission": M, "p_fail": 0.1, "threshold": 0.5, "verdict": "通过",
            "rests_on": {"sha256": "x"}, **PROVENANCE}
    write_jsonl_atomic(path, [line])
    with pytest.raises(JudgeError, match=f"judged with another {key}"):
        check_resumable(path, {**PROVENANCE, key: value}, M, {"g1": RECORD})


def test_the_reason_is_written_after_the_verdict_the_missions_threshold_gives():
    from stage_b.model.model_replies import reply_starts
    point = MissionPoint(threshold=0.3, threshold_fail=0.3, review_margin=0.0, certified=True, promise="")
    starts = reply_starts({0: {"summaries": ["接地线×1/散乱 备注：接地线散乱未捆扎"], "mission": M}}, {0: 0.4}, point,
                          guided=True)
    assert starts[0][0].startswith("不通过\n")   # at 0.5 it would have been 通过
