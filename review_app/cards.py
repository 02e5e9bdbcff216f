"""What a browser receives of a card: chosen key by key from the verdict line, never the line itself.

Every card carries the same keys (CARD_KEYS), so a blind audit and a gold check cannot be told apart by their shape,
nor by their values: a blind card's model answer (verdict, p_fail, thresholds, reason, reply, the photos the reason
cites, why it was routed) stays on the server until this account's decision on it is stored (`answer`), and a gold
check's known answer (`gold`) and any reviewer label (`label`) never leave it. Photos are URLs of the card and the
photo's position, never a path. The marks a summary alone gives (a photo whose summary shows a defect) are shown on
every card: they come from Stage-A, not from the model being audited.
"""
from __future__ import annotations

from urllib.parse import quote

from qc_core.records import image_key
from review_app.project import Card
from stage_b.contract.grounding import defect_photos, ground
from stage_b.contract.numbers import fmt_p
from stage_b.contract.verdict import parse

CARD_KEYS = ("card", "day", "mission", "group_id", "blind", "photos", "facts", "reason", "reply", "assigned",
             "version", "decision", "note", "decided_by")
BLIND_FACT = ["route", "blind audit: decide from the photos and summaries; the model's answer shows once you have "
                       "decided"]


def photo_url(card: Card, index: int) -> str:
    return f"/api/photo?day={quote(card.day, safe='')}&card={card.id}&n={index}"


def _summaries(line: dict) -> list[str]:
    s = line.get("summaries")
    return [x if isinstance(x, str) else "" for x in s] if isinstance(s, list) else []


def answer(card: Card) -> dict:
    """The model's answer on a card: what a non-blind card shows, and a blind one once decided."""
    v = card.line
    reply = v.get("reply") if isinstance(v.get("reply"), str) else ""
    parsed = parse(reply)
    marks = ground(reply, _summaries(v), card.mission)
    facts = [["verdict", str(v.get("verdict"))], ["p_fail", fmt_p(_num(v.get("p_fail")), _num(v.get("threshold")))],
             ["threshold", fmt_p(_num(v.get("threshold")), _num(v.get("p_fail")))]]
    if _num(v.get("threshold_fail")) not in (None, _num(v.get("threshold"))):
        facts.append(["fail threshold", fmt_p(_num(v.get("threshold_fail")), _num(v.get("p_fail")))])
    why = v.get("review_why")
    if isinstance(why, list) and why and not card.blind:
        facts.append(["review", "; ".join(str(w) for w in why)])
    return {"facts": facts, "reason": parsed.reason if parsed.two_lines else None,
            "reply": None if parsed.two_lines else reply, "cited": list(marks.cited)}


def card_view(card: Card, mine: dict | None, assigned: list[str], decided_by: list[str] | None = None) -> dict:
    """The card as the API sends it (module doc); `mine`: this account's decision {version, decision, note}."""
    summaries = _summaries(card.line)
    images = card.line.get("images")
    count = len(images) if isinstance(images, list) else 0
    defects = set(defect_photos(summaries, card.mission))
    shown: dict = {"facts": [BLIND_FACT], "reason": None, "reply": None, "cited": []} if card.blind else answer(card)
    cited = set(shown["cited"])
    photos = [{"url": photo_url(card, i), "key": image_key(i), "summary": summaries[i - 1] if i <= len(summaries)
               else "", "cited": i in cited, "defect": i in defects} for i in range(1, count + 1)]
    view = {"card": card.id, "day": card.day, "mission": card.mission, "group_id": card.group_id,
            "blind": card.blind, "photos": photos, "facts": shown["facts"], "reason": shown["reason"],
            "reply": shown["reply"],
            "assigned": list(assigned), "version": (mine or {}).get("version", 0),
            "decision": (mine or {}).get("decision"), "note": (mine or {}).get("note", ""),
            "decided_by": list(decided_by or [])}
    assert tuple(view) == CARD_KEYS
    return view


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None
