"""ms-swift's stop-word rule at one device-to-host copy per decode step (an adapter: imports torch and swift).

ms-swift's `StopWordsCriteria` (swift/template/utils.py, 4.6) runs after every decode step of a batch: it decodes
the last 20 generated tokens of every row and then, row by row, reads `is_done[i]` from the device and writes it
back, so a batch of B photos pays about 2B host-device round trips per step on top of the model's own; on a GPU
each read waits for the GPU to drain. On the H200 (3B preset, batch 16-128) ours with ms-swift's test in place of this
one ran at 0.84-1.10x, within the run's noise (docs/gpu/h200_gpu_check_engine_changes.json). `HostStopWords` keeps
the rule exactly (same window, same text test, same token-suffix test, done rows stay done) and its state on the
host: one copy of the window down, one small tensor up.
"""
from __future__ import annotations

import torch
from swift.template.utils import StopWordsCriteria

WINDOW = 20   # ms-swift's: "assuming the end tokens do not exceed 20 tokens"


class HostStopWords(StopWordsCriteria):
    """The same stops as ms-swift's StopWordsCriteria; a subclass, so ms-swift's streaming path (which rebuilds
    its own from the stop words) still finds it."""

    # ms-swift's __init__ sets these (-1 and None); the first call fills them, as a host list in place of its tensor
    start_idx: int
    is_done: list[bool]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        length = input_ids.shape[1]
        if self.start_idx == -1:
            self.start_idx = length - 1
            self.is_done = [False] * input_ids.shape[0]
        start = max(self.start_idx, length - WINDOW)
        # A token-list stop word is compared with the row's last tokens, prompt included (as ms-swift does).
        longest = max((len(w) for w in self.stop_words if isinstance(w, list)), default=0)
        first = min(start, max(length - longest, 0))
        tail = input_ids[:, first:].tolist()   # the step's one device-to-host copy
        open_rows = [i for i, done in enumerate(self.is_done) if not done]
        texts = self.tokenizer.batch_decode([tail[i][start - first:] for i in open_rows], **self.tokenizer_kwargs)
        for i, text in zip(open_rows, texts):
            self.is_done[i] = any(isinstance(w, str) and w in text or isinstance(w, list) and tail[i][-len(w):] == w
                                  for w in self.stop_words)
        return torch.tensor(self.is_done, dtype=torch.bool, device=input_ids.device)


def use_host_stop_words(template, when=lambda: True) -> None:
    """Make `template.prepare_generate_kwargs` (what TransformersEngine calls before each generate) hand out
    HostStopWords in place of ms-swift's StopWordsCriteria whenever `when()` is true; anything else it sets is
    kept. Installed once per template."""
    prepare = template.prepare_generate_kwargs
    if getattr(prepare, "host_stop_words", False):
        return

    def prepare_generate_kwargs(generate_kwargs, *, model=None):
        generate_kwargs = prepare(generate_kwargs, model=model)
        criteria = generate_kwargs.get("stopping_criteria")
        if criteria is not None and when():
            for k, c in enumerate(criteria):
                if type(c) is StopWordsCriteria:
                    criteria[k] = HostStopWords(c.tokenizer, c.stop_words, **c.tokenizer_kwargs)
        return generate_kwargs

    setattr(prepare_generate_kwargs, "host_stop_words", True)   # a marker on a function, which mypy cannot type
    template.prepare_generate_kwargs = prepare_generate_kwargs
