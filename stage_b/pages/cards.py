"""Group cards for the review page (review.page) from evaluation predictions and judge verdicts. Pure.

Evaluation shows the groups a QC owner must look at first: misses, then overkills, then unparseable replies, then
correct verdicts with an ungrounded reason (stage_b.contract.grounding), then (with --review_all) every other group.
Judging
shows needs_review groups first, then 不通过, then 通过. Each card's photos carry two marks: the reason cites it, and
its summary shows a defect (`cited` and `defect` photo indices, read by review.page).
"""
from __future__ import annotations

import base64
import json

from qc_core.jsonl import record_digest
from qc_core.records import summaries_of
from stage_b.contract.grounding import ground
from stage_b.contract.numbers import fmt_p
from stage_b.rules.routes import AUDIT, route_of_record
from stage_b.stats.metrics import PredictionRows
from stage_b.contract.verdict import FAIL, PASS, parse

from review.page import LABEL_TEXT


EVALUATION_OUTCOMES = [("miss", "miss (不通过 judged 通过)"), ("overkill", "overkill (通过 judged 不通过)"),
                       ("invalid", "unparseable reply"), ("ungrounded", "correct, reason not grounded"),
                       ("correct", "correct")]
JUDGE_OUTCOMES = [("needs_review", "needs review"), ("audit", "blind audit"), ("fail", "不通过"), ("pass", "通过")]
SEALED_FACTS = [("route", "blind audit: decide from the photos and summaries; the model's answer shows once you have "
                          "decided")]


def evaluation_outcome(expected: str, predicted: str | None, grounded: bool = True) -> str:
    if predicted not in (PASS, FAIL):
        return "invalid"
    if expected == FAIL and predicted == PASS:
        return "miss"
    if expected == PASS and predicted == FAIL:
        return "overkill"
    return "correct" if grounded else "ungrounded"


def _marks(g) -> dict:
    return {"cited": list(g.cited), "defect": list(g.defect_photos)}


def evaluation_cards(predictions: PredictionRows, records: dict[tuple[str, str], dict], review_all: bool,
                     sources: dict[tuple[str, str], int] | None = None, grounded: list | None = None) -> list[dict]:
    """Cards for predictions (with `records`, the Stage-A records by (mission, group id), for the photos; `sources`:
    the index of the Stage-A file each group came from, which a reviewer's decision names; `grounded`: each
    prediction's grounding as the metrics computed it, carried here rather than computed again)."""
    order = {k: n for n, (k, _) in enumerate(EVALUATION_OUTCOMES)}
    cards = []
    for i, p in enumerate(predictions):
        record = records.get((p["mission"], p["group_id"]), {})
        summaries = p.get("summaries") or (summaries_of(record) if record else [])
        # a prediction without summaries is grounded on its Stage-A record's, which the metrics did not read
        g = grounded[i] if grounded is not None and p.get("summaries") else \
            ground(p["completion"], summaries, p["mission"])
        outcome = evaluation_outcome(p["expected"], p["predicted"], not g.review_why())
        if outcome == "correct" and not review_all:
            continue
        parsed = parse(p["completion"])
        cards.append({
            "group_id": p["group_id"], "mission": p["mission"], "outcome": outcome,
            "facts": [("reviewer", p["expected"]), ("model", p["predicted"] or "unparseable"),
                      ("p_fail", fmt_p(p.get("p_fail"))),
                      *((name, f"{value:g}") for name, value in p.get("rewards", {}).items() if value is not None),
                      *([("reason", "; ".join(g.review_why()))] if g.review_why() else [])],
            "reason": parsed.reason, "reply": None if parsed.two_lines else (p["completion"] or "").strip() or None,
            "error": p.get("error"), "images": record.get("images", []), "summaries": summaries, **_marks(g),
            "verdict": p["predicted"], "p_fail": p.get("p_fail"),
            "source": (sources or {}).get((p["mission"], p["group_id"])),
            "seen": record_digest(record) if record else None})
    cards.sort(key=lambda c: order[c["outcome"]])   # stable: file order within each outcome
    return cards


def judge_outcome(verdict_record: dict) -> str:
    if route_of_record(verdict_record) == AUDIT:
        return "audit"
    if verdict_record["needs_review"]:
        return "needs_review"
    return "fail" if verdict_record["verdict"] == FAIL else "pass"


def judge_tags(v: dict) -> list[str]:
    """The filters a verdict answers to: needs review and its verdict both (a flagged 不通过 is under 不通过 too); a
    blind audit only `audit` (a verdict filter would tell its answer)."""
    if route_of_record(v) == AUDIT:
        return ["audit"]
    return (["needs_review"] if v["needs_review"] else []) + ["fail" if v["verdict"] == FAIL else "pass"]


def seal(card: dict) -> dict:
    """A blind audit's card: the model's verdict, p_fail, reason, reply and the photos its reason cites go into
    `sealed` (base64 of their JSON, in ASCII: no verdict, number or reason text in the page until a reviewer decides
    and the page's script opens it); in their place a fact saying why."""
    hidden = {"facts": card["facts"], "reason": card["reason"], "reply": card["reply"], "cited": card["cited"]}
    sealed = base64.b64encode(json.dumps(hidden, ensure_ascii=True).encode("ascii")).decode("ascii")
    return {**card, "facts": SEALED_FACTS, "reason": None, "reply": None, "cited": [], "verdict": None,
            "p_fail": None, "sealed": sealed}


def judge_cards(verdicts: list[dict], sources: dict[str, int] | None = None) -> list[dict]:
    """Cards for verdict records (`sources`: the index of each mission's verdicts file, which a decision names)."""
    order = {k: n for n, (k, _) in enumerate(JUDGE_OUTCOMES)}
    cards = [{"group_id": v["group_id"], "mission": v["mission"], "outcome": judge_outcome(v),
              "facts": [("verdict", v["verdict"]), ("p_fail", fmt_p(v["p_fail"], v["threshold"])),
                        ("threshold", fmt_p(v["threshold"], v["p_fail"])),
                        *([("fail threshold", fmt_p(v["threshold_fail"], v["p_fail"]))]
                          if v.get("threshold_fail") not in (None, v["threshold"]) else []),
                        ("reviewer", LABEL_TEXT.get(v.get("label"), v.get("label"))),
                        *([("review", "; ".join(v["review_why"]))] if v.get("review_why") else [])],
              "reason": v.get("reason") if parse(v["reply"]).two_lines else None,
              "reply": None if parse(v["reply"]).two_lines else v["reply"],
              "error": None, "images": v["images"], "summaries": v["summaries"],
              **_marks(ground(v["reply"], v["summaries"], v["mission"])), "tags": judge_tags(v),
              "verdict": v["verdict"], "p_fail": v["p_fail"], "source": (sources or {}).get(v["mission"]),
              "route": route_of_record(v), "seen": record_digest(v), "assigned_to": v.get("assigned_to") or []}
             for v in verdicts]
    cards = [seal(c) if c["route"] == AUDIT else c for c in cards]
    cards.sort(key=lambda c: order[c["outcome"]])
    return cards
