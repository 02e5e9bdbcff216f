"""group_qc_dev/tiny_model.py: real token ids, valid configs, determinism, and ms-swift running it offline."""
from __future__ import annotations

import json
import random
import re
import unicodedata
from pathlib import Path

import pytest

from group_qc_dev import tiny_model as make

REPO = Path(__file__).resolve().parent.parent
ARCHS = ("qwen2_5_vl", "qwen3_vl")


# ---------------------------------------------------------------- fast: pure helpers and argument checks
def test_mrope_sections_match_the_real_models():
    assert make._mrope_section("qwen2_5_vl", 128) == [16, 24, 24]
    assert make._mrope_section("qwen3_vl", 128) == [24, 20, 20]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("head_dim", [8, 12, 16, 32, 64, 128])
def test_mrope_section_fits_head_dim(arch, head_dim):
    t, h, w = make._mrope_section(arch, head_dim)
    half = head_dim // 2
    assert t + h + w == half and min(t, h, w) >= 1
    if arch == "qwen3_vl":  # interleaved: h on 1, 4, 7, ...; w on 2, 5, 8, ... all inside half
        assert 3 * (h - 1) + 1 < half and 3 * (w - 1) + 2 < half


def test_deepstack_indexes():
    assert make._deepstack_indexes(24) == [5, 11, 17]  # Qwen3-VL-2B/4B
    assert make._deepstack_indexes(27) == [6, 13, 19]
    for depth in range(1, 12):
        idx = make._deepstack_indexes(depth)
        assert idx == sorted(set(idx)) and all(0 <= i < depth for i in idx)


def test_refuses_non_empty_out(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        make.build_tiny_model("qwen3_vl", tmp_path)
    assert make.main(["--arch", "qwen3_vl", "--out", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "x"


@pytest.mark.parametrize("kwargs", [dict(arch="llava"), dict(hidden=40), dict(hidden=16), dict(vision_hidden=24),
                                    dict(layers=0)])
def test_rejects_bad_sizes(tmp_path, kwargs):
    kwargs = {"arch": "qwen2_5_vl", **kwargs}
    with pytest.raises(ValueError):
        make.build_tiny_model(out=tmp_path / "m", **kwargs)
    assert not (tmp_path / "m").exists()


def test_cli_help_documents_every_flag(capsys):
    with pytest.raises(SystemExit) as e:
        make.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ["--arch", "--out", "--layers", "--hidden", "--vision_depth", "--vision_hidden", "--init_std",
                 "--seed", "--force"]:
        assert flag in out


def test_old_dashed_flags_still_work_with_a_note(capsys):
    from group_qc_dev import underscored
    assert underscored(["--groups-per-label", "3", "--init-std=0.2", "--out", "a-b"]) == \
        ["--groups_per_label", "3", "--init_std=0.2", "--out", "a-b"]
    assert "--groups-per-label is deprecated; use --groups_per_label" in capsys.readouterr().err


# ---------------------------------------------------------------- slow: build checkpoints (~15 s each)
@pytest.fixture(scope="module")
def built(tiny_model_factory):
    return {arch: tiny_model_factory(arch) for arch in ARCHS}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoint_layout_and_config(built, arch):
    out = built[arch]
    for name in ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json", "chat_template.jinja", "processor_config.json",
                 "preprocessor_config.json", "video_preprocessor_config.json"]:
        assert (out / name).is_file(), name
    cfg = json.loads((out / "config.json").read_text())
    text, vision = cfg["text_config"], cfg["vision_config"]
    assert cfg["model_type"] == arch and cfg["dtype"] == text["dtype"] == "float32"
    assert cfg["tie_word_embeddings"] and text["vocab_size"] == 151936
    assert (cfg["image_token_id"], cfg["video_token_id"]) == (151655, 151656)
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    assert sum(text["rope_parameters"]["mrope_section"]) == head_dim // 2
    assert vision["out_hidden_size"] == text["hidden_size"] and vision["spatial_merge_size"] == 2
    assert vision["patch_size"] == (14 if arch == "qwen2_5_vl" else 16) and vision["temporal_patch_size"] == 2
    if arch == "qwen3_vl":
        assert text["rope_parameters"]["mrope_interleaved"] is True
        assert all(0 <= i < vision["depth"] for i in vision["deepstack_visual_indexes"])
    else:
        assert all(0 <= i < vision["depth"] for i in vision["fullatt_block_indexes"])
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [151645, 151643] and gen["pad_token_id"] == 151643 and not gen["do_sample"]
    for name in ["preprocessor_config.json", "video_preprocessor_config.json"]:
        pre = json.loads((out / name).read_text())
        assert (pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"]) == (vision["patch_size"], 2, 2)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_saved_processor_loads_with_real_ids(built, arch):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(built[arch])
    assert type(processor).__name__ == ("Qwen2_5_VLProcessor" if arch == "qwen2_5_vl" else "Qwen3VLProcessor")
    tok = processor.tokenizer
    make.check_tokenizer(tok, arch)  # every added id, eos/pad, Chinese round trip
    assert tok.convert_tokens_to_ids("<|image_pad|>") == 151655 == processor.image_token_id
    s = "请判断：接地线是否按规范安装？答案只能是“通过”或“不通过”。"
    assert tok.decode(tok.encode(s)) == s
    assert processor.image_processor.patch_size == (14 if arch == "qwen2_5_vl" else 16)


@pytest.mark.slow
def test_tokenizer_matches_tiktoken_bpe(built):
    """The converted tokenizer.json gives the same ids as tiktoken on the same BPE ranks."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from transformers import AutoTokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    enc = tiktoken.Encoding("qwen", pat_str=PRETOKENIZE_REGEX,
                            mergeable_ranks=load_tiktoken_bpe(str(make._tiktoken_file())), special_tokens={})
    tok = AutoTokenizer.from_pretrained(built["qwen2_5_vl"])
    rng = random.Random(0)
    alphabet = ([chr(c) for c in range(32, 127)] + [chr(0x4E00 + i) for i in range(400)]
                + list("，。！？：；“”（）　\n\t  éüßñ😀"))
    texts = [Path(__file__).read_text(), (REPO / "group_qc_dev" / "tiny_model.py").read_text()]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(300)]
    for text in texts:
        text = unicodedata.normalize("NFC", text)  # the HF tokenizer NFC-normalizes, tiktoken does not
        for added in tok.get_added_vocab():  # atomic in HF (<|im_end|>, <think>, ...), plain text in tiktoken
            text = text.replace(added, "")
        assert tok.encode(text, add_special_tokens=False) == enc.encode_ordinary(text), text[:60]


@pytest.mark.slow
def test_same_seed_same_weights(built, tmp_path):
    again = make.build_tiny_model("qwen3_vl", tmp_path / "again")  # same defaults as the fixture
    assert (again / "model.safetensors").read_bytes() == (built["qwen3_vl"] / "model.safetensors").read_bytes()


# ---------------------------------------------------------------- slow: ms-swift loads and runs it
@pytest.fixture(scope="module")
def images(tmp_path_factory):
    import numpy as np
    from PIL import Image

    folder = tmp_path_factory.mktemp("tiny-model-images")
    rng = np.random.default_rng(0)
    paths = []
    for w, h in [(64, 48), (160, 120), (300, 200), (90, 250)]:
        arr = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / f"{w}x{h}.jpg")
        paths.append(str(folder / f"{w}x{h}.jpg"))
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_swift_greedy_batched_equals_unbatched(built, images, arch):
    from PIL import Image
    from swift.infer_engine import InferRequest, RequestConfig, TransformersEngine

    engine = TransformersEngine(str(built[arch]), model_type=arch, template_type=arch, max_batch_size=4)
    prompts = ["描述这张图片", "图中有什么？", "Describe the image.", "接地线是否规范？"]

    def requests(as_pil=False):
        reqs = [InferRequest(messages=[{"role": "user", "content": "<image>" + q}],
                             images=[Image.open(p) if as_pil else p]) for p, q in zip(images, prompts)]
        return reqs + [InferRequest(messages=[{"role": "user", "content": "你好"}])]  # text-only in the batch

    config = RequestConfig(max_tokens=12, temperature=0)
    batched = [r.choices[0].message.content for r in engine.infer(requests(), config)]
    engine.max_batch_size = 1
    single = [r.choices[0].message.content for r in engine.infer(requests(), config)]
    pil = [r.choices[0].message.content for r in engine.infer(requests(as_pil=True), config)]
    assert all(batched) and batched == single == pil
    assert len(set(batched)) > 1  # the random model does depend on its input

    # The checkpoint's own chat template renders what ms-swift's template encodes.
    tok = engine.template.tokenizer
    encoded = engine.template.encode(InferRequest(messages=[{"role": "user", "content": "<image>图中有什么？"}],
                                                  images=[images[0]]))
    rendered = re.sub(r"(<\|image_pad\|>)+", "<|image_pad|>", tok.decode(encoded["input_ids"]))
    hf = tok.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text",
                                                                                   "text": "图中有什么？"}]}],
                                 tokenize=False, add_generation_prompt=True)
    assert rendered == hf
