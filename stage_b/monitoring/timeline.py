"""One timeline per mission across operating points: a re-certified point's monitor no longer erases the one before.

When the monitor runs at an operating point that replaces another (its `replaces` block: the file and the replaced
point's identity), the replaced point's days are monitored once more, whole (its last day was judged after its last
monitor ran), with the same labels, and archived under `<output_dir>/points/<identity>/monitor.json` (with its page);
an archive is replaced only by one holding at least its days, so it is never cut. The replaced point's own archives
(the point it replaced in turn) stay where they are. monitor.json then carries `replaced` (the point it replaced:
file, identity, archive) and `timeline`: every archived point, oldest first, each with its promise per mission, its
days and states, a withdrawal and why, and the acceptance of the point that replaced it (who, when, the words:
stage_b.rules.acceptances, or the judge's --accept_weaker words on the verdict lines). The page shows it above the
current point's days. Pure (the monitor's own modules).
"""
from __future__ import annotations

import html
import json
import os
from pathlib import Path

from stage_b.monitoring.days import MonitorError
from stage_b.monitoring.owner_status import owner_status
from stage_b.monitoring.monitor_file import load_monitor

POINTS = "points"


def archive_path(out: Path, identity: str) -> Path:
    return Path(out) / POINTS / identity[:16] / "monitor.json"


def summary(monitor: dict, archive: Path | None, replaced_by: dict | None = None) -> dict:
    """A timeline entry: the point, its days, and per mission its promise, states by day, withdrawal and status."""
    point = monitor.get("operating_point") or {}
    return {"identity": point.get("identity") or point.get("sha256"), "file": point.get("file"),
            "archive": str(archive) if archive else None, "days": list(monitor.get("days") or []),
            "created_at": monitor.get("created_at"), "replaced_by": replaced_by,
            "missions": {mission: {"promise": (m.get("promise") or {}).get("text"), "status": m.get("status"),
                                   "states": [[d["day"], d.get("state"), d.get("status")] for d in m.get("days") or []],
                                   "withdrawn_day": m.get("withdrawn_day"), "withdrawn_at": m.get("withdrawn_at"),
                                   "withdrawn_why": next((d.get("state_why") for d in m.get("days") or []
                                                          if d.get("withdrawn_here")), None),
                                   "status_line": owner_status(m, monitor.get("restore"))}
                         for mission, m in (monitor.get("missions") or {}).items()}}


def write_archive(out: Path, monitor: dict) -> Path:
    """The replaced point's monitor.json into its archive, unless the archive already holds more days (never cut)."""
    identity = (monitor.get("operating_point") or {}).get("identity") or monitor["operating_point"]["sha256"]
    path = archive_path(out, identity)
    if path.is_file():
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            kept = None
        if kept and not set(kept.get("days") or []) <= set(monitor.get("days") or []):
            return path   # the archive saw days this run cannot: it stands
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".monitor.json.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(monitor, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)
    return path


def earlier_entries(out: Path) -> list[dict]:
    """Every archived point under `out`, oldest first (by when its monitor was written), each read back checked as
    any monitor.json is (stage_b.monitoring.monitor_file: an archive edited by hand does not add up); one that does
    not is an entry that says so, never a history shown as if it were true."""
    entries: list[tuple[str, Path, dict]] = []
    broken: list[dict] = []
    for path in sorted((Path(out) / POINTS).glob("*/monitor.json")):
        try:
            monitor: dict = dict(load_monitor(path))
        except MonitorError as exc:
            broken.append({"identity": path.parent.name, "file": None, "archive": str(path), "days": [],
                           "missions": {}, "replaced_by": None,
                           "error": f"{exc}: restore the archive from a backup, or move it aside and run the monitor "
                                    f"again at the point that replaced it"})
            continue
        entries.append((str(monitor.get("created_at") or ""), path, monitor))
    return [summary(m, p) for _, p, m in sorted(entries, key=lambda e: (e[0], str(e[1])))] + broken


def acceptance_on_days(days: list) -> str | None:
    """The owner's acceptance words the judge recorded on the current point's verdict lines (--accept_weaker or the
    app's), the first found, from the days the monitor already read (stage_b.monitoring.days.Day)."""
    for day in days:
        for lines in day.verdicts.values():
            for rec in lines:
                if rec.get("accepted_weaker"):
                    return str(rec["accepted_weaker"])
    return None


def link_replaced(timeline: list[dict], replaced: dict | None, acceptance: str | None, current: str) -> list[dict]:
    """The entry of the replaced point names the point that replaced it and the acceptance."""
    for entry in timeline:
        if replaced and entry["identity"] == replaced.get("identity"):
            entry["replaced_by"] = {"identity": current, "accepted": acceptance}
    return timeline


def timeline_html(monitor: dict) -> str:
    """The earlier points as a list on the page, oldest first, then the current point's heading."""
    e = html.escape
    timeline = monitor.get("timeline") or []
    if not timeline:
        return ""
    items = []
    for entry in timeline:
        if entry.get("error"):
            items.append(f"<li><b>archive {e(str(entry['archive']))}</b>: {e(entry['error'])}</li>")
            continue
        missions = "".join(
            f"<li>{e(mission)}: {e(m['promise'] or 'no promise')}; days "
            + e(", ".join(f"{day} {state}" for day, state, _ in m["states"]) or "none")
            + (f"; <b>withdrawn on {e(str(m['withdrawn_day']))}</b> because {e(str(m['withdrawn_why']))}"
               if m.get("withdrawn_day") else "") + "</li>"
            for mission, m in entry["missions"].items())
        by = entry.get("replaced_by") or {}
        replaced = (f"<p>replaced by {e(str(by.get('identity'))[:12])}…"
                    + (f", accepted: {e(str(by['accepted']))}" if by.get("accepted") else "") + "</p>") if by else ""
        items.append(f"<li>operating point {e(str(entry['file']))} (identity {e(str(entry['identity'])[:12])}…), days "
                     f"{e(', '.join(entry['days']) or 'none')}<ul>{missions}</ul>{replaced}</li>")
    return ("<h2>Timeline: the operating points before this one</h2><ol class='timeline'>" + "".join(items)
            + "</ol><h2>This operating point</h2>")
