"""What the model gives beyond its reply: p_fail for each group, and the guided reason after a 不通过
(stage_b.grounding), through the ms-swift engine."""
from __future__ import annotations

import sys

from ..grounding import guided_reply
from ..operating_point import p_fail
from ..verdict import FAIL, parse


def guide_citations(engine, rows: list[dict], completions: list[str]) -> list[str]:
    """Guided citations, as the judge writes reasons (stage_b.grounding.guided_reply): each reply whose verdict is
    不通过 is written again from the guided start (or replaced by it when the start is the whole reply). A row that
    cannot be written again keeps its free reply (said on stderr)."""
    out = list(completions)
    starts = {}
    for i, (row, c) in enumerate(zip(rows, completions)):
        if parse(c).verdict == FAIL:
            start, complete = guided_reply(FAIL, row["summaries"], row["mission"], photos="images" in row)
            if complete:
                out[i] = start
            else:
                starts[i] = start
    if not starts:
        return out
    order = sorted(starts)
    replies, failed = engine.generate([rows[i] for i in order], prefixes=[starts[i] for i in order])
    for k, i in enumerate(order):
        if k in failed:
            print(f"warning: reason kept as the model cited it: {failed[k]}", file=sys.stderr)
        else:
            out[i] = replies[k][0]
    return out

def verdict_probabilities(engine, rows: list[dict]) -> list[float | None]:
    """p_fail per row (None where it could not be computed, said on stderr)."""
    if not rows:
        return []
    try:
        scores, failed = engine.verdict_logprobs(rows)
    except NotImplementedError as exc:
        print(f"warning: no p_fail, so no miss/overkill curve: {exc}", file=sys.stderr)
        return [None] * len(rows)
    for why in failed.values():
        print(f"warning: no p_fail: {why}", file=sys.stderr)
    return [p_fail(s) if s else None for s in scores]
