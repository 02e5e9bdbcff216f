"""Does a reason point at the defect? The one rule, used by the qc_consistency reward, evaluation's metrics, the
judge's review flags and the review page. Pure (stdlib and the mission registry).

  - A text *asserts* a defect when it holds one of the mission's `defect_terms` (configs/missions.yaml) or a
    GENERIC_DEFECT_TERMS word that no negation denies. A negation denies a defect word when it comes before it in the
    same clause with at most NEGATION_GAP characters between them (a word such as 明显, 任何, 发现): `螺丝齐全，无松动`,
    `未发现明显松动`, `无任何缺失` and `没有发现松动` assert nothing; a clause break (，。；、 and the like) ends a
    negation's reach, so `无遮挡，螺丝缺失` asserts 缺失; but a defect word joined to a denied one by a coordinator
    (和, 与, 及, 或, 以及, 或者, 、) is denied with it: `没有发现松动和缺失`, `无松动、缺失` assert nothing.
  - A photo *shows a defect* when its Stage-A summary asserts one.
  - A reason *cites* photo k when it names `图片_k` (also `图片k`, `图k`, and with a Chinese numeral `图片二`,
    `图片十二`); a range `图片_1至图片_3` (至, 到, -, ~)
    cites every photo in it, 1, 2 and 3 (图片_3至图片_1 too, in its order), when it spans at most MAX_RANGE photos
    (图片_1至图片_64 cites 64); a longer
    range cites its two ends only. A number runs to at most 6 digits: 图片_1234567 cites nothing. Each photo counts
    once per reason. An index outside 1..N (N photos) is
    a citation all the same, and always a wrong one.
  - A two-line reply *contradicts* its verdict when
      不通过: its reason asserts no defect and cites no photo that shows one ("图片_1 和 图片_3 均符合要求");
      通过:  its reason asserts a defect, or cites a photo that shows one ("光纤裸露无保护").
  - A 不通过 reply's *wrong citations*: the photos it cites that do not show a defect (or do not exist).
  - A 通过 verdict on a group whose summaries show a defect goes against the evidence, whatever its reason says.

Guided citations (`guided_reply`, the judge's and evaluation's default): after a 不通过 verdict line the reason
starts with every photo whose summary shows a defect (`理由: 图片_3、图片_5 `) and the model writes the rest. A 不通过
on a group whose summaries show none points at no photo: reading summaries only, the reason is the conservative
rule's own words (NOT_CONFIRMED), a contradiction by the rule above and so always reviewed; reading the photos too,
the model writes it. Every 通过 is written freely.

Over a set of replies (evaluation's metrics.json, per mission and overall):
  reason_contradiction_rate = contradicting two-line replies / two-line replies;
  citation_precision        = cited photos that show a defect / cited photos, over 不通过 replies;
  citation_recall           = defect photos cited / defect photos, over 不通过 replies to groups with at least
                              one defect photo.
All three pool the counts (a reply citing three photos weighs three times in precision); None when nothing counts.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache

from qc_core.missions import load_registry

from stage_b.contract.verdict import FAIL, PASS, normalize, parse

# Defect words every mission shares; each mission adds its own (configs/missions.yaml defect_terms).
GENERIC_DEFECT_TERMS = ("缺失", "缺少", "松动", "破损", "损坏", "脱落", "不规范", "不合格", "错误", "裸露",
                        "未安装", "未捆扎", "未拧紧", "未套保护管", "散乱", "不到位")
# A defect word right after one of these is denied, not asserted ("螺丝齐全，无松动").
NEGATIONS = ("无", "没有", "未见", "未发现", "不存在", "并无", "未出现", "不见")
NEGATION_GAP = 4   # characters a negation reaches over to its defect word, within one clause (module doc)
COORDINATORS = ("以及", "或者", "和", "与", "及", "或", "、", "跟")   # a denied defect word's denial carries over these
_REACH = NEGATION_GAP + max(map(len, NEGATIONS))
CLAUSE_BREAKS = "，,。.；;、：:！!？?\n/|（）()【】[]"
# 图片k always; a bare 图k only where it cannot end another word (接线图2, 示意图3 are diagrams, not photos): at the
# start, after a non-CJK character, or after a function word (见图2, 如图2, 和图3); never a longer number's prefix.
_PHOTO = r"(?:图片|(?:(?<=[见如和及与或至到])|(?<![\u4e00-\u9fff]))图)"
_NUMBER = r"\s*_?\s*(\d{1,6})(?!\d)"
CITATION = re.compile(_PHOTO + _NUMBER)
RANGE = re.compile(_PHOTO + _NUMBER + r"\s*(?:至|到|-|~|～|—)\s*(?:图片?\s*_?\s*)?(\d{1,6})(?!\d)")
MAX_RANGE = 64   # photos a range may span and cite each of; a longer one (图片_1至图片_100000) cites its two ends


@lru_cache(maxsize=64)
def defect_terms(mission) -> tuple[str, ...]:
    terms = list(GENERIC_DEFECT_TERMS)
    try:
        terms += load_registry().resolve(mission).defect_terms if mission else []
    except Exception:  # noqa: BLE001 - unknown mission: generic terms still apply
        pass
    # Longest first, so "未套保护管" is matched before a shorter term inside it.
    return tuple(sorted(set(terms), key=len, reverse=True))


def negated(text: str, start: int) -> bool:
    """Whether a negation denies the word at `start`: one ends within NEGATION_GAP characters before it, with no
    clause break in between (module doc)."""
    # only the last few characters can hold a negation that reaches the word: look no further back (linear in the
    # text however many words it has), and cut at the last clause break among them
    window = text[max(0, start - _REACH):start]
    for k, ch in enumerate(reversed(window)):
        if ch in CLAUSE_BREAKS:
            window = window[len(window) - k:]
            break
    return any(window[:len(window) - gap].endswith(neg) for neg in NEGATIONS for gap in range(NEGATION_GAP + 1)
               if gap <= len(window))


def asserted_defects(text: str, terms) -> set[str]:
    """Defect terms present in `text` and not denied by a negation (negated), or by the denial of a defect word they
    are coordinated with (module doc). `terms` longest first: a shorter term inside a longer one's match is the
    longer one's."""
    taken: list[tuple[int, int, str]] = []
    used = bytearray(len(text))   # characters a longer term's match holds (linear, however many matches)
    for term in terms:
        for m in re.finditer(re.escape(term), text):
            if not any(used[m.start():m.end()]):
                used[m.start():m.end()] = b"\x01" * (m.end() - m.start())
                taken.append((m.start(), m.end(), term))
    found, denied_end = set(), None
    for start, end, term in sorted(taken):
        joined = denied_end is not None and text[denied_end:start].strip() in COORDINATORS
        if negated(text, start) or joined:
            denied_end = end
        else:
            found.add(term)
            denied_end = None
    return found


_DIGIT = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHINESE_NUMBER = re.compile(r"(图片?\s*_?\s*)([一二两三四五六七八九十]{1,3})(?![一二两三四五六七八九十百千万零])")


def _chinese(numeral: str) -> int | None:
    """一..九十九 as a number (十 = 10, 十二 = 12, 二十 = 20, 二十三 = 23), None for anything else."""
    if "十" not in numeral:
        return _DIGIT[numeral] if len(numeral) == 1 and numeral in _DIGIT else None
    tens, _, ones = numeral.partition("十")
    if len(tens) > 1 or len(ones) > 1 or (tens and tens not in _DIGIT) or (ones and ones not in _DIGIT):
        return None
    return (_DIGIT[tens] if tens else 1) * 10 + (_DIGIT[ones] if ones else 0)


def _arabic(reason: str) -> str:
    """图片二 written 图片_2 (a Chinese numeral after 图片 or 图), so that it cites as 图片_2 does."""
    def one(m: re.Match) -> str:
        n = _chinese(m.group(2))
        return m.group(0) if n is None else f"{m.group(1)}_{n}"
    return _CHINESE_NUMBER.sub(one, reason) if "图" in reason else reason


def cited_photos(reason: str) -> list[int]:
    """The photo numbers a reason cites, in order of first mention, ranges expanded (module doc)."""
    reason = _arabic(reason)
    ranges = list(RANGE.finditer(reason))
    starts = [m.start() for m in ranges]   # in order, not overlapping: one bisect per single (linear overall)
    ends = [m.end() for m in ranges]

    def inside_a_range(pos: int) -> bool:
        k = bisect.bisect_right(starts, pos) - 1
        return k >= 0 and pos < ends[k]
    singles = [m for m in CITATION.finditer(reason) if not inside_a_range(m.start())]
    cited: dict[int, None] = {}
    for m in sorted(ranges + singles, key=lambda m: m.start()):
        if m.re is RANGE:
            a, b = int(m.group(1)), int(m.group(2))
            lo, hi = min(a, b), max(a, b)   # 图片_3至图片_1 spans 1 to 3 as 图片_1至图片_3 does
            cited.update(dict.fromkeys((range(a, b + 1) if a <= b else range(a, b - 1, -1)) if hi - lo < MAX_RANGE
                                       else (a, b)))
        else:
            cited[int(m.group(1))] = None
    return list(cited)


def defect_photos(summaries, mission) -> list[int]:
    """1-based indices of the photos whose summary shows a defect."""
    terms = defect_terms(mission)
    texts = [normalize(s) or "" if isinstance(s, str) else "" for s in (summaries or [])]
    return [i for i, t in enumerate(texts, start=1) if asserted_defects(t, terms)]


@dataclass(frozen=True)
class Grounding:
    """One reply's grounding (module doc). `verdict` and `reason` are None when the reply is not two lines."""
    verdict: str | None
    reason: str | None
    n_photos: int
    cited: tuple[int, ...] = ()
    defect_photos: tuple[int, ...] = ()
    asserts_defect: bool = False
    contradiction: bool = False
    wrong_citations: tuple[int, ...] = field(default=())

    @property
    def two_lines(self) -> bool:
        return self.reason is not None

    def review_why(self) -> list[str]:
        """Why a person should look at this reply, naming the photos (empty when it is grounded)."""
        defects = (f"summaries show a defect on {_keys(self.defect_photos)}" if self.defect_photos
                   else "no summary shows a defect")
        why = []
        if self.contradiction and self.verdict == FAIL:
            why.append(f"the reason contradicts 不通过: it names no defect and cites no photo whose summary shows one "
                       f"(cites {_keys(self.cited) or 'no photo'}; {defects})")
        elif self.contradiction:
            shown = [k for k in self.cited if k in self.defect_photos]
            why.append("the reason contradicts 通过: " + (f"it cites {_keys(shown)}, whose summary shows a defect"
                                                         if shown else "it names a defect") + f" ({defects})")
        if self.verdict == PASS and self.defect_photos and not self.contradiction:
            why.append(f"the verdict is 通过 and the {defects}")
        if self.wrong_citations:
            outside = [k for k in self.wrong_citations if not 1 <= k <= self.n_photos]
            clean = [k for k in self.wrong_citations if 1 <= k <= self.n_photos]
            parts = ([f"{_keys(clean)}, whose summary shows no defect"] if clean else []) + \
                    ([f"{_keys(outside)}, which the group does not have ({self.n_photos} photos)"] if outside else [])
            why.append(f"the reason cites {' and '.join(parts)} ({defects})")
        return why


def _keys(indices) -> str:
    return "、".join(f"图片_{k}" for k in indices)


def ground(completion, summaries, mission) -> Grounding:
    """The grounding of one reply against its group's summaries (module doc). Never raises."""
    defects = tuple(defect_photos(summaries, mission))
    n = len(summaries or [])
    parsed = parse(completion)
    if not parsed.two_lines:
        return Grounding(parsed.verdict, None, n, defect_photos=defects)
    reason = parsed.reason or ""   # two_lines holds: the reason is there
    cited = tuple(cited_photos(reason))
    asserts = bool(asserted_defects(reason, defect_terms(mission)))
    cites_defect = any(k in defects for k in cited)
    if parsed.verdict == FAIL:
        contradiction = not asserts and not cites_defect
        wrong = tuple(k for k in cited if k not in defects)
    else:
        contradiction = asserts or cites_defect
        wrong = ()
    return Grounding(parsed.verdict, reason, n, cited, defects, asserts, contradiction, wrong)


REASON_CITATIONS = ("guided", "free")
NOT_CONFIRMED = "关键检查要点无法从摘要中确认"   # the conservative rule: what cannot be confirmed is 不通过


def citation_prefix(verdict: str, summaries, mission) -> str:
    """The start of a guided reason (module doc): `理由: 图片_3、图片_5 ` after 不通过 when summaries show a defect;
    empty otherwise."""
    defects = defect_photos(summaries, mission)
    return f"理由: {_keys(defects)}" if verdict == FAIL and defects else ""


def guided_reply(verdict: str, summaries, mission, photos: bool = False) -> tuple[str, bool]:
    """(how the reply starts, whether that is the whole reply) under guided citations (module doc)."""
    if verdict == FAIL and not photos and not defect_photos(summaries, mission):
        return f"{FAIL}\n理由: {NOT_CONFIRMED}", True
    return f"{verdict}\n{citation_prefix(verdict, summaries, mission)}", False


def grounding_metrics(groundings: list[Grounding]) -> dict:
    """The three rates of the module doc, with the counts behind them."""
    two_line = [g for g in groundings if g.two_lines]
    fails = [g for g in two_line if g.verdict == FAIL]
    cited = sum(len(g.cited) for g in fails)
    right = sum(len(g.cited) - len(g.wrong_citations) for g in fails)
    with_defects = [g for g in fails if g.defect_photos]
    defect_total = sum(len(g.defect_photos) for g in with_defects)
    defect_cited = sum(len(set(g.cited) & set(g.defect_photos)) for g in with_defects)
    contradictions = sum(g.contradiction for g in two_line)
    return {"reason_contradiction_rate": contradictions / len(two_line) if two_line else None,
            "citation_precision": right / cited if cited else None,
            "citation_recall": defect_cited / defect_total if defect_total else None,
            "grounding_counts": {"two_line_replies": len(two_line), "contradictions": contradictions,
                                 "fail_replies": len(fails), "citations": cited, "citations_showing_defect": right,
                                 "defect_photos": defect_total, "defect_photos_cited": defect_cited,
                                 "replies_citing_only_photo_1": sum(g.cited == (1,) for g in two_line)}}


__all__ = ["FAIL", "PASS", "GENERIC_DEFECT_TERMS", "NEGATIONS", "Grounding", "asserted_defects", "cited_photos",
           "defect_photos", "defect_terms", "ground", "grounding_metrics"]
