"""Reading a Stage-B completion: the two-line contract `通过|不通过` + `理由: …`. Pure (stdlib only).

Normalisation applied before any rule: a leading closed `<think>…</think>` block is dropped (an
unclosed one makes the completion unparseable), NFKC folds full-width punctuation, digits and spaces
(`：` -> `:`, `１` -> `1`), and a small table maps traditional characters of the verdict vocabulary to
simplified ones (`通過` -> `通过`). Nothing here raises on any input.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

PASS, FAIL = "通过", "不通过"
VERDICTS = (PASS, FAIL)
_THINK = re.compile(r"^\s*<think>.*?</think>", re.S)
_REASON = re.compile(r"^理由\s*[:]\s*(.*\S)\s*$", re.S)
_TRADITIONAL = str.maketrans({
    "過": "过", "圖": "图", "無": "无", "鬆": "松", "動": "动", "損": "损", "壞": "坏", "線": "线",
    "裝": "装", "規": "规", "範": "范", "紮": "扎", "擰": "拧", "緊": "紧", "護": "护", "脫": "脱",
    "錯": "错", "誤": "误", "沒": "没", "見": "见", "發": "发", "現": "现", "擋": "挡", "風": "风",
    "絲": "丝", "纜": "缆", "佈": "布", "齊": "齐", "側": "侧", "個": "个", "處": "处", "為": "为",
    "檢": "检", "審": "审", "彎": "弯", "徑": "径", "繞": "绕", "綁": "绑", "亂": "乱", "進": "进",
    "釘": "钉", "纖": "纤", "備": "备", "註": "注", "閉": "闭",
})


def normalize(text) -> str | None:
    """Canonical text of a completion, or None when it is not text or has an unclosed <think>."""
    if isinstance(text, list):  # conversational form: [{"role": "assistant", "content": ...}]
        text = text[-1].get("content") if text and isinstance(text[-1], dict) else None
    if not isinstance(text, str):
        return None
    text = _THINK.sub("", text, count=1)
    if "<think>" in text or "</think>" in text:
        return None
    text = unicodedata.normalize("NFKC", text).translate(_TRADITIONAL)
    return text.replace("\r\n", "\n").replace("\r", "\n")


# One vocabulary: inside the code a label is the verdict it asserts, PASS or FAIL. Stage-A records (and the label
# files the import of decisions writes, and a gold group's answer on a verdict line) spell it `pass` or `fail`: these
# two are the only translations, at the files' edge.
FILE_LABELS = {PASS: "pass", FAIL: "fail"}
_FROM_FILE = {word: verdict for verdict, word in FILE_LABELS.items()}


def label_from_file(word) -> str | None:
    """A file's `pass`/`fail` as the verdict it asserts (PASS or FAIL); None for anything else (no label)."""
    return _FROM_FILE.get(word) if isinstance(word, str) else None


def normalize_verdict(value) -> str | None:
    """`通过`/`不通过` (also from `pass`/`fail` or traditional spellings), else None."""
    if label_from_file(value) is not None:
        return label_from_file(value)
    text = normalize(value)
    text = text.strip() if text else None
    return text if text in VERDICTS else None


@dataclass(frozen=True)
class Parsed:
    verdict: str | None       # first line when it is exactly a verdict
    reason: str | None        # text after `理由:` on line 2, when the two-line contract holds
    two_lines: bool           # the whole completion is exactly the two-line contract


def parse(completion) -> Parsed:
    text = normalize(completion)
    if text is None:
        return Parsed(None, None, False)
    text = text.strip()
    lines = text.split("\n")
    first = lines[0].strip()
    verdict = first if first in VERDICTS else None
    reason = None
    if len(lines) == 2:
        m = _REASON.match(lines[1].strip())
        reason = m.group(1).strip() if m else None
    return Parsed(verdict, reason, verdict is not None and reason is not None)
