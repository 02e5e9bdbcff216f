"""The QC owner's acceptances of a weaker re-certified promise, recorded beside the operating point they accept, so
that every judge at that operating point finds them (as withdrawals are: stage_b.rules.withdrawals).

A re-certified operating point whose promise is weaker than the one it replaces decides nothing without review until
the owner accepts it in words (stage_b.rules.replacement). The owner does so in the review app (their account and the
time are recorded with the words) or with the judge's `--accept_weaker WORDS`. The app appends one line to
`<operating point stem>.acceptances.jsonl`: {operating_point (its identity: stage_b.rules.point_identity),
operating_point_sha256, words, by, at}; the judge, given no `--accept_weaker`, takes the latest line for its
operating point, and records the words with who accepted them and when on every verdict line of the weaker missions.
A line for another point (a promise changed since, not a file reformatted) accepts nothing. The file is append-only;
one that cannot be read stops the judge (the guard fails closed). Pure (stdlib and the project's pure core).
"""
from __future__ import annotations

from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlAppender, JsonlError, iter_jsonl, output_lock
from stage_b.rules.point_identity import PointKeys
from stage_b.rules.replacement import check_words

FIELDS = ("operating_point_sha256", "words", "by", "at")


class AcceptancesError(UserError):
    """An acceptances file that cannot be read or written (names it and what to do)."""


def acceptances_path(operating_point) -> Path:
    op = Path(operating_point).resolve()   # a symlinked point's acceptances are the file's
    return op.with_name(f"{op.stem}.acceptances.jsonl")


def recorded(operating_point, keys: PointKeys) -> dict | None:
    """The latest acceptance recorded for the point `keys` names (by its identity, or the file's sha256 in a line
    written before identities), or None."""
    path = acceptances_path(operating_point)
    if not path.exists():
        return None
    latest = None
    try:
        for line_no, rec in iter_jsonl(path, allow_torn_tail=False,
                                       remedy="Restore it from a backup (the review app's database keeps every "
                                              "acceptance), or accept again in the review app."):
            if any(not isinstance(rec.get(k), str) for k in FIELDS):
                raise AcceptancesError(f"{path}:{line_no}: an acceptance without {', '.join(FIELDS)}: restore the "
                                       f"file from a backup; until then the weaker promise decides nothing without "
                                       f"review")
            if keys.names(rec.get("operating_point")) or keys.names(rec["operating_point_sha256"]):
                latest = rec
    except JsonlError as exc:
        raise AcceptancesError(f"{exc} (the owner's acceptances of the operating point: until it reads, a weaker "
                               f"promise decides nothing without review)") from None
    return latest


def words_of(acceptance: dict) -> str:
    """What a verdict line records of an acceptance: the words, who said them and when."""
    return f"{acceptance['words']} (accepted by {acceptance['by']} at {acceptance['at']})"


def record(operating_point, keys: PointKeys, words: str, by: str, at: str) -> dict:
    """Appends the owner's acceptance; refuses words no owner would sign (replacement.check_words)."""
    words = check_words(words, "the acceptance", "the new camera needs the lower confidence for a month") or ""
    path = acceptances_path(operating_point)
    line = {"operating_point_sha256": keys.file_sha256, "operating_point": keys.identity, "words": words, "by": by,
            "at": at}
    try:
        with output_lock(path):
            with JsonlAppender(path) as out:
                out.write(line)
    except OSError as exc:
        raise AcceptancesError(f"cannot record the acceptance beside the operating point in {path} ({exc}): make the "
                               f"folder writable and accept again") from None
    return line
