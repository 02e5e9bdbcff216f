"""group_qc_dev.stage_split: Stage-A's time split stage by stage without the profiler. On CPU the clock is
perf_counter standing in for CUDA events; the same hooks time both architectures' real modules, and gpu_check's
optional `split` step writes the result into gpu_check.json (what a GPU session runs: --steps split)."""
from __future__ import annotations

import json
import time

import pytest
import torch

from group_qc_dev.stage_split import STAGES, StageClock, StageTimer, split_of


class Tower(torch.nn.Module):
    """Stands in for a model's modules: a parent whose forward calls two children (the hooks' nesting)."""

    def __init__(self):
        super().__init__()
        self.embed, self.block = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

    def forward(self, x):
        time.sleep(0.002)   # host work between the children: the parent's own part
        return self.block(self.embed(x))


def test_each_hooked_module_gets_one_span_per_call_and_a_parent_holds_its_children():
    tower = Tower()
    timer = StageTimer(StageClock(cuda=False))
    timer.watch(tower, "tower")
    timer.watch(tower.embed, "patch_embed")
    timer.watch(tower.block, lambda args, kwargs: "full_blocks")
    for _ in range(3):
        tower(torch.ones(1, 2))
    timer.add_host("host_encode", 0.5)
    spans = timer.spans_ms()
    assert {k: len(v) for k, v in spans.items()} == {"tower": 3, "patch_embed": 3, "full_blocks": 3, "host_encode": 1}
    assert all(t >= 0 for v in spans.values() for t in v) and spans["host_encode"] == [500.0]
    assert sum(spans["tower"]) >= sum(spans["patch_embed"]) + sum(spans["full_blocks"]) + 3 * 2.0
    timer.remove()
    tower(torch.ones(1, 2))
    assert {k: len(v) for k, v in timer.spans_ms().items()}["tower"] == 3   # removed: nothing more recorded


def test_the_split_adds_up_to_the_wall():
    spans = {"host_encode": [4.0], "tower": [30.0], "patch_embed": [5.0], "window_blocks": [6.0, 6.0],
             "full_blocks": [4.0], "merger": [1.0], "prefill": [20.0], "decode": [3.0, 3.0, 3.0], "lm_head": [2.0]}
    split = split_of(spans, wall_ms=100.0, photos=4)
    assert split["stages"]["tower_other"]["ms"] == 8.0            # the tower minus its timed children
    assert split["covered_ms"] == 4 + 30 + 20 + 9 + 2 and split["not_covered_ms"] == 100 - 65
    assert split["decode_steps"] == 3 and split["ms_per_decode_step"] == 3.0
    assert split["stages"]["prefill"]["ms_per_photo"] == 5.0 and split["stages"]["window_blocks"]["calls"] == 2
    assert list(split["stages"]) == list(STAGES)


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_each_stage_watches_the_modules_it_names(arch):
    """On the real architectures (built on the meta device: no weights): the window and the full-attention blocks are
    the config's, the merger includes Qwen3-VL's deepstack mergers. Planted: window and full blocks swapped."""
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration

    from group_qc_dev.stage_split import tower_parts
    from group_qc_dev.tiny_model import build_config
    config = build_config(arch, layers=2, hidden=64, vision_depth=4, vision_hidden=32)
    cls = {"qwen2_5_vl": Qwen2_5_VLForConditionalGeneration, "qwen3_vl": Qwen3VLForConditionalGeneration}[arch]
    with torch.device("meta"):
        model = cls(config)
    visual = model.model.visual
    full = list(getattr(config.vision_config, "fullatt_block_indexes", None) or range(4))
    parts = tower_parts(model)
    assert parts["full_blocks"] == [visual.blocks[k] for k in full]
    assert parts["window_blocks"] == [visual.blocks[k] for k in range(4) if k not in full]
    assert len(parts["merger"]) == 1 + len(getattr(visual, "deepstack_merger_list", None) or [])
    assert parts["language_model"] is model.model.language_model and parts["lm_head"] == [model.lm_head]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_one_stage_a_call_is_split_on_both_architectures(arch, tiny_model_factory, tmp_path):
    from transformers import AutoConfig

    from group_qc_dev.stage_split import main
    model = tiny_model_factory(arch)
    assert main(["--model", str(model), "--batch_sizes", "2", "--max_new_tokens", "3",
                 "--json", str(tmp_path / "split.json")]) == 0
    result = json.loads((tmp_path / "split.json").read_text(encoding="utf-8"))
    assert result["timer"] == "perf_counter (no GPU)" and result["peak_flops"] is None
    (row,) = result["batches"]
    vision = AutoConfig.from_pretrained(str(model)).vision_config
    full = len(getattr(vision, "fullatt_block_indexes", None) or range(vision.depth))
    calls = {s: row["stages"][s]["calls"] for s in ("patch_embed", "window_blocks", "full_blocks", "prefill")}
    assert calls == {"patch_embed": 1, "window_blocks": vision.depth - full, "full_blocks": full, "prefill": 1}
    assert 0 <= row["decode_steps"] <= 2 and row["covered_ms"] <= row["wall_ms"] and row["patches_per_photo"] > 0
    assert all(row["stages"][s]["ms"] > 0 for s in ("host_encode", "patch_embed", "full_blocks", "prefill"))
    assert row["limits_ms"]["prefill"] is None and row["limits_ms"]["decode_step_memory_ms"] is None


@pytest.mark.slow
def test_gpu_check_split_writes_the_split_into_its_json(tmp_path):
    from tests.test_gpu_check import _gpu_check
    out = tmp_path / "check"
    result = _gpu_check("--tiny", "--out", str(out), "--steps", "split", timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    report = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    split = report["split"]
    assert split["status"] == "ok" and [b["batch_size"] for b in split["batches"]] == [2, 4]
    assert "split: ok in" in (out / "gpu_check.log").read_text(encoding="utf-8")
