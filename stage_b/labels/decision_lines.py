"""Reading reviewers' exported decisions: every line of decisions.jsonl checked before anything is written (its fields
and types, the decision, the mission, the reviewer's name, each change in its history, and the group's line in the
source file the page was made from, found where the page was made or beside the page for a moved day folder); every
problem named as file:line (stage_b.labels.decisions documents the format). Where each decision's source file is
found: stage_b.labels.source_files."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlError, iter_jsonl, record_digest
from qc_core.missions import MissionError, load_registry
from qc_core.names import ReviewerNameError, name_skeleton, reviewer_name
from qc_core.records import RecordError, utc_now, validate_record
from qc_core.paths import with_input_dir_resolved
from stage_b.contract.verdict import FAIL, PASS
from stage_b.labels.source_files import SourceFiles
from stage_b.rules.routes import GROUP

DECISIONS = (PASS, FAIL, "unsure")
DECISION_FIELDS = ("group_id", "mission", "decision", "note", "reviewer", "decided_at", "verdict", "p_fail", "route",
                   "source", "page", "history")
MAX_PROBLEMS = 20


class DecisionsError(UserError):
    """Decisions that cannot be imported (names file:line and what to do)."""


FUTURE_SLACK = timedelta(minutes=5)   # a reviewer's clock may run a little ahead of this machine's
OLDEST = datetime(2000, 1, 1, tzinfo=timezone.utc)


def _decided_at(text) -> str:
    """A checked decided_at (decided_at_problem found none) in the log's one form."""
    when = decided_at_time(text)
    assert when is not None
    return when.isoformat(timespec="seconds")


def decided_at_time(text) -> datetime | None:
    """An ISO time with its zone, in UTC; None for anything else (no zone, not a time, year 0)."""
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except (AttributeError, ValueError, OverflowError):
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        return None
    return when.astimezone(timezone.utc)


def decided_at_problem(text) -> str | None:
    """Why a decision's time cannot be kept (every later comparison depends on it), or None."""
    if not isinstance(text, str) or not text.strip():
        return "decided_at is missing: a review page stamps every decision; export it from the page again"
    when = decided_at_time(text)
    if when is None:
        return (f"decided_at {text!r} is not an ISO time with a time zone (e.g. 2026-11-27T09:30:00Z): without a zone "
                f"it cannot be ordered against other reviewers' decisions")
    if when > datetime.now(timezone.utc) + FUTURE_SLACK:
        return (f"decided_at {text!r} is in the future (a wrong clock would make it beat every later correction): "
                f"fix the reviewer's clock and decide again")
    if when < OLDEST:
        return f"decided_at {text!r} is before 2000: a wrong clock; fix it and decide again"
    return None


def _climbs_out(images) -> str | None:
    """A photo path a label would carry that leaves its photo folder: absolute, or with a `..` part."""
    for rel in images if isinstance(images, list) else []:
        if isinstance(rel, str) and (Path(rel).is_absolute() or ".." in Path(rel.replace("\\", "/")).parts):
            return f"its photo {rel!r} climbs out of its photo folder"
    return None


def source_record_problem(record: dict) -> str | None:
    """Why a source file's line cannot become a label: a Stage-A record must pass the Stage-A contract, a verdict line
    must carry the summaries and photos the label is built from; no photo path may leave its folder (`../`, an
    absolute path: a label would name any file on the machine)."""
    climbs = _climbs_out(record.get("images"))
    if climbs:
        return climbs
    if "per_image" in record:
        try:
            validate_record({**record, "label": record.get("label")})
        except RecordError as exc:
            return str(exc)
        return None
    summaries, images = record.get("summaries"), record.get("images")
    if not (isinstance(summaries, list) and isinstance(images, list) and images and len(summaries) == len(images)
            and all(isinstance(x, str) and x.strip() for x in summaries + images) and "verdict" in record
            and "p_fail" in record):
        return "no verdict with one summary per photo"
    return None


def decision_line(shown: dict, decision: str, reviewer: str, source: dict, note: str = "",
                  decided_at: str | None = None, seen: str | None = None, history: list | None = None) -> dict:
    """One exported line, as a review page writes it (review/templates/review.js mirrors this) for a card showing
    `shown` (a verdict record, or a prediction with `verdict`/`p_fail`) made from `source` ({"file", "sha256"}); `seen`:
    the digest of the group's line in that file (qc_core.jsonl.record_digest), which keeps the decision valid when
    the file grows. A blind audit's card never showed the model's answer: its line has none."""
    blind = shown.get("route") == "audit"
    return {"group_id": shown["group_id"], "mission": shown["mission"], "decision": decision, "note": note,
            "reviewer": reviewer, "decided_at": decided_at or utc_now(),
            "verdict": None if blind else shown.get("verdict"), "p_fail": None if blind else shown.get("p_fail"),
            "route": shown.get("route"), "source": {**source, **({"line_sha256": seen} if seen else {})},
            "history": history or []}


def check_line(rec, where: str, registry, sources: SourceFiles, unnamed: str = "") -> tuple[dict | None, str | None]:
    """(the decision, normalised, with the group's Stage-A record; or None) and the problem, if any. `unnamed`: the
    reviewer of lines that name none (--reviewer); without it such a line is refused."""
    problem = _field_problem(rec)
    if problem:
        return None, f"{where}: {problem}"
    reviewer, problem = _reviewer(rec, unnamed)
    if problem:
        return None, f"{where}: {problem}"
    try:
        mission = registry.resolve(rec["mission"] if isinstance(rec["mission"], str) else "").name
    except MissionError as exc:
        return None, f"{where}: {exc}"
    history, problem = check_history(rec.get("history"))
    problem = problem or history_problem(history, reviewer, rec["decision"], rec["decided_at"])
    if problem:
        return None, f"{where}: history {problem}; export the decisions from the review page again"
    found, problem = _verified_source(rec, mission, sources)
    if problem:
        return None, f"{where}: {problem}"
    assert found is not None   # no problem: the source was verified
    path, sha, record, band = found
    from_verdicts = "p_fail" in record and "verdict" in record   # the model's answer as the verified file holds it
    decision = {"group_id": rec["group_id"], "mission": mission, "decision": rec["decision"],
                "note": rec.get("note") or "", "reviewer": reviewer,
                "decided_at": _decided_at(rec["decided_at"]),
                "verdict": record["verdict"] if from_verdicts else rec.get("verdict"),
                "p_fail": record["p_fail"] if from_verdicts else rec.get("p_fail"),
                "route": record.get("route") if from_verdicts else None,
                "source": {"file": str(path), "sha256": sha, "line_sha256": record_digest(record),
                           **({"band": band} if band and record.get("review_scope") == GROUP else {})},
                "history": history}
    # the label's photo folder read where the source file is now (a verdict line stores it relative to itself: an
    # import in a copied project reads the copy's photos, never the original's)
    return {**decision, "record": with_input_dir_resolved(record, Path(path).parent)}, None


def _field_problem(rec) -> str | None:
    """Why a line is not a decision as a page exports it (fields, their types, the decision, the time), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    missing = [f for f in ("group_id", "mission", "decision", "source") if f not in rec]
    if missing:
        return f"missing {', '.join(missing)} (a review page's export has {', '.join(DECISION_FIELDS)})"
    if rec["decision"] not in DECISIONS:
        return f"decision {rec['decision']!r} is not one of {', '.join(DECISIONS)}"
    for key in ("group_id", "reviewer", "note", "decided_at"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{key} must be text, got {rec[key]!r}"
    if not rec["group_id"]:
        return "empty group_id"
    source = rec["source"]
    if source is None:
        return (f"the page named no source file for group {rec['group_id']} (a Stage-A error group, or a page "
                f"re-scored from predictions alone): it cannot become a label")
    if (not isinstance(source, dict) or not isinstance(source.get("file"), str)
            or not isinstance(source.get("sha256"), str)
            or not all(isinstance(source.get(k), (str, type(None))) for k in ("relative", "line_sha256"))):
        return "source must be {\"file\", \"sha256\"} as the page exports it"
    return decided_at_problem(rec.get("decided_at"))


def _reviewer(rec: dict, unnamed: str) -> tuple[str, str | None]:
    """(the reviewer's name, or the problem): the line's own, else --reviewer's; normalised by qc_core.names' rule,
    the one the page applies."""
    given = rec.get("reviewer")
    reviewer = given if isinstance(given, str) and given.strip() else unnamed
    if not reviewer:
        return "", ("no reviewer name: two nameless reviewers cannot be told apart (the later would silently replace "
                    "the other's decision); type your name in the page's reviewer field and export again, or pass "
                    "--reviewer NAME to name this file's unnamed lines")
    try:
        return reviewer_name(reviewer), None
    except ReviewerNameError as exc:
        return "", f"reviewer name {exc}; type it so on the page and export again"


def _verified_source(rec: dict, mission: str, sources: SourceFiles) -> tuple[tuple | None, str | None]:
    """((the source path, its sha256, the group's line), or the problem): the file found where the page was made or
    relative to the page, and the group's line the one the reviewer saw (its digest), else the whole file unchanged
    (an export from before decisions named their group's line)."""
    source = rec["source"]
    path, facts = sources.locate(source, rec.get("page"), mission, rec["group_id"])
    if isinstance(facts, str):
        return None, facts
    sha, groups = facts
    record = groups.get((mission, rec["group_id"]))
    seen = source.get("line_sha256")
    if sha != source["sha256"] and seen is None:
        return None, (f"{path} has changed since the review page was made (sha256 {source['sha256'][:12]}… then, "
                      f"{sha[:12]}… now): render the page again (rerun the command that wrote it), decide there, and "
                      f"export again")
    if record is None:
        return None, f"group {rec['group_id']} of {mission} is not in {path}"
    if seen is not None and record_digest(record) != seen:
        return None, (f"group {rec['group_id']} of {mission} has changed in {path} since the review page was made "
                      f"(re-judged, or its Stage-A summaries redone): the decision was on what the page showed then; "
                      f"render the page again, decide this group there, and export again")
    problem = source_record_problem(record)
    if problem:
        return None, (f"the group's line in {source['file']} is neither a Stage-A record nor a verdict line "
                      f"({problem}): a label can only come from the files a review page is made from")
    return (path, sha, record, sources.band(path, mission)), None


MAX_HISTORY = 1000
HISTORY_FIELDS = ("from", "to", "at", "by", "on_screen_ms")


def _is_name(text: str) -> bool:
    try:
        reviewer_name(text)
        return True
    except ReviewerNameError:
        return False


def history_problem(history: list, reviewer: str, decision: str, decided_at) -> str | None:
    """Why a checked history cannot be this line's: a change made by another person (one person, one name: a
    look-alike spelling of the reviewer is theirs), a last change that ends on another decision, or a change stamped
    after the decision itself (beyond a second: the page stamps both at once)."""
    if not history:
        return None
    others = sorted({c["by"] for c in history if c.get("by") and name_skeleton(c["by"]) != name_skeleton(reviewer)})
    if others:
        return f"names {', '.join(others)} as making changes to {reviewer}'s decision: one person's decision"
    if history[-1].get("to") != decision:
        return f"ends on {history[-1].get('to')!r}, and the line's decision is {decision!r}"
    decided = decided_at_time(decided_at)
    late = [c["at"] for c in history
            if decided and (decided_at_time(c["at"]) or decided) > decided + timedelta(seconds=1)]
    if late:
        return f"holds a change at {late[0]}, after the decision itself ({decided_at})"
    return None


def check_history(history) -> tuple[list, str | None]:
    """A decision's history as the page exports it: each change {from, to, at, by, on_screen_ms} (module doc)."""
    if history is None:
        return [], None
    if not isinstance(history, list) or len(history) > MAX_HISTORY:
        return [], f"must be a list of at most {MAX_HISTORY} changes"
    for n, change in enumerate(history, start=1):
        if not isinstance(change, dict) or set(change) - set(HISTORY_FIELDS):
            return [], f"change {n} must hold only {', '.join(HISTORY_FIELDS)}"
        if any(change.get(k) not in (*DECISIONS, None) for k in ("from", "to")):
            return [], f"change {n}: from/to must be one of {', '.join(DECISIONS)} or null"
        if not isinstance(change.get("at"), str):
            return [], f"change {n}: at must be an ISO time with a zone"
        problem = decided_at_problem(change["at"])   # not a time, or a time no right clock gives (ahead, before 2000)
        if problem:
            return [], f"change {n}: {problem.replace('decided_at', 'at', 1)}"
        if not isinstance(change.get("by"), str) or (change["by"] and not _is_name(change["by"])):
            return [], f"change {n}: by must be a reviewer's name"
        ms = change.get("on_screen_ms")
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms < 1e10):
            return [], f"change {n}: on_screen_ms must be a number of milliseconds"
    return history, None


def read_decisions(files, registry=None, unnamed: str = "", roots=()) -> list[dict]:
    """Every line of every file checked (module doc); DecisionsError naming each problem as file:line. `unnamed`
    names the reviewer of lines without one (--reviewer); `roots`: where the project lies now (SourceFiles)."""
    registry = registry or load_registry()
    sources, out, problems = SourceFiles(registry, roots), [], []
    for path in map(Path, files):
        if not path.is_file():
            problems.append(f"{path}: no such decisions file")
            continue
        seen: dict[tuple, int] = {}
        try:
            for line_no, rec in iter_jsonl(path, allow_torn_tail=False,
                                           remedy="Export the decisions from the review page again."):
                decision, problem = check_line(rec, f"{path}:{line_no}", registry, sources, unnamed)
                if problem or decision is None:
                    problems.append(problem or f"{path}:{line_no}: not a decision")
                    continue
                key = (decision["mission"], decision["group_id"], decision["reviewer"])
                if key in seen:
                    problems.append(f"{path}:{line_no}: {decision['reviewer']} decided group {decision['group_id']} "
                                    f"of {decision['mission']} already at line {seen[key]}; a page exports one line "
                                    f"per group: keep the one you mean")
                    continue
                seen[key] = line_no
                out.append({**decision, "imported_from": str(path)})
        except JsonlError as exc:
            problems.append(str(exc))
    if problems:
        shown = problems[:MAX_PROBLEMS]
        more = f"\n  … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise DecisionsError(f"{len(problems)} problem(s); nothing was imported:\n  " + "\n  ".join(shown) + more)
    return out
