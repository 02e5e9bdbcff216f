"""Discovery of photo groups on disk. Pure (os/re only).

Layout: <input_dir>/<mission or alias>/<label folder>/<group folder>/<images>.
Problems that concern one group or folder (empty group, unknown label folder, duplicate group
id) become `DiscoveryIssue`s that the caller writes to the errors file; the rest goes on.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .missions import Mission, MissionError, Registry

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png"})
GROUP_ID_RE = re.compile(r"^(QC-[A-Za-z]+-\d{8}-\d+)")
_CHUNKS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Group:
    group_id: str
    mission: str          # canonical name
    label: str            # "pass" | "fail"
    images: tuple[str, ...]  # POSIX paths relative to input_dir, natural order

    @property
    def folder(self) -> str:
        return str(PurePosixPath(self.images[0]).parent)


@dataclass(frozen=True)
class DiscoveryIssue:
    mission: str
    path: str             # relative to input_dir
    error: str
    group_id: str | None = None


def natural_key(text: str) -> tuple:
    """`2.jpg` before `10.jpg`; case-insensitive; total order (ties broken by the raw text)."""
    parts = _CHUNKS.split(text)
    key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p.casefold()) for p in parts if p != "")
    return key + ((2, 0, text),)


def path_order_key(relative_path: str) -> tuple:
    """Discovery order of a group folder (or of any file in it): natural order of its path parts."""
    parts = PurePosixPath(relative_path).parts
    return tuple(natural_key(p) for p in parts[:3])


def group_id_for(folder_name: str, first_image: str) -> str:
    match = GROUP_ID_RE.match(first_image)
    return match.group(1) if match else folder_name


def _visible(entries):
    return [e for e in entries if not e.name.startswith(".")]


def _scandir(path: Path) -> list[os.DirEntry]:
    with os.scandir(path) as it:
        return sorted(_visible(it), key=lambda e: natural_key(e.name))


def mission_folders(input_dir: Path, registry: Registry, missions: list[Mission],
                    strict_unknown: bool) -> dict[str, list[Path]]:
    """Folders under input_dir per selected mission (canonical name and aliases).

    With strict_unknown (`--mission all`), a folder that names no known mission is an error:
    running "all" while a mission's photos are silently left out is the failure we guard against.
    """
    if not input_dir.is_dir():
        raise FileNotFoundError(f"input_dir does not exist or is not a folder: {input_dir}")
    wanted = {m.name for m in missions}
    found: dict[str, list[Path]] = {m.name: [] for m in missions}
    unknown = []
    for entry in _scandir(input_dir):
        if not entry.is_dir():
            continue
        try:
            mission = registry.resolve(entry.name)
        except MissionError:
            unknown.append(entry.name)
            continue
        if mission.name in wanted:
            found[mission.name].append(Path(entry.path))
    if strict_unknown and unknown:
        raise MissionError(
            f"folders under {input_dir} name no known mission: {', '.join(unknown)}; known missions: "
            f"{', '.join(registry.names)}. Add them to {registry.path} or pass --mission explicitly."
        )
    return found


def discover_mission(input_dir: Path, mission: Mission, folders: list[Path],
                     registry: Registry) -> tuple[list[Group], list[DiscoveryIssue]]:
    """All groups of one mission in discovery order, plus the issues found on the way."""
    input_dir = Path(input_dir)
    candidates = []  # (order key, label, folder relative path, image names)
    issues: list[DiscoveryIssue] = []
    for mission_dir in folders:
        for label_entry in _scandir(mission_dir):
            if not label_entry.is_dir():
                continue
            rel_label = Path(label_entry.path).relative_to(input_dir).as_posix()
            label = registry.label_of_folder(label_entry.name)
            if label is None:
                issues.append(DiscoveryIssue(mission.name, rel_label,
                              f"unknown label folder {label_entry.name!r} in {rel_label}; expected one of "
                              f"{', '.join(registry.label_folders)} (skipped)"))
                continue
            for group_entry in _scandir(Path(label_entry.path)):
                if not group_entry.is_dir():
                    continue
                rel_group = f"{rel_label}/{group_entry.name}"
                images = [e.name for e in _scandir(Path(group_entry.path))
                          if e.is_file() and os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS]
                candidates.append((path_order_key(rel_group), label, rel_group, group_entry.name, images))
    candidates.sort(key=lambda c: c[0])

    groups: list[Group] = []
    first_seen: dict[str, str] = {}
    for _, label, rel_group, folder_name, images in candidates:
        if not images:
            issues.append(DiscoveryIssue(mission.name, rel_group,
                          f"empty group: no .jpg/.jpeg/.png file in {rel_group}", group_id=folder_name))
            continue
        gid = group_id_for(folder_name, images[0])
        if gid in first_seen:
            issues.append(DiscoveryIssue(mission.name, rel_group,
                          f"duplicate group id {gid!r}: {rel_group} repeats {first_seen[gid]} (kept the first)",
                          group_id=gid))
            continue
        first_seen[gid] = rel_group
        groups.append(Group(gid, mission.name, label, tuple(f"{rel_group}/{n}" for n in images)))
    return groups, issues
