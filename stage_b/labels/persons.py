"""One person, one name, in the decisions log: two spellings of a reviewer's name that look alike to a reader
(qc_core.names.name_skeleton: case, full-width forms, dashes, spaces, Cyrillic or Greek look-alikes folded; after
Unicode TR39's skeleton) are one reviewer, named by the spelling the log holds first, for agreement, the confirmation
of an escape and the reviewer table. An export that decides a day again under a second spelling therefore neither
agrees with itself (kappa) nor confirms its own escapes. Pure (the project's pure core).

In the review app an account is the person (accounts with look-alike names are refused); this folds the file path
(exports typed by hand) and logs written before the rule.
"""
from __future__ import annotations

from qc_core.names import name_skeleton

ANONYMOUS = "anonymous"


def canonical_names(log: list[dict]) -> dict[str, str]:
    """{each spelling in the log: the person's name, the spelling of its skeleton that comes first}."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for d in log:
        name = d.get("reviewer") or ANONYMOUS
        if name not in out:
            out[name] = first.setdefault(name_skeleton(name), name)
        for change in d.get("history") or []:   # the page records who made each change
            by = change.get("by") if isinstance(change, dict) else None
            if isinstance(by, str) and by and by not in out:
                out[by] = first.setdefault(name_skeleton(by), by)
    return out


def merged(names: dict[str, str]) -> list[tuple[str, str]]:
    """(the person's name, another spelling read as them), for each spelling folded into another."""
    return sorted((person, spelling) for spelling, person in names.items() if spelling != person)
