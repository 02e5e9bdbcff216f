"""Synthetic QC photos and the demo's SFT rows: layout, labels, prompts identical to inference."""
import json
from collections import Counter

from stage_a.discovery import discover_mission, mission_folders
from qc_core.missions import load_registry
from stage_a.prompts import stage_a_messages
from stage_b.data.prompts import VERDICT_REQUEST
from stage_b.contract.verdict import parse
from group_qc_dev import sft_data
from tests.helpers import load_script


def test_generator_layout_labels_and_ground_truth(tmp_path, synthetic):
    truth = synthetic.generate(tmp_path, seed=0, groups_per_label=3)
    registry = load_registry()
    folders = mission_folders(tmp_path, registry, list(registry.missions), strict_unknown=True)
    for mission in registry.missions:
        groups, issues = discover_mission(tmp_path, mission, folders[mission.name], registry)
        assert not issues and Counter(g.label for g in groups) == {"pass": 3, "fail": 3}
        assert all(1 <= len(g.images) <= 6 and g.group_id.startswith("QC-") for g in groups)
    for g in synthetic.groups_of(truth):
        has_defect = any("备注" in s for s in g["summaries"])
        assert has_defect == (g["label"] == "fail"), g["group_id"]  # fail groups carry a defect, pass groups none
    assert synthetic.generate(tmp_path / "again", seed=0, groups_per_label=3) == truth  # same seed, same data


def test_sft_rows_use_the_inference_prompts_and_shuffled_verdicts_keep_their_mix(tmp_path, synthetic):
    synthetic.generate(tmp_path, seed=1, groups_per_label=4)
    sft = sft_data
    a_rows = sft.stage_a_rows(tmp_path)
    truth = [json.loads(line) for line in (tmp_path / "ground_truth.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(a_rows) == len(truth)
    mission = load_registry().resolve(truth[0]["mission"])
    assert a_rows[0]["messages"][:2] == stage_a_messages(mission)
    assert a_rows[0]["messages"][2]["content"] == truth[0]["summary"]
    defects = sum("备注" in t["summary"] for t in truth)
    assert 0 < defects < len(truth) and len(sft.stage_a_rows(tmp_path, defect_repeats=3)) == len(truth) + 2 * defects
    straight = sft.stage_b_rows(tmp_path, verdicts="true", seed=0)
    shuffled = sft.stage_b_rows(tmp_path, verdicts="shuffled", seed=0)
    verdicts = lambda rows: Counter(parse(r["messages"][-1]["content"]).verdict for r in rows)  # noqa: E731
    assert all(parse(r["messages"][-1]["content"]).two_lines for r in straight + shuffled)
    assert verdicts(straight) == verdicts(shuffled)
    by_prompt = lambda rows: {r["messages"][1]["content"]: r["messages"][-1]["content"] for r in rows}  # noqa: E731
    assert by_prompt(straight) != by_prompt(shuffled)


def test_start_point_rows_carry_no_verdict_signal_and_teach_reading(tmp_path, synthetic):
    """--verdicts both --reading: each prompt with each verdict and the same grounded reason, plus one
    reading row per distinct group whose answer names exactly the photos with a 备注 remark."""
    truth = synthetic.generate(tmp_path, seed=2, groups_per_label=3)
    sft = sft_data
    rows = sft.stage_b_rows(tmp_path, verdicts="both", seed=0, reading=True)
    verdict_rows = [r for r in rows if r["messages"][1]["content"].endswith(VERDICT_REQUEST)]
    reading_rows = [r for r in rows if r["messages"][1]["content"].endswith(sft.READING_REQUEST)]
    assert len(verdict_rows) + len(reading_rows) == len(rows)
    assert len(verdict_rows) == 2 * len({t["group_id"] for t in truth})
    replies = {}
    for r in verdict_rows:
        verdict, _, reason = r["messages"][-1]["content"].partition("\n")
        replies.setdefault(r["messages"][1]["content"], []).append((verdict, reason))
    for pairs in replies.values():
        assert Counter(v for v, _ in pairs) == {"通过": len(pairs) // 2, "不通过": len(pairs) // 2}
        assert len({reason for _, reason in pairs}) == 1  # the reason never depends on the verdict
    for r in reading_rows:
        lines = [line for line in r["messages"][1]["content"].splitlines() if line.startswith("图片_")]
        flagged = [line.split(":")[0] for line in lines if "备注" in line]
        assert r["messages"][-1]["content"] == ("有：" + "、".join(flagged) if flagged else "无")
    assert {r["messages"][-1]["content"] == "无" for r in reading_rows} == {True, False}


def test_a_defect_status_never_ends_the_way_its_remark_does(tmp_path, synthetic):
    """After the status, a summary goes on to " 备注：…" or ends. When the status and the remark end
    with the same characters ("…/未捆扎 备注：…散乱未捆扎"), the tiny model had to look back past them
    to choose, and stopped after the status on every defect photo (measured in the demo)."""
    truth = synthetic.generate(tmp_path, seed=0, groups_per_label=6)
    defects = {t["summary"] for t in truth if " 备注：" in t["summary"]}
    assert len(defects) >= 4
    for summary in defects:
        status = summary.split(" 备注：")[0]
        assert status[-2:] != summary[-2:], summary


def test_vision_probe_reports_each_mission(tmp_path, synthetic, tiny_qwen2_5_vl):
    probe = load_script("probe_vision")
    synthetic.generate(tmp_path / "train", seed=0, groups_per_label=3, missions="挡风板安装检查")
    synthetic.generate(tmp_path / "test", seed=1, groups_per_label=2, missions="挡风板安装检查")
    out = tmp_path / "probe.json"
    assert probe.main(["--model", str(tiny_qwen2_5_vl), "--train_photos", str(tmp_path / "train"),
                       "--test_photos", str(tmp_path / "test"), "--pool", "mean", "--json", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert list(result) == ["挡风板安装检查"]
    assert 0.0 <= result["挡风板安装检查"]["test_accuracy"] <= 1.0 and result["挡风板安装检查"]["test_photos"] > 0
