"""The project folder the app serves, read as it is on disk at each request: its judged days (a folder holding
`<mission>_verdicts.jsonl`, at most MAX_DEPTH folders down), each day's cards (the verdict lines a person must see:
route review or audit, gold checks among them), the labels folder and the photos.

A day is named by its folder's path inside the project (`days/day2`); a name the scan did not find is no day, so no
request names a folder. A day judged after the server started appears at the next request (the scan is cached for
SCAN_SECONDS), and a day whose files grew (the afternoon's work orders appended) is read again (each day is cached by
its files' sizes and times).

Photos are served only from inside the folder a verdict line names as its input (resolved against the verdict file's
folder), and only when that folder lies inside the project or a folder given with `--photos`: a line naming
`../../etc`, an absolute path elsewhere, or a photo that is a symlink out is refused (page.outside_why, the rule of
the review pages). A photo is addressed by its card and its position, never by a path a browser sends.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from qc_core.jsonl import JsonlError, iter_jsonl
from qc_core.missions import MissionError, load_registry
from qc_core.paths import resolved
from stage_b.monitoring.days import VERDICTS_SUFFIX
from stage_b.rules.routes import AUDIT, REVIEW, route_of_record

MAX_DEPTH = 4
SCAN_SECONDS = 2.0
# folders that hold photos, models, pages or training runs, never a judged day: not walked
NOT_DAYS = {"photos", "review", "thumbs", "models", "sft", "grpo", "stage_a", "logs", "labels", "node_modules",
            "__pycache__", "monitor"}


def card_id(mission: str, group_id: str) -> str:
    """A card's name in URLs and the database: a digest of its mission and group (the same in every queue)."""
    return hashlib.sha256(f"{mission}\0{group_id}".encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class Card:
    id: str
    day: str
    mission: str
    group_id: str
    line: dict            # the verdict line (the API sends only what review_app.cards chooses from it)
    source: Path          # the verdict file it is a line of
    assigned: tuple       # the reviewers the judge named (stage_b.labels.assign); () in a day without names
    blind: bool           # a blind audit (gold checks look the same): the model's answer is not shown before a decision
    order: int


@dataclass
class Day:
    id: str
    folder: Path
    cards: dict[str, Card] = field(default_factory=dict)
    verdicts: list[dict] = field(default_factory=list)   # every verdict line of the day (workload, automation)
    problems: list[str] = field(default_factory=list)
    signature: tuple = ()

    @property
    def open_queue(self) -> bool:
        """A day judged without named reviewers: one queue open to every reviewer account."""
        return not any(c.assigned for c in self.cards.values())

    def by_group(self, mission: str, group_id: str) -> Card | None:
        return self.cards.get(card_id(mission, group_id))


class Project:
    """The project folder (module doc)."""

    def __init__(self, root, labels_dir=None, photo_dirs=(), registry=None):
        self.root = Path(root).resolve()
        self.labels_dir = Path(labels_dir).resolve() if labels_dir else self.root / "labels"
        self.photo_roots = [self.root, *(Path(d).resolve() for d in photo_dirs)]
        self.registry = registry or load_registry()
        self._lock = threading.Lock()
        self._scan: tuple[float, dict[str, Path]] = (0.0, {})
        self._days: dict[str, Day] = {}

    # -- days ------------------------------------------------------------------------------------------------------
    def day_folders(self) -> dict[str, Path]:
        with self._lock:
            at, found = self._scan
            if time.monotonic() - at < SCAN_SECONDS:
                return found
        found = {}
        self._walk(self.root, 0, found)
        with self._lock:
            self._scan = (time.monotonic(), dict(sorted(found.items())))
            return self._scan[1]

    def _walk(self, folder: Path, depth: int, found: dict[str, Path]) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        if any(e.name.endswith(VERDICTS_SUFFIX) and e.is_file(follow_symlinks=False) and self._mission_of(e.name)
               for e in entries):
            found[folder.relative_to(self.root).as_posix() if folder != self.root else "."] = folder
        if depth >= MAX_DEPTH:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in NOT_DAYS:
                self._walk(Path(e.path), depth + 1, found)

    def _mission_of(self, file_name: str) -> str | None:
        try:
            return self.registry.resolve(file_name[: -len(VERDICTS_SUFFIX)]).name
        except MissionError:
            return None

    def day(self, day_id) -> Day | None:
        """The day named `day_id`, read again when its files changed; None for a name that is no day here."""
        folder = self.day_folders().get(day_id) if isinstance(day_id, str) else None
        if folder is None or not folder.is_dir():   # a day removed since the last scan is gone at once
            return None
        files = sorted(p for p in folder.glob(f"*{VERDICTS_SUFFIX}") if p.is_file() and self._mission_of(p.name))
        try:
            signature = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
        except OSError:
            return None
        with self._lock:
            cached = self._days.get(day_id)
            if cached is not None and cached.signature == signature:
                return cached
        day = Day(day_id, folder, signature=signature)
        for path in files:
            self._read(day, path, self._mission_of(path.name) or "")
        with self._lock:
            self._days[day_id] = day
        return day

    def _read(self, day: Day, path: Path, mission: str) -> None:
        try:
            for line_no, v in iter_jsonl(path):   # a torn last line (a judge writing now) is skipped
                gid = v.get("group_id")
                if not isinstance(gid, str) or not gid or v.get("mission") != mission:
                    day.problems.append(f"{path.name}:{line_no}: not a verdict line of {mission}")
                    continue
                day.verdicts.append(v)
                route = route_of_record(v)
                if route not in (REVIEW, AUDIT):
                    continue
                cid = card_id(mission, gid)
                assigned = v.get("assigned_to")
                day.cards[cid] = Card(cid, day.id, mission, gid, v, path,
                                      tuple(a for a in assigned if isinstance(a, str)) if isinstance(assigned, list)
                                      else (), route == AUDIT, len(day.cards))
        except (JsonlError, OSError) as exc:
            day.problems.append(str(exc))

    # -- photos ----------------------------------------------------------------------------------------------------
    def photo(self, card: Card, index: int) -> Path | None:
        """The file of the card's photo `index` (1-based), or None when it is not one the app may serve (module doc)."""
        images = card.line.get("images")
        folder = card.line.get("input_dir")
        if not isinstance(images, list) or not 1 <= index <= len(images) or not isinstance(folder, str) or not folder:
            return None
        rel = images[index - 1]
        if not isinstance(rel, str) or not rel:
            return None
        try:
            base = resolved(folder, card.source.parent).resolve()
            path = (base / rel).resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        inside_base = path == base or base in path.parents
        allowed = any(base == r or r in base.parents for r in self.photo_roots)
        if not (inside_base and allowed and path.is_file()):
            return None
        return path


__all__ = ["Project", "Day", "Card", "card_id"]
