"""HostStopWords stops exactly where ms-swift's StopWordsCriteria stops, with one device-to-host copy per decode
step instead of about two per row (stage_a/stopping.py; issue 24: the decode step grew 60 -> 93 ms from batch 8 to
16 on an H200).

Both criteria are driven step by step over the same token rows with the real Qwen tokenizer, then the real engine
generates with a stop word that hits, through our calls and bare ms-swift's."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

from group_qc_dev.count_ops import HOST_READS  # noqa: E402
from stage_a.stopping import HostStopWords, use_host_stop_words  # noqa: E402


class RoundTrips(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += getattr(func, "__name__", "") in HOST_READS
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def tokenizer(tiny_qwen2_5_vl):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(tiny_qwen2_5_vl))


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def drive(criterion_class, tokenizer, prompt: list[list[int]], replies: list[list[int]],
          stop_words) -> list[list[bool]]:
    """Feed the replies one token per step after the prompts (one row each, equal lengths, as left padding makes
    them), as generate does; the criterion's answer at every step."""
    from swift.template.utils import StopWordsCriteria
    criterion = criterion_class(tokenizer, stop_words) if criterion_class is not StopWordsCriteria else \
        StopWordsCriteria(tokenizer, stop_words)
    steps = max(map(len, replies))
    pad = ids(tokenizer, "的")[0]   # a row that ran out of reply goes on with an ordinary token
    rows = [r + [pad] * (steps - len(r)) for r in replies]
    out = []
    for n in range(1, steps + 1):
        input_ids = torch.tensor([p + r[:n] for p, r in zip(prompt, rows)])
        out.append(criterion(input_ids, None).tolist())
    return out


IM_END, EOT = "<|im_end|>", "<|endoftext|>"
CASES = {
    # name: (replies as text pieces (each piece encoded on its own, so a stop string can be spelled in pieces),
    #        extra stop words)
    "the end token in one row, not the other": (
        [["接地线", "已捆扎", IM_END, "多余"], ["机柜", "正装", "无异常", "。"]], []),
    "the stop string spelled by ordinary pieces": ([["<|", "im", "_end", "|>", "后面"], ["正常", "。"]], []),
    # each piece is one token: a stop word as long as the window is seen, one token longer never is
    "a stop word 20 tokens long is seen": ([["x"] + ["，"] * 20 + ["尾"], ["a"] * 22], ["，" * 20]),
    "a stop word 21 tokens long is never seen (the window is 20)": ([["x"] + ["，"] * 21 + ["尾"], ["a"] * 23],
                                                                  ["，" * 21]),
    "a text stop word of the request": ([["接地线", "已捆扎", "；", "接地排"], ["接地", "线", "松动"]], ["已捆扎"]),
    "a token stop word that begins in the prompt": ([["排", "后"], ["线", "后"]], [[None, "排"]]),
    "every row stops, at different steps": ([[EOT, "x", "y"], ["x", EOT, "y"], ["x", "y", EOT]], []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_host_stop_words_stops_where_ms_swift_stops(tokenizer, name):
    from swift.template.utils import StopWordsCriteria
    pieces, extra = CASES[name]
    prompt_tail = ids(tokenizer, "接地")
    stop_words = [IM_END, EOT] + [([prompt_tail[-1]] + ids(tokenizer, w[1])) if isinstance(w, list) else w
                                  for w in extra]
    replies = [[t for piece in row for t in ids(tokenizer, piece)] for row in pieces]
    prompt = [[tokenizer.pad_token_id] * 2 + ids(tokenizer, "系统提示") + prompt_tail for _ in replies]
    theirs = drive(StopWordsCriteria, tokenizer, prompt, replies, stop_words)
    ours = drive(HostStopWords, tokenizer, prompt, replies, stop_words)
    assert ours == theirs
    assert any(any(step) for step in theirs) or "never" in name   # each case but one does stop somewhere


@pytest.mark.parametrize("batch", [4, 16])
def test_one_host_round_trip_down_and_one_up_per_step_whatever_the_batch(tokenizer, batch):
    from swift.template.utils import StopWordsCriteria
    counts = {}
    for criterion in (StopWordsCriteria(tokenizer, [IM_END, EOT]), HostStopWords(tokenizer, [IM_END, EOT])):
        input_ids = torch.tensor([ids(tokenizer, "系统提示接地线已捆扎")] * batch)
        criterion(input_ids, None)   # the first step sets the state up
        step = torch.cat([input_ids, input_ids[:, -1:]], dim=1)
        with RoundTrips() as trips:
            criterion(step, None)
        counts[type(criterion).__name__] = trips.count
    assert counts["HostStopWords"] == 2
    assert counts["StopWordsCriteria"] >= 2 * batch   # what it replaces: a read and a write per row


def test_engine_calls_stop_where_bare_ms_swift_stops(tiny_qwen2_5_vl):
    """Our engine calls (HostStopWords) and bare engine.infer (ms-swift's criterion) on the same photos with a stop
    word taken from the model's own replies: the same texts and finish reasons, shorter than without the stop."""
    from PIL import Image

    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages

    engine = SwiftSummaryEngine(resolve_model(str(tiny_qwen2_5_vl)), batch_size=4, max_new_tokens=12)
    messages = stage_a_messages(load_registry().resolve("BBU接地线检查"))
    images = [Image.new("RGB", (56 + 28 * k, 56), (40 * k, 90, 160)) for k in range(4)]
    free = [s.text for s in engine.summarize([(messages, im) for im in images])]
    stop = free[0][3:5]   # two characters from inside a reply: the stop must hit mid-reply
    engine.request_config.stop = [stop]
    calls = []
    before = HostStopWords.__call__
    HostStopWords.__call__ = lambda self, *a, **k: calls.append(1) or before(self, *a, **k)
    try:
        ours = engine.summarize([(messages, im) for im in images])
    finally:
        HostStopWords.__call__ = before
    from swift.infer_engine import InferRequest
    bare = engine.engine.infer([InferRequest(messages=messages, images=[im]) for im in images],
                               engine.request_config, use_tqdm=False)
    assert calls, "our calls did not use HostStopWords"
    assert [s.text for s in ours] == [r.choices[0].message.content for r in bare]
    assert [s.finish_reason for s in ours] == [r.choices[0].finish_reason for r in bare]
    assert len(ours[0].text) < len(free[0]) and stop in ours[0].text


def test_installed_once_and_only_when_asked(tiny_qwen2_5_vl):
    class Template:
        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

        def prepare_generate_kwargs(self, generate_kwargs, *, model=None):
            from swift.template.utils import StopWordsCriteria
            generate_kwargs["stopping_criteria"] = [StopWordsCriteria(self.tokenizer, [EOT])]
            return generate_kwargs

    from transformers import AutoTokenizer
    template = Template(AutoTokenizer.from_pretrained(str(tiny_qwen2_5_vl)))
    active = {"on": False}
    use_host_stop_words(template, when=lambda: active["on"])
    wrapped = template.prepare_generate_kwargs
    use_host_stop_words(template)
    assert template.prepare_generate_kwargs is wrapped   # not wrapped twice
    assert type(template.prepare_generate_kwargs({})["stopping_criteria"][0]).__name__ == "StopWordsCriteria"
    active["on"] = True
    assert type(template.prepare_generate_kwargs({})["stopping_criteria"][0]) is HostStopWords
