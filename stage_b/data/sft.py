"""Stage-B SFT replies: the two-line answer a start point is taught, built from a group's Stage-A summaries and
its reviewer label (`group_qc_sft`; group_qc_dev/sft_data.py uses the same reason for the demo). Pure.

The reason is grounded in what the summaries say, so the model learns to cite photos, never to invent:
  - a reviewer's own reason, when the Stage-A record carries one (optional field `reviewer_reason`), wins;
  - 不通过: every photo whose summary asserts a defect, with what it says: the text of its 备注 remark, else the
    defect terms it asserts (stage_b.contract.grounding: the mission's `defect_terms` and the generic ones). When no
    summary
    shows a defect, the reason says the key checkpoints cannot be confirmed from the summaries (the conservative rule);
  - 通过: every photo was seen and every checkpoint holds.
"""
from __future__ import annotations

from typing import Final

from qc_core.errors import UserError
from qc_core.missions import Mission
from qc_core.records import image_key

from stage_b.contract.grounding import NOT_CONFIRMED, asserted_defects, defect_photos, defect_terms
from stage_b.contract.verdict import FAIL, PASS

REVIEWER_REASON: Final = "reviewer_reason"   # optional Stage-A record field: the reviewer's reason, one line
REMARK = "备注"


def photo_defects(mission: Mission, summaries: list[str]) -> list[tuple[int, str]]:
    """(1-based photo index, what its summary says is wrong) for each photo whose summary shows a defect
    (stage_b.contract.grounding, the rule the metrics and the judge use): the text of its 备注 remark, else the defect
    terms it asserts."""
    terms = defect_terms(mission.name)
    out = []
    for i in defect_photos(summaries, mission.name):
        s = summaries[i - 1]
        if REMARK in s:
            out.append((i, s.split(REMARK, 1)[1].lstrip("：: ").strip() or s))
        else:
            out.append((i, "、".join(t for t in terms if t in asserted_defects(s, terms))))
    return out


def grounded_reason(mission: Mission, summaries: list[str], verdict: str) -> str:
    if verdict == FAIL:
        defects = photo_defects(mission, summaries)
        if not defects:
            return NOT_CONFIRMED
        return "；".join(f"{image_key(i)} {what}" for i, what in defects)
    if verdict != PASS:
        raise UserError(f"verdict must be {PASS} or {FAIL}, got {verdict!r}")
    return f"{every_photo(len(summaries))} 均符合要求，检查要点均已确认"


def every_photo(n: int) -> str:
    """All n photos by key: `图片_1至图片_n` (or `图片_1` alone)."""
    return f"{image_key(1)}至{image_key(n)}" if n > 1 else image_key(1)


def two_line_reply(verdict: str, reason: str) -> str:
    """The contract stage_b.contract.verdict.parse reads: the verdict, a line break, `理由: ` and the reason."""
    return f"{verdict}\n理由: {reason}"


def reply_for(mission: Mission, summaries: list[str], verdict: str, reviewer_reason: str | None = None) -> str:
    """The two-line reply: the verdict, then `理由: ` and the reason (the reviewer's, on one line, when given)."""
    reason = " ".join(reviewer_reason.split()) if reviewer_reason and reviewer_reason.strip() else None
    return two_line_reply(verdict, reason or grounded_reason(mission, summaries, verdict))
