"""`python -m stage_b.decisions`: reviewers' decisions from the review pages, imported as labels.

    python -m stage_b.decisions --decisions decisions.jsonl [more.jsonl …] --output_dir DIR

A review page (the judge's, evaluation's, Stage-A's audit) lets a reviewer decide each group and exports
`decisions.jsonl`, one line per decided group (DECISION_FIELDS):

    {"group_id", "mission", "decision": "通过" | "不通过" | "unsure", "note", "reviewer", "decided_at" (ISO time),
     "verdict" and "p_fail" (the model's, as the page showed them; null where it showed none),
     "source": {"file", "sha256"} (the verdicts, predictions' Stage-A or Stage-A file the page was made from)}

The import checks every line before it writes anything: the fields and their types, the decision, the mission
(names and aliases resolve to the registry's), the group's line in its source file unchanged since the page was made
(`source.line_sha256`, the digest of what the reviewer saw: lines appended to the file since leave it valid, a
re-judged group is refused by name; an export without it needs the whole file unchanged, `source.sha256`), the source
found where the page was made or, for a day folder moved or copied, relative to the page the export came from
(`source.relative`, `page`), each change of the decision's `history` ({from, to, at, by, on_screen_ms}), and the
group in it, and the reviewer's name (a line without one is refused unless --reviewer names it: two nameless
reviewers would merge into one). Every problem is named as file:line, and nothing is written while any remains.

It then appends the new lines to the append-only log `DIR/decisions.jsonl` (a line already there, such as the
same file imported twice, adds nothing), each with a copy of the group's Stage-A record as the source held it and its
chain digest (stage_b.labels.decisions_log: a line edited by hand afterwards is refused on every read).
From the whole log, per group: each reviewer's latest decision counts; groups where reviewers' definite decisions
disagree are conflicts, kept in the log and not labelled; `unsure` labels nothing. Every other decided group is
written to `DIR/<mission>_stage_a.jsonl` as a Stage-A record with `label` pass/fail, so that
`stage_b.evaluate --stage_a_dir DIR` and `run_grpo.sh stage_a_dir=DIR` read them like any labelled Stage-A file.
Printed per mission, over every import into the folder: decided, unsure, conflicts; for reviewed groups (chosen by
their score: the review band, not a sample of automatic work) how often the verdict line agreed, passed a failed
group or failed a passed one; for blind audits, escapes among auto-passed and overkills among auto-failed groups.
Then one table, a row per reviewer over every mission and day (gold answers and blind overlaps pooled, an error rate
with exact bounds, a verdict), written to `DIR/reviewers.jsonl` (stage_b.labels.reviewer_quality); the reviewers below
the
bar are named, and their lone labels certify nothing. The conflicts counted per mission are the ones listed after it.
Pure (stdlib and the project's pure core).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.jsonl import JsonlError, file_sha256, iter_jsonl, output_lock, record_digest, write_jsonl_atomic
from qc_core.missions import MissionError, load_registry
from qc_core.names import ReviewerNameError, reviewer_name
from qc_core.paths import with_input_dir_stored
from qc_core.records import image_key, utc_now

from stage_b.contract.numbers import pct1
from stage_b.labels.agreement import (DEFAULT_MIN_GOLD_ACCURACY, DEFAULT_MIN_KAPPA, check_min_gold_accuracy,
                                      check_min_kappa, gold_scores, pairwise, quality)
from stage_b.labels.decisions_log import LOG, DecisionsLogError, append_log, read_log
from stage_b.labels.reviewer_quality import (BELOW, MEETS, FILE as REVIEWERS, bar_of, confirmers, format_table, named,
                                             reviewer_table, unconfirmed_fails)
from stage_b.rules.routes import GROUP, REVIEW
from stage_b.contract.verdict import FAIL, PASS

DECISIONS = (PASS, FAIL, "unsure")
LABEL_OF = {PASS: "pass", FAIL: "fail"}
DECISION_FIELDS = ("group_id", "mission", "decision", "note", "reviewer", "decided_at", "verdict", "p_fail", "route",
                   "source", "page", "history")
# what a label keeps of a Stage-A source record: the record's own fields, nothing a file named as a source adds
LABEL_RECORD_FIELDS = ("group_id", "mission", "images", "per_image", "model", "created_at", "adapters", "input_dir",
                       "model_fingerprint")
MAX_PROBLEMS = 20


class DecisionsError(UserError):
    """Decisions that cannot be imported (names file:line and what to do)."""


FUTURE_SLACK = timedelta(minutes=5)   # a reviewer's clock may run a little ahead of this machine's
OLDEST = datetime(2000, 1, 1, tzinfo=timezone.utc)


def _decided_at(text) -> str:
    """A checked decided_at (decided_at_problem found none) in the log's one form."""
    when = _when(text)
    assert when is not None
    return when.isoformat(timespec="seconds")


def _when(text) -> datetime | None:
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
    when = _when(text)
    if when is None:
        return (f"decided_at {text!r} is not an ISO time with a time zone (e.g. 2026-11-27T09:30:00Z): without a zone "
                f"it cannot be ordered against other reviewers' decisions")
    if when > datetime.now(timezone.utc) + FUTURE_SLACK:
        return (f"decided_at {text!r} is in the future (a wrong clock would make it beat every later correction): "
                f"fix the reviewer's clock and decide again")
    if when < OLDEST:
        return f"decided_at {text!r} is before 2000: a wrong clock; fix it and decide again"
    return None


def _order(d: dict) -> datetime:
    """A logged decision's time for ordering; a line logged before times were checked sorts first."""
    return _when(d.get("decided_at")) or OLDEST


def _continues(longer: list, shorter: list) -> bool:
    """Whether the page's history `longer` holds `shorter`'s last change before a change of its own: the page appends
    each change to a group's history (dropping the oldest past 100), so such a history was written after the other."""
    last = shorter[-1]
    at = [k for k, change in enumerate(longer) if change == last]
    return bool(at) and at[-1] < len(longer) - 1


def replaces(new: dict, old: dict) -> bool:
    """Whether one reviewer's decision `new` on a group replaces their decision `old`: by the page's own sequence
    first (a decision whose history continues the other's was made after it on that page, whatever either clock says:
    a clock set back, or one stamped ahead within the slack, cannot make a correction lose), else by decided_at, a tie
    going to the line logged later."""
    h_new, h_old = new.get("history") or [], old.get("history") or []
    if h_new and h_old and h_new != h_old:
        if _continues(h_new, h_old):
            return True
        if _continues(h_old, h_new):
            return False
    return _order(new) >= _order(old)


def review_of(source_record: dict, decisions: list[dict], below: dict[str, dict] | None = None,
              census: dict[str, int] | None = None) -> dict:
    """The `review` record a label carries (stage_b.rules.routes): how the group reached a person, read from the verdict
    line the decision's source file holds (never from the export), when and by whom it was decided, and whether it
    may certify: not when the reviewers who gave the label are all below the agreement bar for its mission (`below`:
    stage_b.labels.agreement.quality's, for the mission) and no two of them agree on it. A Stage-A or prediction
    source, or a
    verdict line written before routes, has no route: not a fair sample. A group of a review band carries its band
    and `band_census`: whether every group of the band has a label (`census`: {band id: groups labelled})."""
    is_verdict = "p_fail" in source_record and "verdict" in source_record
    route = source_record.get("route") if is_verdict else None
    band = next((d["source"]["band"] for d in sorted(decisions, key=_order, reverse=True)
                 if isinstance(d.get("source", {}).get("band"), dict)), None)
    out = {"route": route, "review_scope": source_record.get("review_scope") if route else None,
           "audit_probability": source_record.get("audit_probability") if route else None,
           **({"band": band, "band_census": bool(census and census.get(band.get("id")) == band.get("groups"))}
              if band and route == REVIEW and source_record.get("review_scope") == GROUP else {}),
           "decided_at": max((d["decided_at"] for d in decisions), default=None),
           "reviewers": sorted({d["reviewer"] for d in decisions})}
    definite = [d for d in decisions if d["decision"] in LABEL_OF]
    weak = [d["reviewer"] for d in definite if (below or {}).get(d["reviewer"], {}).get("status") == "below the bar"]
    if definite and len(weak) == len(definite) and len(definite) < 2:
        out.update({"certifies": False, "quality": (below or {})[weak[0]]["why"]})
    return out


def stage_a_record(source_record: dict, label: str, review: dict | None = None) -> dict:
    """The group as a labelled Stage-A record, from a verdict line (summaries, images, input_dir) or a Stage-A
    record of the source file; `review` (review_of) says how it reached a reviewer."""
    if "per_image" in source_record:   # a Stage-A record: its known fields only (check_line validated it)
        record = {k: v for k, v in source_record.items() if k in LABEL_RECORD_FIELDS}
    else:
        record = {"group_id": source_record["group_id"], "mission": source_record["mission"],
                  "images": source_record["images"],
                  "per_image": {image_key(i): s for i, s in enumerate(source_record["summaries"], start=1)},
                  "model": ((source_record.get("rests_on") or {}).get("stage_a_model")
                            or "unknown (from a verdicts file)")}
        if source_record.get("input_dir"):
            record["input_dir"] = source_record["input_dir"]
        fingerprint = (source_record.get("rests_on") or {}).get("stage_a_fingerprint")
        if fingerprint:
            record["model_fingerprint"] = fingerprint
    out = {**record, "label": label, "created_at": record.get("created_at") or utc_now()}
    if review is not None:
        out["review"] = review
    return out


class _Sources:
    """Source files read once: their sha256 and their groups by (mission, group id)."""

    def __init__(self, registry):
        self.registry = registry
        self.files: dict[str, tuple[str, dict] | str] = {}

    def locate(self, source: dict, page) -> tuple[str, tuple[str, dict] | str]:
        """(the path, its facts) of a decision's source: where the page was made from, else relative to the page the
        export came from (a day folder moved or copied with its page), else the first path's problem."""
        first = self.get(source["file"])
        if not isinstance(first, str) or not source.get("relative") or not isinstance(page, str):
            return source["file"], first
        from urllib.parse import unquote, urlparse
        url = urlparse(page)
        if url.scheme != "file":
            return source["file"], first
        moved = os.path.normpath(Path(unquote(url.path)).parent / source["relative"])
        facts = self.get(moved)
        return (moved, facts) if not isinstance(facts, str) else (source["file"], first)

    def band(self, path, mission: str) -> dict | None:
        """The review band of a verdict file's mission: the groups the judge sent to review for their own p_fail or
        reply (route review, scope group; gold checks aside), named by a digest of their ids and counted. A label of
        such a group counts in a bound only when every group of its band was decided (stage_b.rules.routes)."""
        facts = self.get(str(path))
        if isinstance(facts, str):
            return None
        ids = sorted(gid for (m, gid), r in facts[1].items() if m == mission and r.get("route") == REVIEW
                     and r.get("review_scope") == GROUP and not r.get("gold"))
        if not ids:
            return None
        digest = hashlib.sha256("\0".join([mission, *ids]).encode("utf-8")).hexdigest()[:16]
        return {"id": digest, "groups": len(ids)}

    def get(self, path: str):
        if path not in self.files:
            p = Path(path)
            if not p.is_file():
                self.files[path] = f"its source file {path} does not exist"
            else:
                groups = {}
                try:
                    for _, rec in iter_jsonl(p, allow_torn_tail=False):
                        if isinstance(rec, dict) and isinstance(rec.get("group_id"), str):
                            try:
                                mission = self.registry.resolve(rec.get("mission", "")).name
                            except MissionError:
                                continue
                            groups[(mission, rec["group_id"])] = rec
                except JsonlError as exc:
                    self.files[path] = f"its source file cannot be read: {exc}"
                    return self.files[path]
                self.files[path] = (file_sha256(p), groups)
        return self.files[path]


def source_record_problem(record: dict) -> str | None:
    """Why a source file's line cannot become a label: a Stage-A record must pass the Stage-A contract, a verdict line
    must carry the summaries and photos the label is built from."""
    from qc_core.records import RecordError, validate_record
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


def check_line(rec, where: str, registry, sources: _Sources, unnamed: str = "") -> tuple[dict | None, str | None]:
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
    return {**decision, "record": record}, None


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


def _verified_source(rec: dict, mission: str, sources: _Sources) -> tuple[tuple | None, str | None]:
    """((the source path, its sha256, the group's line), or the problem): the file found where the page was made or
    relative to the page, and the group's line the one the reviewer saw (its digest), else the whole file unchanged
    (an export from before decisions named their group's line)."""
    source = rec["source"]
    path, facts = sources.locate(source, rec.get("page"))
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


def _identity(d: dict) -> tuple:
    """A decision once in the log, whatever else its source file gained since (the group's own line digest, where the
    log has it; older lines name the whole file's)."""
    return (d["mission"], d["group_id"], d["reviewer"], d["decision"], d["note"], d["decided_at"],
            d["source"].get("line_sha256") or d["source"]["sha256"])


MAX_HISTORY = 1000
HISTORY_FIELDS = ("from", "to", "at", "by", "on_screen_ms")


def _is_name(text: str) -> bool:
    try:
        reviewer_name(text)
        return True
    except ReviewerNameError:
        return False


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


def read_decisions(files, registry=None, unnamed: str = "") -> list[dict]:
    """Every line of every file checked (module doc); DecisionsError naming each problem as file:line. `unnamed`
    names the reviewer of lines without one (--reviewer)."""
    registry = registry or load_registry()
    sources, out, problems = _Sources(registry), [], []
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


def resolve(log: list[dict], gold: bool = False) -> dict[tuple, dict]:
    """Per (mission, group id): {"status": label | "unsure" | "conflict", "decisions": each reviewer's latest,
    "record", "verdict"} (module doc). Known-answer checks (stage_b.labels.gold: a decision on a verdict line marked
    `gold`)
    are resolved apart (`gold=True`): a gold check measures its reviewer and never replaces or hides the group's label
    from the day it was reviewed."""
    latest: dict[tuple, dict[str, dict]] = {}
    for d in log:
        if bool((d.get("record") or {}).get("gold")) != gold:
            continue
        mine = latest.setdefault((d["mission"], d["group_id"]), {})
        reviewer = d.get("reviewer") or "anonymous"
        old = mine.get(reviewer)
        if old is None or replaces(d, old):
            mine[reviewer] = d
    out = {}
    for key, by_reviewer in latest.items():
        definite = {d["decision"] for d in by_reviewer.values() if d["decision"] in LABEL_OF}
        newest = max(by_reviewer.values(), key=_order)
        status = ("conflict" if len(definite) > 1 else LABEL_OF[definite.pop()] if definite else "unsure")
        out[key] = {"status": status, "decisions": list(by_reviewer.values()), "record": newest["record"],
                    "verdict": newest.get("verdict"), "route": newest.get("route")}
    return out


def summary(groups: dict[tuple, dict]) -> dict[str, dict]:
    """Per mission, over every decision in the log: decided, agreed with the model's verdict line, its misses and
    overkills on the labelled groups; and split by route, because they measure different things: `reviewed` (groups
    the rule sent to a person: chosen by their score, so their rates describe the review band, not the work decided
    without review) and `audited` (blind audits of automatically decided groups: `escapes`, auto-passed groups a
    reviewer failed, are what stage_b.monitoring.monitor bounds)."""
    out: dict[str, dict] = {}
    for (mission, gid), g in sorted(groups.items()):
        if g["record"].get("gold"):   # a known-answer check: scored apart (stage_b.labels.agreement.gold_scores)
            continue
        s = out.setdefault(mission, {"decided": 0, "labelled": 0, "agreed": 0, "fail": 0, "missed": 0, "pass": 0,
                                     "overkilled": 0, "unsure": 0, "conflicts": 0, "conflict_groups": [],
                                     "reviewed": {"labelled": 0, "agreed": 0, "fail": 0, "missed": 0, "pass": 0,
                                                  "overkilled": 0},
                                     "audited": {"labelled": 0, "auto_passed": 0, "escapes": 0, "auto_failed": 0,
                                                 "overkills": 0}})
        s["decided"] += 1
        if g["status"] == "conflict":   # the count and the list printed beside it are this one set
            s["conflicts"] += 1
            s["conflict_groups"].append(gid)
            continue
        if g["status"] == "unsure":
            s["unsure"] += 1
            continue
        s["labelled"] += 1
        decided = PASS if g["status"] == "pass" else FAIL
        s["agreed"] += g["verdict"] == decided
        if decided == FAIL:
            s["fail"] += 1
            s["missed"] += g["verdict"] == PASS
        else:
            s["pass"] += 1
            s["overkilled"] += g["verdict"] == FAIL
        if g.get("route") == "audit":
            a = s["audited"]
            a["labelled"] += 1
            a["auto_passed"] += g["verdict"] == PASS
            a["escapes"] += g["verdict"] == PASS and decided == FAIL
            a["auto_failed"] += g["verdict"] == FAIL
            a["overkills"] += g["verdict"] == FAIL and decided == PASS
        else:
            r = s["reviewed"]
            r["labelled"] += 1
            r["agreed"] += g["verdict"] == decided
            r["fail" if decided == FAIL else "pass"] += 1
            r["missed"] += decided == FAIL and g["verdict"] == PASS
            r["overkilled"] += decided == PASS and g["verdict"] == FAIL
    for s in out.values():
        s["miss_rate"] = s["missed"] / s["fail"] if s["fail"] else None
        s["overkill_rate"] = s["overkilled"] / s["pass"] if s["pass"] else None
    return out


def check_labels_folder(output_dir: Path) -> None:
    """The import writes only into a labels folder it owns: a new or empty folder, or one holding its log. A folder of
    Stage-A files (or anything else) without the log is refused: the import would replace each <mission>_stage_a.jsonl
    with the decided groups only."""
    if not output_dir.exists() or (output_dir / LOG).exists():
        return
    if not output_dir.is_dir():
        raise DecisionsError(f"--output_dir {output_dir} is a file: give a labels folder")
    present = sorted(p.name for p in output_dir.iterdir())
    if present:
        shown = ", ".join(present[:5]) + (f" and {len(present) - 5} more" if len(present) > 5 else "")
        raise DecisionsError(f"--output_dir {output_dir} already holds {shown} and no {LOG}: it is not a labels folder "
                             f"this import wrote (a Stage-A folder's files would be replaced by the decided groups "
                             f"only). Give a labels folder of its own, new or empty")


def import_decisions(files, output_dir, registry=None, unnamed: str = "", min_kappa: float = DEFAULT_MIN_KAPPA,
                     min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY) -> dict:
    """Check, log, resolve and write (module doc). Returns {"added", "already", "groups", "summary", "written"}.
    `unnamed`: the reviewer of lines that name none (--reviewer); without it they are refused."""
    registry = registry or load_registry()
    output_dir = Path(output_dir)
    if (unnamed or "").strip():
        try:
            unnamed = reviewer_name(unnamed)
        except ReviewerNameError as exc:
            raise DecisionsError(f"--reviewer {exc}") from None
    else:
        unnamed = ""
    incoming = read_decisions(files, registry, unnamed)
    if not incoming:
        raise DecisionsError(f"no decision in {', '.join(map(str, files))}: decide groups on the review page before "
                             f"exporting (an export with nothing decided is empty)")
    check_labels_folder(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    log_path = output_dir / LOG
    with output_lock(log_path):
        try:
            log, chain = read_log(log_path)
        except DecisionsLogError as exc:
            raise DecisionsError(str(exc)) from None
        known = {_identity(d) for d in log}
        added = []
        for d in incoming:
            if _identity(d) not in known:
                known.add(_identity(d))
                added.append({**d, "imported_at": utc_now()})
        append_log(log_path, added, chain)
        log += added
        groups = resolve(log)
        agreement = pairwise({key: {d["reviewer"]: d["decision"] for d in g["decisions"]}
                              for key, g in groups.items()})
        gold_groups = resolve(log, gold=True)
        gold = gold_scores(gold_groups)
        bar = quality(agreement, min_kappa, gold, min_gold_accuracy)
        reviewers = reviewer_table(gold_groups, log, bar_of(min_gold_accuracy))
        waiting = {key: who for key, who in unconfirmed_fails(groups, confirmers(reviewers)).items()
                   if groups[key].get("route") == "audit" and groups[key]["verdict"] == PASS}
        write_jsonl_atomic(output_dir / REVIEWERS, reviewers)
        certify_bar = with_pooled(bar, reviewers, {m for m, _ in groups})
        written = {}
        census = band_census(groups)
        for mission in sorted({m for m, _ in groups}):   # a known-answer check scores its reviewers, labels nothing
            rows = [with_input_dir_stored(stage_a_record(g["record"], g["status"], review_of(
                g["record"], g["decisions"], certify_bar.get(mission), census)), output_dir)
                    for (m, _), g in sorted(groups.items())
                    if m == mission and g["status"] in ("pass", "fail") and not g["record"].get("gold")]
            path = output_dir / f"{registry.resolve(mission).stage_a_stem}.jsonl"
            write_jsonl_atomic(path, rows)
            written[mission] = (path, len(rows))
    without_route = sum(1 for d in incoming if (d["record"].get("route") is None))
    read: dict[str, dict[str, int]] = {}   # whose decisions each file held
    for d in incoming:
        by = read.setdefault(d["imported_from"], {})
        by[d["reviewer"]] = by.get(d["reviewer"], 0) + 1
    return {"added": len(added), "already": len(incoming) - len(added), "groups": groups, "read": read,
            "summary": summary(groups), "written": written, "without_route": without_route,
            "agreement": agreement, "quality": bar, "gold": gold, "reviewers": reviewers, "escapes_waiting": waiting,
            "reviewers_path": output_dir / REVIEWERS}


def with_pooled(bar: dict[str, dict], rows: list[dict], missions) -> dict[str, dict]:
    """The bar each label's review is held to: the reviewer table (stage_b.labels.reviewer_quality, pooled over every
    mission
    and day, exact bounds) where it has decided, the per-mission fragments (stage_b.labels.agreement.quality: a kappa
    below
    --min_kappa, which cannot say which of the two is wrong, or a per-mission gold share) where it has not. A reviewer
    the table names is below the bar in every mission; one it shows meeting the bar is not held back by a fragment."""
    out = {m: dict(by) for m, by in bar.items()}
    for row in rows:
        who = row["reviewer"]
        if row["verdict"] not in (BELOW, MEETS):
            continue
        for mission in missions:
            out.setdefault(mission, {})[who] = {
                "status": "below the bar" if row["verdict"] == BELOW else "ok",
                "why": f"{who}, {row['why']} (over every mission and day)"}
    return out


def band_census(groups: dict) -> dict[str, int]:
    """{band id: how many of its groups have a label (pass or fail)}, over every group the log resolves."""
    out: dict[str, int] = {}
    for g in groups.values():
        if g["status"] not in ("pass", "fail") or g["record"].get("gold"):
            continue
        bands = {d["source"]["band"]["id"] for d in g["decisions"] if isinstance(d.get("source", {}).get("band"), dict)}
        for band in bands:
            out[band] = out.get(band, 0) + 1
    return out


def print_agreement(agreement: dict, bar: dict, gold: dict | None = None, decided=frozenset()) -> None:
    """Per mission and pair of reviewers, Cohen's kappa with its interval; per reviewer, agreement with the others
    and accuracy on known-answer groups (stage_b.labels.agreement). These fragments name no one: a reviewer the reviewer
    table has not decided (`decided`: those it shows below or meeting the bar) and a fragment holds back has their
    lone labels in that mission held back, said as such."""

    def held_back(mission: str, r: str, why: str) -> None:
        if r not in decided:
            print(f"{mission}: {printable(r)}'s lone labels in this mission certify nothing until a second reviewer "
                  f"confirms them ({printable(why)}); whether {printable(r)} is below the bar is the reviewer "
                  f"table's verdict, once gold answers decide it", file=sys.stderr)
    for mission, by_reviewer in sorted((gold or {}).items()):
        for r, g in sorted(by_reviewer.items()):
            print(f"{mission}: {printable(r)} on known-answer groups: right on {g['correct']} of {g['n']}"
                  + (f" ({pct1(g['correct'] / g['n'])})" if g["n"] else "") + f", {g['unsure']} unsure")
    for mission in sorted(set(bar) - set(agreement)):
        for r, q in sorted(bar[mission].items()):
            if q["status"] == "below the bar":
                held_back(mission, r, q["why"])
    for mission, by_pair in sorted(agreement.items()):
        mine: dict[str, list[int]] = {}
        for (a, b), k in sorted(by_pair.items()):
            shown = "n/a (one answer only)" if k["kappa"] is None else \
                f"{k['kappa']:.2f} [{k['ci95'][0]:.2f}, {k['ci95'][1]:.2f}]"
            print(f"{mission}: {printable(a)} and {printable(b)} both decided {k['n']} group(s) ({k['unsure']} more "
                  f"with an unsure): agreed on {k['agreed']}, Cohen's kappa {shown}")
            for r in (a, b):
                mine.setdefault(r, [0, 0])
                mine[r][0] += k["agreed"]
                mine[r][1] += k["n"]
        for r, (agreed, n) in sorted(mine.items()):
            if n:
                print(f"{mission}: {printable(r)} agreed with the others on {agreed} of {n} ({pct1(agreed / n)})")
        for r, q in sorted((bar.get(mission) or {}).items()):
            if q["status"] == "below the bar":
                held_back(mission, r, q["why"])


def print_reviewers(rows: list[dict], path) -> None:
    """The reviewer table (stage_b.labels.reviewer_quality): one row per reviewer over every mission and day, and each
    reviewer below the bar named on stderr with why."""
    if not rows:
        return
    print(f"reviewers, over every mission and day imported into this folder (bar: an error rate of "
          f"{100 * rows[0]['bar']:.1f}%, 1 - --min_gold_accuracy; exact bounds at {rows[0]['confidence']:.0%} "
          f"confidence; written to {path}):")
    print(format_table(rows, printable))
    for who, why in named(rows).items():
        print(f"{printable(who)} is below the bar: {printable(why)}. Their labels train but certify nothing in any "
              f"mission until a second reviewer confirms them", file=sys.stderr)


def printable(text: str) -> str:
    """A name as the terminal may show it: control characters (escape codes) written as \\xNN, never run."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(text))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m stage_b.decisions", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--decisions", nargs="+", required=True, help="decisions.jsonl files exported from review pages")
    p.add_argument("--output_dir", required=True, help="where decisions.jsonl (the log) and <mission>_stage_a.jsonl go")
    p.add_argument("--min_kappa", default=str(DEFAULT_MIN_KAPPA),
                   help="the agreement bar (stage_b.labels.agreement): a reviewer whose Cohen's kappa with another, "
                        "on 10 or "
                        "more groups both decided, is below it gives labels that train but certify nothing until a "
                        "second reviewer confirms them (default %(default)s)")
    p.add_argument("--min_gold_accuracy", default=str(DEFAULT_MIN_GOLD_ACCURACY),
                   help="the known-answer bar: the reviewer table's error bar is 1 minus it (a reviewer whose exact "
                        "90%% lower bound, over every gold answer of every mission and day, is above it is named, and "
                        "their lone labels certify nothing until confirmed); per mission, a reviewer right on fewer "
                        "than this share of 5 or more gold groups has their lone labels there held back "
                        "(default %(default)s)")
    p.add_argument("--reviewer", default="", help="the reviewer of lines that name none (a page exported without a "
                                                 "name); without it such lines are refused")
    args = p.parse_args(argv)

    def body() -> int:
        result = import_decisions(args.decisions, args.output_dir, unnamed=args.reviewer,
                                  min_kappa=check_min_kappa(args.min_kappa),
                                  min_gold_accuracy=check_min_gold_accuracy(args.min_gold_accuracy))
        for path, by in result["read"].items():
            print(f"read {path}: " + ", ".join(f"{n} decision(s) by {printable(who)}" for who, n in by.items()))
        print(f"{result['added']} decision(s) added to {Path(args.output_dir) / LOG}, "
              f"{result['already']} already there")
        if result["without_route"]:
            print(f"note: {result['without_route']} decision(s) come from a page or verdict file without routes (made "
                  f"before audits): their labels train, and are treated as chosen by score, so no promise's bound "
                  f"counts them", file=sys.stderr)
        for mission, s in result["summary"].items():
            path, n = result["written"][mission]
            r, a = s["reviewed"], s["audited"]
            print(f"{mission}: {s['decided']} decided in all imports so far, {s['unsure']} unsure, "
                  f"{s['conflicts']} conflict(s) -> {n} labelled in {path}")
            if r["labelled"]:
                print(f"  reviewed (sent to a person by the rule, so not a sample of the work decided without "
                      f"review): the verdict line agreed on {r['agreed']} of {r['labelled']}, passed {r['missed']} of "
                      f"{r['fail']} the reviewer failed, failed {r['overkilled']} of {r['pass']} the reviewer passed")
            if a["labelled"]:
                print(f"  blind audits of work decided without review: {a['escapes']} escape(s) in {a['auto_passed']} "
                      f"auto-passed, {a['overkills']} overkill(s) in {a['auto_failed']} auto-failed (the promise's "
                      f"live check: python -m stage_b.monitor)")
            for (m, gid), who in sorted(result["escapes_waiting"].items()):
                if m == mission:
                    print(f"  escape waiting for a second person: group {printable(gid)}, decided 不通过 by "
                          f"{printable(who)} alone; the monitor counts it once another reviewer decides it on that "
                          f"day's page (or once {printable(who)}'s measured error rate meets the bar)")
        print_agreement(result["agreement"], result["quality"], result["gold"],
                        {r["reviewer"] for r in result["reviewers"] if r["verdict"] in (BELOW, MEETS)})
        print_reviewers(result["reviewers"], result["reviewers_path"])
        for mission, s in result["summary"].items():   # the groups counted as conflicts above, each named
            for gid in s["conflict_groups"]:
                g = result["groups"][(mission, gid)]
                who = ", ".join(f"{printable(d['reviewer'])}: {d['decision']}" for d in g["decisions"])
                print(f"conflict: group {printable(gid)} of {mission} ({who}); not labelled until the reviewers agree",
                      file=sys.stderr)
        return 0
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
