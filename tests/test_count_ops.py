"""group_qc_dev.count_ops counts the host's work in a Stage-A batch (the number a GPU's launch-bound time follows):
the counts do not depend on the model's widths (so a preset's skeleton stands for the real size), the vision tower's
attention calls are the windows transformers cuts the photos into, bare, and one per window length with our
changes; our stop test reads the device a fixed number of times per decode step where ms-swift's reads it per row;
the language model's ops are untouched by our changes.

Photos: the synthetic generator's 224x168 drawings at twice the size, 448x336 = 32x24 patches of 14 px; Qwen2.5-VL's
112-px windows are 8x8 patches, so each photo is 4 x 3 = 12 windows of 64 patches, all one length."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from group_qc_dev.count_ops import count  # noqa: E402

pytestmark = pytest.mark.slow

WINDOWS_PER_PHOTO = 12
# Qwen2.5-VL skeleton: 8 vision blocks (blocks 0-6 attend in windows, block 7 the whole photo), 2 language layers
QWEN2_5_VL = dict(arch="qwen2_5_vl", layers=2, vision_depth=8)
WINDOWED_BLOCKS, FULL_BLOCKS = 7, 1


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
    """count() for the Qwen2.5-VL skeleton at two widths and two batch sizes, and for a Qwen3-VL one."""
    from group_qc_dev.tiny_model import build_tiny_model
    root = tmp_path_factory.mktemp("count-ops")
    narrow = build_tiny_model(out=root / "narrow", **QWEN2_5_VL)
    wide = build_tiny_model(out=root / "wide", hidden=128, vision_hidden=64, **QWEN2_5_VL)
    qwen3 = build_tiny_model(out=root / "qwen3", arch="qwen3_vl", layers=2, vision_depth=4)

    def run(model, batch):
        return count(model, batch_size=batch, photo_scale=2, max_pixels=602112, max_new_tokens=4)
    return {"narrow 2": run(narrow, 2), "wide 2": run(wide, 2), "narrow 4": run(narrow, 4), "qwen3 2": run(qwen3, 2)}


def test_counts_do_not_depend_on_the_widths(counts):
    """Equal counts for hidden 64 / vision 32 and hidden 128 / vision 64 at the same depth: a skeleton counts for
    the real-size model."""
    assert counts["narrow 2"]["bare"] == counts["wide 2"]["bare"]
    assert counts["narrow 2"]["ours"] == counts["wide 2"]["ours"]


@pytest.mark.parametrize("case, side, calls_per_photo", [
    # bare: transformers attends each window in its own call, and each photo in the full-attention block
    ("narrow 2", "bare", WINDOWED_BLOCKS * WINDOWS_PER_PHOTO + FULL_BLOCKS),
    ("narrow 4", "bare", WINDOWED_BLOCKS * WINDOWS_PER_PHOTO + FULL_BLOCKS),
    # ours: one call per block for all windows of the batch (one length), one for the equal photos
    ("narrow 2", "ours", (WINDOWED_BLOCKS + FULL_BLOCKS) / 2),
    ("narrow 4", "ours", (WINDOWED_BLOCKS + FULL_BLOCKS) / 4),
    # Qwen3-VL attends whole photos in its 4 blocks: a call per photo per block, bare; equal photos share one
    ("qwen3 2", "bare", 4),
    ("qwen3 2", "ours", 4 / 2),
])
def test_vision_attention_calls_are_the_windows_bare_and_the_window_lengths_ours(counts, case, side, calls_per_photo):
    assert counts[case][side]["vision_attention_calls_per_photo"] == calls_per_photo
    # 32x24 patches of 14 px merged 2x2; Qwen3-VL: 448x320 (multiples of 32), 28x20 patches of 16 px merged 2x2
    assert counts[case]["visual_tokens_first_photo"] == (140 if case.startswith("qwen3") else 192)


@pytest.mark.parametrize("case", ["narrow 2", "narrow 4", "qwen3 2"])
def test_the_language_model_is_untouched_and_the_tower_does_less(counts, case):
    bare, ours = counts[case]["bare"], counts[case]["ours"]
    assert ours["prefill_language_ops_per_call"] == bare["prefill_language_ops_per_call"] > 0
    assert ours["decode_step_language_ops"] == bare["decode_step_language_ops"] > 0
    assert 0 < ours["vision_kernels_per_photo"] < ours["vision_ops_per_photo"]
    if case.startswith("qwen3"):
        # Qwen3-VL's photos are one piece each: at 2 photos gathering them costs about what it saves (count_ops on
        # the qwen3_vl-2b skeleton at batch 16: 149 ops per photo bare, 113 ours)
        assert ours["vision_ops_per_photo"] < 1.2 * bare["vision_ops_per_photo"]
    else:
        assert ours["vision_ops_per_photo"] < bare["vision_ops_per_photo"]


def test_host_reads_per_decode_step_grow_with_the_batch_bare_and_stay_fixed_ours(counts):
    """ms-swift's stop test reads and writes each row's flag (2 per row); ours copies the window down once and the
    flags up once, whatever the batch."""
    bare2, bare4 = counts["narrow 2"]["bare"], counts["narrow 4"]["bare"]
    ours2, ours4 = counts["narrow 2"]["ours"], counts["narrow 4"]["ours"]
    assert bare4["decode_step_host_reads"] - bare2["decode_step_host_reads"] == 2 * (4 - 2)
    assert ours2["decode_step_host_reads"] == ours4["decode_step_host_reads"] < bare2["decode_step_host_reads"]
    assert ours4["decode_step_ops"] < bare4["decode_step_ops"]
    assert bare2["decode_steps"] == ours2["decode_steps"] == 3
