"""One rule for a reviewer's name, wherever a name is typed or read: the review page (review/page.py hands NAME_RULE to
the page's script, which applies the same steps), the judge's `--reviewers`, the import's `--reviewer` and every
decision line it reads. Pure (stdlib).

A name is taken as a person typed it on any keyboard, then normalised: Unicode NFC (é typed as one character or as e
and a combining accent is one name), and each run of spaces of any width (a Chinese IME's full-width space U+3000, a
no-break space) one ASCII space, none at either end: `王　工` is `王 工`. Refused, saying why and the limit: an empty
name; one without a letter or digit (`--`: a flag or a placeholder); one over MAX_NAME characters (code points); one
holding a character that shows nothing or moves text (REFUSED_CATEGORIES: control characters, format characters such
as the bidi overrides U+202E and U+2066-2069 and zero-width joiners, private-use and surrogate code points, line and
paragraph separators): two names that look alike on a page would otherwise be two reviewers, or a name could reverse
the text printed after it.
"""
from __future__ import annotations

import re
import unicodedata

from .errors import UserError

MAX_NAME = 80
REFUSED_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Zl", "Zp")
NAME_RULE = {"max": MAX_NAME, "refused": list(REFUSED_CATEGORIES)}   # what the page's script applies
HOW = (f"a name is up to {MAX_NAME} characters of letters, digits, punctuation and spaces (a full-width space "
       f"counts as a space), e.g. 王工")


class ReviewerNameError(UserError):
    """A reviewer's name the rule refuses (says which character or limit, and what a name may be)."""


def reviewer_name(text) -> str:
    """The name as the rule normalises it (module doc), or ReviewerNameError."""
    name = unicodedata.normalize("NFC", "" if text is None else str(text))
    bad = next((c for c in name if unicodedata.category(c) in REFUSED_CATEGORIES), None)
    if bad is not None:
        what = unicodedata.name(bad, "a control character").lower()
        raise ReviewerNameError(f"{shown(name)!r} holds U+{ord(bad):04X} ({what}), which shows nothing or moves the "
                                f"text around it: {HOW}")
    # every space character (category Zs) is an ASCII space, each run one; the refused ones include tabs and newlines
    name = re.sub(" +", " ", "".join(" " if unicodedata.category(c) == "Zs" else c for c in name)).strip(" ")
    if not name:
        raise ReviewerNameError(f"an empty name: {HOW}")
    if not any(c.isalnum() for c in name):   # "--" or "..." is a slip (a flag, a placeholder), not a person
        raise ReviewerNameError(f"{name!r} holds no letter or digit: {HOW}")
    if len(name) > MAX_NAME:
        raise ReviewerNameError(f"{shown(name[:MAX_NAME])!r}… is {len(name)} characters, over {MAX_NAME}: {HOW}")
    return name


def shown(text: str) -> str:
    """Text for a message: a character that shows nothing or moves text written as \\uXXXX."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in REFUSED_CATEGORIES else c for c in str(text))


# Letters of other scripts that a reader takes for Latin ones (a subset of Unicode's confusables.txt, UTS #39
# section 4, for the scripts a team's keyboards type: Cyrillic, Greek, full-width forms fold by NFKC already), and
# digits read as letters. Applied after NFKC and casefolding.
_LOOK_ALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h",
    "ӏ": "l", "ь": "b", "г": "r", "п": "n", "л": "n",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "μ": "u", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ω": "w", "ϲ": "c", "ζ": "z",
    "0": "o", "1": "l", "|": "l",
})


def name_skeleton(name: str) -> str:
    """What a name looks like to a reader, for telling two people apart: two names with one skeleton are one person
    typed two ways (`REVIEWER-DAY4`, full-width `ｒｅｖｉｅｗｅｒ－ｄａｙ４`, `reviewer‑day4` with U+2011,
    `reviewer - day4`, a Cyrillic `е`). After the name rule: NFKC (full-width and compatibility forms), case
    folded, every space, punctuation mark and invisible character dropped, and look-alike letters of other scripts
    read as the Latin letter they show (_LOOK_ALIKES, after UTS #39's skeleton). `王工` and `王 工` share one; `王工`
    and `李工` do not."""
    text = unicodedata.normalize("NFKC", str(name)).casefold()
    kept = "".join(c for c in text if unicodedata.category(c)[0] not in "ZPC")
    return unicodedata.normalize("NFKC", kept.translate(_LOOK_ALIKES))
