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
