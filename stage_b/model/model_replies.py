"""What evaluation and judging both take from the model besides its free reply, written once: p_fail per group
(stage_b.rules.operating_point.p_fail from both verdict lines' log-probabilities) and the guided reason, whose start
cites
every photo whose summary shows a defect (stage_b.contract.grounding.guided_reply). The engine is passed in (an ms-swift
engine, stage_b.model.generate.VerdictEngine): no torch here."""
from __future__ import annotations

import sys

from stage_b.contract.grounding import guided_reply
from stage_b.rules.operating_point import MissionPoint, p_fail
from stage_b.contract.verdict import FAIL, parse


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


def reply_start(row: dict, verdict: str, guided: bool) -> tuple[str, bool]:
    """(what the reply is made to start with, whether that is the whole reply): the verdict line, and with guided
    citations the reason's start (stage_b.contract.grounding.guided_reply)."""
    if not guided:
        return verdict + "\n", False
    return guided_reply(verdict, row["summaries"], row["mission"], photos="images" in row)


def reply_starts(rows: dict, p: dict, point: MissionPoint, guided: bool) -> dict:
    """{i: reply_start} for each group: the reason is generated after the verdict line the mission's point gives for
    its own p_fail (the verdict recorded), never after another threshold's."""
    return {i: reply_start(rows[i], point.decide(p[i]).verdict, guided) for i in rows}


def guide_citations(engine, rows: list[dict], completions: list[str]) -> list[str]:
    """Guided citations, as the judge writes reasons: each reply whose verdict is 不通过 is written again from the
    guided start (or replaced by it when the start is the whole reply). A row that cannot be written again keeps its
    free reply (said on stderr)."""
    out = list(completions)
    starts = {}
    for i, (row, c) in enumerate(zip(rows, completions)):
        if parse(c).verdict == FAIL:
            start, complete = reply_start(row, FAIL, guided=True)
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
