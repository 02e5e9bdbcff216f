"""What the lead's and the owner's pages show, computed from the project's files with the code that writes them: the
reviewer table, the escapes waiting for a second person and the conflicts (from the labels folder's decisions log:
stage_b.labels.resolve and reviewer_quality), the promises in words and each mission's state and next audit share
(the operating points and monitor.json files in the project, read by their checked readers: a file that does not
read is shown as the error it is, never as a promise), and a day's workload and its price (stage_b.rules.workload).
"""
from __future__ import annotations

import os
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlError
from review_app.project import NOT_DAYS, MAX_DEPTH, Project, card_id
from stage_b.contract.verdict import PASS
from stage_b.labels.agreement import DEFAULT_MIN_GOLD_ACCURACY
from stage_b.labels.decisions_log import LOG, read_log
from stage_b.labels.resolve import resolve
from stage_b.labels.reviewer_quality import bar_of, confirmers, reviewer_table, unconfirmed_fails
from stage_b.monitoring.monitor_file import load_monitor
from stage_b.monitoring.owner_status import owner_status
from stage_b.rules.acceptances import recorded as recorded_acceptance
from stage_b.rules.operating_point import load_operating_point, point_keys
from stage_b.rules.point_identity import same_point
from stage_b.rules.replacement import recomputed_weaker
from stage_b.rules.workload import day_workload, measured_pace, table

OPERATING_POINT = "operating_point.json"
MONITOR = "monitor.json"


def named_files(project: Project, name: str) -> list[Path]:
    """Every file called `name` in the project, at most MAX_DEPTH folders down (photo and model folders skipped)."""
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for e in entries:
            if e.name == name and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
            elif depth < MAX_DEPTH and e.is_dir(follow_symlinks=False) and not e.name.startswith(".") \
                    and (e.name not in NOT_DAYS or e.name == "monitor"):
                walk(Path(e.path), depth + 1)
    walk(project.root, 0)
    return sorted(found)


def relative(project: Project, path: Path) -> str:
    return path.relative_to(project.root).as_posix()


def labels_log(project: Project) -> tuple[list[dict], str | None]:
    """(the decisions log, or [] and why it cannot be read)."""
    try:
        log, _ = read_log(project.labels_dir / LOG)
        return log, None
    except (UserError, JsonlError, OSError) as exc:
        return [], str(exc)


def where_is(project: Project) -> dict[tuple[str, str], list[dict]]:
    """{(mission, group id): [{day, card}]}: where each reviewed group's card is, for links."""
    out: dict[tuple[str, str], list[dict]] = {}
    for day_id in project.day_folders():
        day = project.day(day_id)
        for c in (day.cards.values() if day else ()):
            out.setdefault((c.mission, c.group_id), []).append({"day": day_id, "card": c.id})
    return out


def reviewers_view(project: Project, min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY) -> dict:
    """The reviewer table, the escapes waiting for a second person and the conflicts (module doc)."""
    log, problem = labels_log(project)
    groups = resolve(log)
    rows = reviewer_table(resolve(log, gold=True), log, bar_of(min_gold_accuracy))
    where = where_is(project)
    waiting = [{"mission": m, "group_id": g, "reviewer": who, "cards": where.get((m, g), [])}
               for (m, g), who in sorted(unconfirmed_fails(groups, confirmers(rows)).items())
               if groups[(m, g)].get("route") == "audit" and groups[(m, g)]["verdict"] == PASS]
    conflicts = [{"mission": m, "group_id": g, "cards": where.get((m, g), []),
                  "decisions": [{"reviewer": d["reviewer"], "decision": d["decision"], "note": d.get("note") or ""}
                                for d in grp["decisions"]]}
                 for (m, g), grp in sorted(groups.items()) if grp["status"] == "conflict"]
    adjudicated = [{"mission": m, "group_id": g, **grp["adjudication"]} for (m, g), grp in sorted(groups.items())
                   if "adjudication" in grp]
    return {"rows": rows, "escapes_waiting": waiting, "conflicts": conflicts, "adjudicated": adjudicated,
            "log_problem": problem, "labels": str(project.labels_dir)}


def is_conflict(project: Project, mission: str, group_id: str) -> bool:
    log, _ = labels_log(project)
    group = resolve(log).get((mission, group_id))
    return bool(group and group["status"] == "conflict")


def promises_view(project: Project, accepted: list[dict]) -> list[dict]:
    """Each operating point in the project: its promises in the owner's words, each mission's state, status and
    next audit share from the monitor of that point, and what is weaker than the point it replaces (module doc)."""
    monitors: list[tuple[Path, dict]] = []
    for path in named_files(project, MONITOR):
        try:
            monitors.append((path, dict(load_monitor(path))))
        except (UserError, OSError, ValueError) as exc:
            monitors.append((path, {"error": str(exc)}))
    out = []
    for path in named_files(project, OPERATING_POINT):
        entry: dict = {"point": relative(project, path)}
        try:
            op = load_operating_point(path)
            keys = point_keys(path, op)
            replaces = op.extra.get("replaces")
            weaker = recomputed_weaker(path, op)   # as the judge works it out: from the replaced file itself
            acceptance = recorded_acceptance(path, keys) if weaker else None
        except (UserError, OSError, ValueError) as exc:
            out.append({**entry, "error": f"{exc} (no promise of this file holds until it reads)"})
            continue
        monitor_path, monitor = next(((p, m) for p, m in reversed(monitors) if "error" not in m
                                      and same_point(keys, m["operating_point"])), (None, None))
        missions = {}
        for name, point in op.missions.items():
            live = (monitor or {}).get("missions", {}).get(name) or {}
            missions[name] = {"status_line": owner_status(live, monitor.get("restore")) if live and monitor else
                              "not certified: people decide every group" if not point.certified else
                              "not yet verified: no monitor of this operating point yet",
                              "certified": point.certified, "promise": point.promise,
                              "state": live.get("state"), "status": live.get("status"), "why": live.get("why"),
                              "next_audit_share": live.get("next_audit_share"),
                              "withdrawn_day": live.get("withdrawn_day")}
        out.append({**entry, "identity": keys.identity, "sha256": keys.file_sha256, "missions": missions,
                    "weaker": weaker,
                    "replaces": (replaces or {}).get("path"), "acceptance": acceptance,
                    "monitor": relative(project, monitor_path) if monitor_path else None,
                    "monitor_errors": [{"file": relative(project, p), "error": m["error"]} for p, m in monitors
                                       if "error" in m]})
    return out


def monitor_view(project: Project) -> list[dict]:
    """Every monitor.json in the project, per mission: its state, status, detectors and next share, day by day."""
    out = []
    for path in named_files(project, MONITOR):
        try:
            monitor = load_monitor(path)
        except (UserError, OSError, ValueError) as exc:
            out.append({"file": relative(project, path), "error": str(exc)})
            continue
        missions: dict[str, dict] = {}
        for name, m in monitor["missions"].items():
            missions[name] = {"state": m["state"], "status": m["status"], "why": m["why"],
                              "next_audit_share": m["next_audit_share"], "withdrawn_day": m.get("withdrawn_day"),
                              "days": [{k: d.get(k) for k in ("day", "judged", "automation_share", "state",
                                                               "audit_share", "audited", "audited_auto_passed",
                                                               "escapes", "escapes_unconfirmed", "miss_detector",
                                                               "escape_detector", "status", "next_audit_share")}
                                       for d in m["days"]]}
        plot = path.parent / "monitor.png"
        view: dict = {"file": relative(project, path), "created_at": monitor["created_at"], "missions": missions,
                      "plot": relative(project, plot) if plot.is_file() else None}
        out.append(view)
    return out


def workload_view(project: Project, day_id: str, cost_per_hour: float | None) -> dict | None:
    """A day's workload, per mission and in all, at the pace the decisions log measured (or the stated default)."""
    day = project.day(day_id)
    if day is None:
        return None
    log, _ = labels_log(project)
    pace = measured_pace(log)
    work = day_workload(day.verdicts, pace)
    columns, rows = table(work)
    hours = work["overall"]["person_hours"]
    return {"day": day_id, "columns": columns, "rows": rows, "pace": pace.source, "person_hours": hours,
            "cost": round(hours * cost_per_hour, 2) if cost_per_hour else None}


def search(project: Project, text: str, limit: int = 50) -> list[dict]:
    """Cards whose group id holds `text` (any case), across every day."""
    needle = text.casefold()
    out = []
    for day_id in project.day_folders():
        day = project.day(day_id)
        for c in (day.cards.values() if day else ()):
            if needle in c.group_id.casefold():
                out.append({"day": day_id, "card": c.id, "mission": c.mission, "group_id": c.group_id})
                if len(out) >= limit:
                    return out
    return out


__all__ = ["reviewers_view", "promises_view", "monitor_view", "workload_view", "search", "is_conflict", "card_id"]
