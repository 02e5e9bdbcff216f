"""Discovery of photo groups on disk. Pure (os/re only).

Layout: <input_dir>/<mission or alias>/<label folder>/<group folder>/<images>.
Problems that concern one group or folder (empty group, unknown label folder, a group id found twice,
an unreadable folder, a dangling photo link, a file where a folder belongs) become `DiscoveryIssue`s that
the caller writes to the errors file; the rest goes on.
"""
from __future__ import annotations

import os
import re
import unicodedata
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


def _is_dir(entry: os.DirEntry) -> bool:
    try:   # a symlink loop raises (ELOOP) instead of answering False
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


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
        if not _is_dir(entry):
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


def _entries(path: Path, rel: str, what: str) -> tuple[list[os.DirEntry], str | None]:
    """(visible entries in natural order, or why the folder cannot be read)."""
    try:
        return _scandir(path), None
    except OSError as exc:
        return [], f"cannot read {what} {rel}: {exc.strerror or exc} (skipped)"


def _scan_group(path: Path, rel_group: str) -> tuple[list[str], str | None]:
    """(photo names in natural order, why the group cannot be written whole, or None)."""
    entries, problem = _entries(path, rel_group, "group folder")
    if problem:
        return [], problem
    photos, unreadable = [], []
    for e in entries:
        if os.path.splitext(e.name)[1].lower() not in IMAGE_EXTENSIONS:
            continue  # other files and sub-folders are no photos (README)
        (photos if _is_file(e) else unreadable).append(e.name)
    if unreadable:   # a dangling or looping symlink, or a folder named like a photo: never a group without it
        return photos, (f"photo(s) {', '.join(unreadable)} in {rel_group} cannot be read as files (a dangling or "
                        f"looping symlink, or a folder); fix them, then rerun with --retry_errors")
    if not photos:
        return photos, f"empty group: no .jpg/.jpeg/.png file in {rel_group}"
    return photos, None


def _not_a_folder(entry: os.DirEntry, rel: str, expected: str) -> str:
    if entry.is_symlink() and not _is_dir(entry):
        return f"{rel} is a symlink that does not resolve (dangling or a loop), not a {expected} (skipped)"
    if os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
        return f"photo {rel} lies loose outside a group folder (skipped); move it into its group's folder"
    return f"{rel} is a file, not a {expected} (skipped)"


def discover_mission(input_dir: Path, mission: Mission, folders: list[Path],
                     registry: Registry) -> tuple[list[Group], list[DiscoveryIssue]]:
    """All groups of one mission in discovery order, plus the issues found on the way. Nothing on disk is
    passed over without an issue: a file where a folder belongs, a loose photo, an unreadable folder, a
    dangling photo link. Group ids are NFC-normalised first; an id found twice (two folders, two labels,
    or two spellings of the mission folder) fails every copy, naming them all, since no label can be trusted."""
    input_dir = Path(input_dir)
    candidates = []  # (order key, label, folder relative path, group id, image names, problem)
    issues: list[DiscoveryIssue] = []
    for mission_dir in folders:
        rel_mission = mission_dir.relative_to(input_dir).as_posix()
        label_entries, problem = _entries(mission_dir, rel_mission, "mission folder")
        if problem:
            issues.append(DiscoveryIssue(mission.name, rel_mission, problem))
        for label_entry in label_entries:
            rel_label = f"{rel_mission}/{label_entry.name}"
            if not _is_dir(label_entry):
                issues.append(DiscoveryIssue(mission.name, rel_label, _not_a_folder(label_entry, rel_label,
                                                                                    "label folder")))
                continue
            label = registry.label_of_folder(label_entry.name)
            if label is None:
                issues.append(DiscoveryIssue(mission.name, rel_label,
                              f"unknown label folder {label_entry.name!r} in {rel_label}; expected one of "
                              f"{', '.join(registry.label_folders)} (skipped)"))
                continue
            group_entries, problem = _entries(Path(label_entry.path), rel_label, "label folder")
            if problem:
                issues.append(DiscoveryIssue(mission.name, rel_label, problem))
            for group_entry in group_entries:
                rel_group = f"{rel_label}/{group_entry.name}"
                if not _is_dir(group_entry):
                    issues.append(DiscoveryIssue(mission.name, rel_group, _not_a_folder(group_entry, rel_group,
                                                                                        "group folder")))
                    continue
                images, problem = _scan_group(Path(group_entry.path), rel_group)
                gid = unicodedata.normalize("NFC", group_id_for(group_entry.name, images[0] if images else ""))
                candidates.append((path_order_key(rel_group), label, rel_group, gid, images, problem))
    candidates.sort(key=lambda c: c[0])

    places: dict[str, list[str]] = {}
    for _, label, rel_group, gid, _, _ in candidates:
        places.setdefault(gid, []).append(f"{rel_group} ({label})")
    groups: list[Group] = []
    for _, label, rel_group, gid, images, problem in candidates:
        if len(places[gid]) > 1:
            problem = (f"group id {gid!r} is found {len(places[gid])} times: {'; '.join(places[gid])}; which one "
                       f"is right cannot be told, so none is written: rename or remove the copies")
        if problem:
            issues.append(DiscoveryIssue(mission.name, rel_group, problem, group_id=gid))
            continue
        groups.append(Group(gid, mission.name, label, tuple(f"{rel_group}/{n}" for n in images)))
    return groups, issues
