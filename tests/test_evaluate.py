"""Evaluation: predictions, metrics and report; re-scoring; bad input; adapter vs merged model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.jsonl import write_jsonl_atomic
from stage_b import evaluate
from stage_b.evaluate import EvaluationError, prepare_output_dir, predictions_from_rows, read_predictions, render_report
from stage_b.stats.metrics import compute_metrics
from stage_b.data.settings import Selection
from stage_b.contract.verdict import FAIL, PASS
from tests.helpers import A, B, M, jsonl_records, random_adapter, stage_a_folder, write_stage_a_groups

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(121)

REPO = Path(__file__).resolve().parent.parent
ROWS = [{"group_id": "g1", "mission": M, "solution": "不通过", "summaries": ["接地线×1/未捆扎"]},
        {"group_id": "g2", "mission": M, "solution": "通过", "summaries": ["接地线×1/已捆扎"]},
        {"group_id": "g3", "mission": M, "solution": "不通过", "summaries": ["接地线×1/散乱"]}]
COMPLETIONS = ["通过\n理由: 图片_1 接地线规范", "通过\n理由: 图片_1 已捆扎", "乱码"]


def write_predictions(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_predictions_metrics_and_report():
    preds = predictions_from_rows(ROWS, COMPLETIONS)
    assert [p["predicted"] for p in preds] == ["通过", "通过", None]
    assert preds[1]["rewards"] == {"qc_label": 1.0, "qc_format": 1.0, "qc_consistency": 1.0}
    metrics = compute_metrics(preds, [M, "挡风板安装检查"])
    m = metrics["per_mission"][M]
    # g1 judged 通过 and g3 unparseable: both defective groups are misses (nothing failed them)
    assert (m["n"], m["miss_rate"], m["invalid_verdicts"], m["accuracy"]) == (3, 1.0, 1, pytest.approx(1 / 3))
    report = render_report(metrics, preds, "test")
    assert "| 不通过 | 1 | 0 | 1 |" in report          # confusion row: expected 不通过
    assert "**g1**: judged 通过; reason: 图片_1 接地线规范" in report and "图片_1: 接地线×1/未捆扎" in report
    assert "**g3**: judged unparseable" in report and "Misses to review (2, 1 of them unparseable replies" in report
    assert "n = 0 (no validation groups)" in report   # 挡风板安装检查 has none


def test_rescoring_a_predictions_file_gives_the_same_metrics(tmp_path):
    preds = predictions_from_rows(ROWS, COMPLETIONS)
    write_predictions(tmp_path / "p.jsonl", preds)
    assert read_predictions(tmp_path / "p.jsonl") == preds


@pytest.mark.parametrize("mutate, message", [
    (lambda text: text.replace('"completion"', '"answer"', 1), r"p.jsonl:1: missing field\(s\) completion"),
    (lambda text: text[:-30], "torn last line"),
    (lambda text: text.replace('"expected": "不通过"', '"expected": "fail"', 1), "expected must be 通过 or 不通过"),
])
def test_bad_predictions_files_are_named(tmp_path, mutate, message):
    write_predictions(tmp_path / "p.jsonl", predictions_from_rows(ROWS, COMPLETIONS))
    (tmp_path / "p.jsonl").write_text(mutate((tmp_path / "p.jsonl").read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(EvaluationError, match=message):
        read_predictions(tmp_path / "p.jsonl")


def test_existing_output_folder_is_refused_unless_overwrite(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    with pytest.raises(EvaluationError, match="already holds metrics.json; pass --overwrite"):
        prepare_output_dir(tmp_path, overwrite=False)
    prepare_output_dir(tmp_path, overwrite=True)


def test_compare_and_plot_clis(tmp_path):
    text_only, photo_aware = Selection(val_ratio=0.5), Selection(val_ratio=0.5, images=True, max_pixels=50176)
    for name, completions, sel in [("a", COMPLETIONS, text_only),
                                   ("b", ["不通过\n理由: 图片_1 未捆扎", COMPLETIONS[1], "不通过\n理由: 图片_1 散乱"],
                                    photo_aware)]:
        metrics = compute_metrics(predictions_from_rows(ROWS, completions), [M])
        metrics["data"] = {"split": "val", "split_settings": sel.describe_split(), "mode": sel.mode,
                           "mode_settings": sel.describe_mode(), "selection": sel.to_record(), "groups": {M: 3}}
        (tmp_path / f"{name}.json").write_text(json.dumps(metrics, ensure_ascii=False))
    out = subprocess.run([sys.executable, "-m", "group_qc", "compare",
                          str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                          "--names", "text-only", "photo-aware"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "miss_rate" in out.stdout and "-100.0 pt" in out.stdout and "(better)" in out.stdout
    assert "A = text-only: read summaries only; val split" in out.stdout
    assert "B = photo-aware: read summaries and photos (default), max_pixels 50176 (default)" in out.stdout
    assert "scored different groups" not in out.stdout
    other = json.loads((tmp_path / "b.json").read_text())
    other["data"]["selection"] = {"val_ratio": 0.3, "seed": 0}
    (tmp_path / "c.json").write_text(json.dumps(other, ensure_ascii=False))
    out = subprocess.run([sys.executable, "-m", "group_qc", "compare", str(tmp_path / "a.json"),
                          str(tmp_path / "c.json")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "A and B scored different groups" in out.stdout
    run = tmp_path / "run" / "v0-20260101-000000"
    run.mkdir(parents=True)
    (run / "logging.jsonl").write_text("\n".join(json.dumps(
        {"reward": s / 10, "rewards/qc_label/mean": s / 10, "rewards/qc_format/mean": 1.0, "frac_reward_zero_std": 0.5,
         "kl": 0.01 * s, "completions/mean_length": 12}) for s in range(5)) + "\n")
    out = subprocess.run([sys.executable, "-m", "group_qc", "plot-training", str(tmp_path / "run")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and (run / "training.png").stat().st_size > 1000




def _evaluate(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "group_qc", "evaluate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})




@pytest.mark.slow
def test_evaluate_adapter_equals_merged_model_and_differs_from_base(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa")
    adapter = random_adapter(tiny_qwen2_5_vl, tmp_path / "adapter")
    merged = tmp_path / "merged"
    export = subprocess.run([str(Path(sys.executable).parent / "swift"), "export", "--model", str(tiny_qwen2_5_vl),
                             "--model_type", "qwen2_5_vl", "--template", "qwen2_5_vl", "--adapters", str(adapter),
                             "--merge_lora", "true", "--output_dir", str(merged)],
                            cwd=REPO, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert export.returncode == 0, export.stderr[-3000:]
    common = ["--stage_a_dir", str(stage_a), "--split", "all", "--max_new_tokens", "12", "--batch_size", "8"]
    runs = {"base": ["--model", str(tiny_qwen2_5_vl)],
            "adapter": ["--model", str(tiny_qwen2_5_vl), "--adapters", str(adapter)],
            "merged": ["--model", str(merged)]}
    completions, p_fails = {}, {}
    for name, model_args in runs.items():
        result = _evaluate(*model_args, *common, "--output_dir", str(tmp_path / name))
        assert result.returncode == 0, result.stderr[-3000:]
        preds = [json.loads(line)
                 for line in (tmp_path / name / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(preds) == 12 and (tmp_path / name / "report.md").exists()
        completions[name] = [p["completion"] for p in preds]
        p_fails[name] = [p["p_fail"] for p in preds]
    assert completions["adapter"] == completions["merged"]
    assert completions["adapter"] != completions["base"]  # the adapter is really applied
    # p_fail too: the adapter as loaded by the engine and the merged weights give the same verdict probability
    assert max(abs(a - b) for a, b in zip(p_fails["adapter"], p_fails["merged"])) < 1e-4


@pytest.mark.slow
def test_evaluate_bad_inputs(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa")
    not_adapter = tmp_path / "ckpt"
    not_adapter.mkdir()
    result = _evaluate("--model", str(tiny_qwen2_5_vl), "--adapters", str(not_adapter), "--stage_a_dir", str(stage_a),
                       "--output_dir", str(tmp_path / "o"))
    assert result.returncode == 2 and "has no adapter_config.json" in result.stderr
    (tmp_path / "o2").mkdir()
    (tmp_path / "o2" / "report.md").write_text("old")
    result = _evaluate("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a),
                       "--output_dir", str(tmp_path / "o2"))
    assert result.returncode == 2 and "--overwrite" in result.stderr


def test_a_group_predicted_twice_is_refused_not_counted_twice(tmp_path):
    preds = predictions_from_rows(ROWS, COMPLETIONS)
    write_predictions(tmp_path / "p.jsonl", preds + preds[1:2])
    with pytest.raises(EvaluationError, match=r"p.jsonl:4: group g2 of BBU接地线检查 already at line 2"):
        read_predictions(tmp_path / "p.jsonl")


@pytest.mark.slow
def test_a_group_the_model_cannot_take_fails_alone_and_is_named(tiny_qwen2_5_vl, tmp_path):
    """A 10 MB row used to stop evaluation after minutes of tokenising, naming no group. Now: a prompt that
    cannot fit is refused at once, one that ms-swift refuses fails alone; both are named, counted wrong,
    listed in the report, and every other group is judged."""
    from stage_b.model.generate import VerdictEngine
    rows = [{**r, "messages": [{"role": "user", "content": f"图片_1: {s}"}]} for r, s in
            zip(ROWS, ["接地线×1/未捆扎", "接地线×1/已捆扎" * 400, "接地线×1" * 20_000])]
    engine = VerdictEngine(str(tiny_qwen2_5_vl), batch_size=4, max_new_tokens=4)
    engine.engine.template.max_length = 1_000   # row 2: 3,206 characters (under 4 x 1,000) but over 1,000 tokens
    completions, errors = engine.generate(rows)
    assert set(errors) == {1, 2} and completions[0] and not completions[1] and not completions[2]
    assert errors[1].startswith("group g2 of BBU接地线检查: ") and "max_length" in errors[1]
    assert errors[2].startswith(f"group g3 of BBU接地线检查: its prompt has {len(rows[2]['messages'][0]['content']):,} "
                                f"characters")
    stage_a = stage_a_folder(tmp_path / "sa", n=4)
    path = stage_a / f"{M}_stage_a.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    big = json.loads(lines[2])
    big["per_image"]["图片_1"] = "接地线×1/已捆扎" * 700_000   # ~15 MB
    path.write_text("\n".join(lines[:2] + [json.dumps(big, ensure_ascii=False)] + lines[3:]) + "\n", encoding="utf-8")
    result = _evaluate("--model", str(tiny_qwen2_5_vl), "--stage_a_dir", str(stage_a), "--split", "all",
                       "--max_new_tokens", "4", "--output_dir", str(tmp_path / "o"), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "not judged, counted wrong: group QC-EV-20250101-2 of BBU接地线检查: its prompt has" in result.stderr
    predictions = [json.loads(line) for line in (tmp_path / "o" / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 4 and [bool(p.get("error")) for p in predictions] == [False, False, True, False]
    assert "1 group(s) could not be put to the model" in (tmp_path / "o" / "report.md").read_text(encoding="utf-8")


def test_training_plot_draws_one_curve_per_mission_and_marks_the_best_step(tmp_path):
    from stage_b.pages.plot_training import find_log, plot, read_steps
    run = tmp_path / "run" / "v0-20260101-000000"
    run.mkdir(parents=True)
    other = "挡风板安装检查"
    rows = [{"reward": 0.5, "rewards/qc_label/mean": 0.5, f"qc/label_reward/{M}": 0.1 * s,
             f"qc/zero_advantage/{M}": 0.0, f"qc/label_reward/{other}": 0.5,
             "global_step/max_steps": f"{s}/4"} for s in range(1, 5)]
    rows.insert(2, {"eval_qc_val/balanced_accuracy": 0.7, f"eval_qc_val/balanced_accuracy/{M}": 0.6,
                    "global_step/max_steps": "2/4"})
    (run / "logging.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                                      encoding="utf-8")
    steps, evals = read_steps(find_log(tmp_path / "run"))
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and [e["step"] for e in evals] == [2]
    names, drawn = plot(steps, tmp_path / "t.png", "t", evals, best_step=2)
    assert set(names) == {M, other}   # named, or numbered M1... without a CJK font
    assert drawn["label reward\nper mission"] == [names[M], names[other]]   # one curve per mission
    assert drawn["zero-advantage share\nper mission"] == [names[M]]
    assert drawn["validation balanced\naccuracy per mission"] == [names[M], "overall"]
    assert (tmp_path / "t.png").stat().st_size > 1000


# ---------------------------------------------------------------- other tools' result files (issue 16, item 4)
def _val_rows(tmp_path, n=6):
    """Real group_qc rows, as the plugin's dataset builds them (messages, solution, mission, group_id, summaries)."""
    from stage_b.data.dataset import build_rows
    from stage_b.data.settings import Selection
    return build_rows(Selection(stage_a_dir=str(stage_a_folder(tmp_path / "sa", n=n))), "all")[0]


def swift_infer_results(rows, completions):
    """What `swift infer --val_dataset group_qc_val --result_path F` writes per row (ms-swift 4.6,
    swift/pipelines/infer/infer.py `_batch_infer`): the reply appended to messages, then {'response', 'labels'
    (the removed assistant turn: none in these rows), 'logprobs', **row}; the loader adds the `dataset` column."""
    out = []
    for row, text in zip(rows, completions):
        data = {**json.loads(json.dumps(row, ensure_ascii=False)), "dataset": "group_qc_val"}
        data["messages"].append({"role": "assistant", "content": text})
        out.append({"response": text, "labels": None, "logprobs": None, **data})
    return out


def _chat_completion(text):
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "Qwen2.5-VL-7B-Instruct",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": None}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 12, "total_tokens": 212}}


def _main_rescore(path, out):
    from stage_b.evaluate import main
    assert main(["--predictions", str(path), "--output_dir", str(out), "--no_review"]) == 0
    return (json.loads((out / "metrics.json").read_text(encoding="utf-8")),
            (out / "report.md").read_text(encoding="utf-8"), (out / "predictions.jsonl").read_text(encoding="utf-8"))


@pytest.mark.parametrize("shape, written_by", [
    ("swift_infer", "ms-swift infer results"),
    ("openai_under_response", "OpenAI chat completions (swift deploy)"),
    ("openai_merged", "OpenAI chat completions (swift deploy)"),
])
def test_other_tools_results_rescore_to_the_same_metrics_and_say_which_tool(tmp_path, shape, written_by):
    rows = _val_rows(tmp_path)
    completions = [COMPLETIONS[i % 3] for i in range(len(rows))]
    write_predictions(tmp_path / "ours.jsonl", predictions_from_rows(rows, completions))
    if shape == "swift_infer":
        theirs = swift_infer_results(rows, completions)
    elif shape == "openai_under_response":
        theirs = [{**r, "response": _chat_completion(c)} for r, c in zip(rows, completions)]
    else:
        theirs = [{**r, **_chat_completion(c)} for r, c in zip(rows, completions)]
    write_predictions(tmp_path / "theirs.jsonl", theirs)
    ours_metrics, ours_report, ours_preds = _main_rescore(tmp_path / "ours.jsonl", tmp_path / "o1")
    metrics, report, preds = _main_rescore(tmp_path / "theirs.jsonl", tmp_path / "o2")
    assert metrics.pop("rescored") == {"file": str(tmp_path / "theirs.jsonl"), "format": written_by}
    assert ours_metrics.pop("rescored")["format"] == "group-qc predictions"
    assert (metrics.pop("written_in"), ours_metrics.pop("written_in")) == (str(tmp_path / "o2"), str(tmp_path / "o1"))
    assert metrics == ours_metrics and preds == ours_preds and metrics["overall"]["n"] == len(rows)
    assert f"# Verdict evaluation: re-scored {written_by} {tmp_path / 'theirs.jsonl'}" in report
    assert f"# Verdict evaluation: re-scored {tmp_path / 'ours.jsonl'}" in ours_report


def test_a_swift_infer_result_without_what_is_needed_is_refused_naming_the_line(tmp_path, capsys):
    rows = _val_rows(tmp_path, n=3)
    results = swift_infer_results(rows, COMPLETIONS)
    del results[1]["solution"]
    write_predictions(tmp_path / "r.jsonl", results)
    with pytest.raises(EvaluationError, match=r"r.jsonl:2: ms-swift infer results record without solution; .*"
                                              r"--val_dataset group_qc_val"):
        read_predictions(tmp_path / "r.jsonl")
    from stage_b.evaluate import main
    assert main(["--predictions", str(tmp_path / "r.jsonl"), "--output_dir", str(tmp_path / "o")]) == 2
    assert "r.jsonl:2: ms-swift infer results record without solution" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()   # refused before anything is written
    results = swift_infer_results(rows, COMPLETIONS)
    results[2]["response"] = None
    write_predictions(tmp_path / "r.jsonl", results)
    with pytest.raises(EvaluationError, match=r"r.jsonl:3: no reply text in this ms-swift infer results record"):
        read_predictions(tmp_path / "r.jsonl")


def test_a_file_mixing_formats_is_refused(tmp_path):
    rows = _val_rows(tmp_path, n=3)
    ours = predictions_from_rows(rows, COMPLETIONS)
    write_predictions(tmp_path / "m.jsonl", ours[:2] + swift_infer_results(rows[2:], COMPLETIONS[2:]))
    with pytest.raises(EvaluationError, match=r"m.jsonl:3: a record of ms-swift infer results, but line 1 is "
                                              r"group-qc predictions: a file mixing formats"):
        read_predictions(tmp_path / "m.jsonl")
    write_predictions(tmp_path / "m.jsonl", swift_infer_results(rows, COMPLETIONS)[:1] + ours[1:])
    with pytest.raises(EvaluationError, match=r"m.jsonl:2: a record of group-qc predictions, but line 1 is "
                                              r"ms-swift infer results"):
        read_predictions(tmp_path / "m.jsonl")


def test_swift_infer_run_twice_into_one_file_and_swift_deploy_logs_are_explained(tmp_path):
    rows = _val_rows(tmp_path, n=3)
    write_predictions(tmp_path / "r.jsonl", swift_infer_results(rows, COMPLETIONS) * 2)   # --result_path appends
    with pytest.raises(EvaluationError, match=r"r.jsonl:4: group .* already at line 1; .*swift infer appends to an "
                                              r"existing --result_path"):
        read_predictions(tmp_path / "r.jsonl")
    # swift deploy --result_path logs {'response', 'infer_request', 'generation_config'}: no group, no verdict
    write_predictions(tmp_path / "d.jsonl", [{"response": c, "infer_request": {"messages": r["messages"]},
                                              "generation_config": {}} for r, c in zip(rows, COMPLETIONS)])
    with pytest.raises(EvaluationError, match=r"d.jsonl:1: .*swift deploy's --result_path log has no group id"):
        read_predictions(tmp_path / "d.jsonl")


@pytest.mark.slow
def test_real_swift_infer_results_are_rescored(tiny_qwen2_5_vl, tmp_path):
    """`swift infer` with the plugin on group_qc_val, as a user runs it, then evaluate --predictions on its file."""
    from stage_b.data.dataset import build_rows
    from stage_b.data.settings import Selection
    stage_a = stage_a_folder(tmp_path / "sa", n=8)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GROUP_QC_")}, "HF_HUB_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": "", "GROUP_QC_STAGE_A_DIR": str(stage_a), "GROUP_QC_VAL_RATIO": "0.5"}
    result_path = tmp_path / "infer" / "result.jsonl"
    infer = subprocess.run([str(Path(sys.executable).parent / "swift"), "infer", "--model", str(tiny_qwen2_5_vl),
                            "--model_type", "qwen2_5_vl", "--template", "qwen2_5_vl",
                            "--external_plugins", "swift_plugins/qc_plugin.py", "--val_dataset", "group_qc_val",
                            "--infer_backend", "transformers", "--max_new_tokens", "8",
                            "--result_path", str(result_path)],
                           cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert infer.returncode == 0, infer.stderr[-3000:]
    lines = [json.loads(line) for line in result_path.read_text(encoding="utf-8").splitlines()]
    val = build_rows(Selection(stage_a_dir=str(stage_a), val_ratio=0.5), "val")[0]
    assert lines and [r["group_id"] for r in lines] == [r["group_id"] for r in val]
    assert {"response", "labels", "messages", "solution", "group_id", "mission", "summaries"} <= set(lines[0])
    metrics, report, preds = _main_rescore(result_path, tmp_path / "o")
    assert metrics["rescored"]["format"] == "ms-swift infer results" and metrics["overall"]["n"] == len(val)
    assert "re-scored ms-swift infer results" in report
    scored = [json.loads(line) for line in preds.splitlines()]
    assert [(p["group_id"], p["expected"], p["completion"]) for p in scored] == \
        [(r["group_id"], r["solution"], r["response"]) for r in lines]


def test_an_evaluation_computes_each_rule_once_and_carries_it_to_the_report_and_page(tmp_path, monkeypatch):
    """Issue 38: data flows one way. Writing an evaluation grounds each reply once (the metrics and the page's cards
    share it), collects the (p_fail, expected) points once (the curve, its table and the reliability diagram share
    them), and the report renders the curve table's thresholds it is given rather than running the rule again."""
    import stage_b.pages.cards
    import stage_b.evaluate.outputs as outputs
    import stage_b.evaluate.report
    import stage_b.stats.metrics
    calls = {"ground": 0, "points_of": 0, "pick_threshold": 0}

    def counted(module, name):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)
    for module in (outputs, stage_b.pages.cards, stage_b.stats.metrics):
        counted(module, "ground")
    counted(outputs, "points_of")
    import stage_b.stats.thresholds
    counted(stage_b.stats.thresholds, "pick_threshold")
    preds = predictions_from_rows(ROWS, COMPLETIONS, p_fails=[0.9, 0.2, 0.6])
    outputs.write_outputs(tmp_path, preds, [M], "once", review={"records": {}, "input_dirs": [], "all": True})
    assert calls["ground"] == len(preds) and calls["points_of"] == 1
    assert calls["pick_threshold"] == 2 * len(stage_b.evaluate.report.CURVE_TARGETS)   # the mission's row and pooled
    assert "t=" in (tmp_path / "report.md").read_text(encoding="utf-8")


# hostile input (issue 34)
def test_metrics_beside_predictions_without_a_split_is_an_error_not_a_traceback(tmp_path):
    import subprocess
    import sys
    (tmp_path / "p").mkdir()
    write_jsonl_atomic(tmp_path / "p" / "predictions.jsonl", [
        {"group_id": "g", "mission": M, "expected": "通过", "completion": "通过\n理由: x", "p_fail": 0.1,
         "summaries": ["s"]}])
    (tmp_path / "p" / "metrics.json").write_text(json.dumps({"data": {"mode": "x"}, "checkpoints": {}}),
                                                 encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "group_qc", "evaluate", "--predictions",
                             str(tmp_path / "p" / "predictions.jsonl"), "--output_dir", str(tmp_path / "o")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "has no data.split" in result.stderr and "Traceback" not in result.stderr


# planted-bug test (issue 27, class 5): evaluation pairs p_fail with its group
@pytest.mark.usefixtures("no_group_qc_environment")
def test_each_prediction_carries_its_own_groups_p_fail(tmp_path, engine, model):
    """Silent bug: evaluation giving each prediction the previous row's p_fail (an off-by-one between the rows and
    the p_fail list, in verdict_probabilities or predictions_from_rows). The only earlier check compared p_fail
    with an absolute tolerance of 1e-5, and the tiny model's values all sit near 1.5e-6. Here every group's p_fail
    differs from every other's by 0.02 or more, one work order is in both missions, and each prediction, the curve's
    points and the verdicts must carry the value of their own (mission, group)."""
    ids = [f"QC-PF-20250101-{k}" for k in range(10)]
    stage_a = write_stage_a_groups(tmp_path / "sa", {m: [(g, "fail" if k % 2 else "pass") for k, g in enumerate(ids)]
                                              for m in (A, B)})
    for m_index, m in enumerate((A, B)):
        for k, gid in enumerate(ids):
            engine.P_FAIL[(m, gid)] = 0.04 + 0.09 * k + 0.02 * m_index
    out = tmp_path / "out"
    assert evaluate.main(["--model", str(model), "--stage_a_dir", str(stage_a), "--split", "all", "--no_review",
                          "--output_dir", str(out)]) == 0
    predictions = jsonl_records(out / "predictions.jsonl")
    assert len(predictions) == 20 and len({(p["mission"], p["group_id"]) for p in predictions}) == 20
    for p in predictions:
        own = engine.P_FAIL[(p["mission"], p["group_id"])]
        assert p["p_fail"] == pytest.approx(own, abs=1e-9), (p["mission"], p["group_id"], p["p_fail"], own)
        assert p["predicted"] == (FAIL if own >= 0.5 else PASS)
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    for m in (A, B):
        expected = sorted((engine.P_FAIL[(m, g)], FAIL if k % 2 else PASS) for k, g in enumerate(ids))
        got = sorted(tuple(pt) for pt in metrics["operating_curve"]["points"][m])
        assert [e for _, e in got] == [e for _, e in expected]
        assert [p for p, _ in got] == pytest.approx([p for p, _ in expected], abs=1e-9)
