"""Discovery of photo groups on disk. Pure (os/re only).

Layouts: reviewed groups at <input_dir>/<mission or alias>/<label folder>/<group folder>/<images>;
unreviewed ones (`--unlabeled`, label None) at <input_dir>/<mission or alias>/<group folder>/<images>.
Problems that concern one group or folder (empty group, unknown label folder, a group id found twice,
an unreadable folder, a dangling photo link, a file where a folder belongs, a folder of the other layout, a name
that is not valid UTF-8) become `DiscoveryIssue`s that the caller writes to the errors file; the rest goes on.
A folder of the other layout is never guessed at: read as a group, a label folder would drop its reviewer's
label, and read as a label folder, a group of unreviewed photos would be skipped without a word.

Names that are not valid UTF-8 (photos unzipped from a Windows archive keep their GBK bytes) reach Python as lone
surrogates (os.fsdecode), which no JSONL line can hold: such a file or folder is an issue whose path shows the bad
bytes as \\xNN (`printable_path`), and such a photo fails its group; everything else goes on.
"""
from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from qc_core.missions import Mission, MissionError, Registry
from qc_core.records import Group  # noqa: F401  (Stage-A names it here too)

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png"})
GROUP_ID_RE = re.compile(r"^(QC-[A-Za-z]+-\d{8}-\d+)")
_CHUNKS = re.compile(r"(\d+)")


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
    """Discovery order of a group folder (or of any file in it): natural order of its path parts.
    In the unreviewed layout the third part of a photo's path is its own name; it only orders photos within
    one group folder, so groups still sort by <mission folder>/<group>."""
    parts = PurePosixPath(relative_path).parts
    return tuple(natural_key(p) for p in parts[:3])


def group_id_for(folder_name: str, first_image: str) -> str:
    match = GROUP_ID_RE.match(first_image)
    return match.group(1) if match else folder_name


def undecodable(name: str) -> bool:
    """True for a name whose bytes on disk are not UTF-8 (os.fsdecode keeps them as lone surrogates)."""
    try:
        name.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def printable_path(path: str) -> str:
    """`path` with each byte that is not UTF-8 written as \\xNN: fit for a message and for a JSONL line."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:   # a surrogate no byte can stand for: not from the file system
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _as_gbk(name: str) -> str | None:
    try:
        return name.encode("utf-8", "surrogateescape").decode("gbk")
    except (UnicodeError, LookupError):
        return None


def _not_utf8(names: list[str], rel_parent: str) -> str:
    """Why files or folders whose names are not UTF-8 are skipped, and how to fix them."""
    shown = ", ".join(printable_path(f"{rel_parent}/{n}") for n in names)
    readings = [f"{printable_path(n)} = {g!r}" for n in names if (g := _as_gbk(n))]
    gbk = f"; read as GBK: {', '.join(readings)}" if readings else ""
    return (f"{shown}: name not valid UTF-8 (bytes shown as \\xNN{gbk}), as unzipped from an archive made on "
            f"Windows: rename in UTF-8 (`convmv -f gbk -t utf-8 -r --notest <folder>`, or unzip again with "
            f"`unzip -O gbk`)")


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
            f"folders under {input_dir} name no known mission: {', '.join(map(printable_path, unknown))}; known "
            f"missions: "
            f"{', '.join(registry.names)}. Add them to {registry.path} or pass --mission explicitly."
        )
    return found


def _entries(path: Path, rel: str, what: str) -> tuple[list[os.DirEntry], str | None]:
    """(visible entries in natural order, or why the folder cannot be read)."""
    try:
        return _scandir(path), None
    except OSError as exc:
        return [], f"cannot read {what} {rel}: {exc.strerror or exc} (skipped)"


def _is_photo_name(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def _scan_group(path: Path, rel_group: str) -> tuple[list[str], str | None]:
    """(photo names in natural order, why the group cannot be written whole, or None)."""
    entries, problem = _entries(path, rel_group, "group folder")
    if problem:
        return [], problem
    photos: list[str] = []
    unreadable: list[str] = []
    for e in entries:
        if not _is_photo_name(e.name):
            continue  # other files and sub-folders are no photos (README)
        (photos if _is_file(e) else unreadable).append(e.name)
    bad_names = sorted((n for n in [*photos, *unreadable] if undecodable(n)), key=natural_key)
    if bad_names:   # its path cannot be recorded: never a group without it
        return photos, (f"photo(s) {_not_utf8(bad_names, rel_group)}; the group is not written without them: "
                        f"rename, then rerun with --retry_errors")
    if unreadable:   # a dangling or looping symlink, or a folder named like a photo: never a group without it
        return photos, (f"photo(s) {', '.join(unreadable)} in {rel_group} cannot be read as files (a dangling or "
                        f"looping symlink, or a folder); fix them, then rerun with --retry_errors")
    if not photos:
        return photos, f"empty group: no .jpg/.jpeg/.png file in {rel_group}"
    return photos, None


def _not_a_folder(entry: os.DirEntry, rel: str, expected: str) -> str:
    if entry.is_symlink() and not _is_dir(entry):
        return f"{rel} is a symlink that does not resolve (dangling or a loop), not a {expected} (skipped)"
    if _is_photo_name(entry.name):
        return f"photo {rel} lies loose outside a group folder (skipped); move it into its group's folder"
    return f"{rel} is a file, not a {expected} (skipped)"


def _holds_photos(entry: os.DirEntry, rel: str) -> bool:
    entries, _ = _entries(Path(entry.path), rel, "folder")
    return any(_is_photo_name(e.name) for e in entries)


def _not_a_label_folder(entry: os.DirEntry, rel: str, registry: Registry) -> str:
    known = ", ".join(registry.label_folders)
    if _holds_photos(entry, rel):   # the unreviewed layout read without its flag: say so, do not guess a label
        return (f"{rel} holds photos directly: it looks like a group folder of unreviewed photos, not a label "
                f"folder ({known}); pass --unlabeled to read <mission>/<group>/ folders (skipped)")
    return f"unknown label folder {entry.name!r} in {rel}; expected one of {known} (skipped)"


def _folders(entries: list[os.DirEntry], rel_parent: str, expected: str, mission: str,
             issues: list[DiscoveryIssue]) -> list[tuple[os.DirEntry, str]]:
    """(entry, relative path) of every folder among `entries`; anything else there becomes an issue."""
    found = []
    for entry in entries:
        rel = f"{rel_parent}/{entry.name}"
        if undecodable(entry.name):
            issues.append(DiscoveryIssue(mission, printable_path(rel),
                                         f"{_not_utf8([entry.name], rel_parent)}, then rerun the same command "
                                         f"(skipped)"))
        elif _is_dir(entry):
            found.append((entry, rel))
        else:
            issues.append(DiscoveryIssue(mission, rel, _not_a_folder(entry, rel, expected)))
    return found


def _candidate(entry: os.DirEntry, rel_group: str, label: str | None) -> tuple:
    """(order key, label, folder relative path, group id, image names, problem) of one group folder."""
    images, problem = _scan_group(Path(entry.path), rel_group)
    gid = unicodedata.normalize("NFC", group_id_for(entry.name, images[0] if images else ""))
    return path_order_key(rel_group), label, rel_group, gid, images, problem


def _labelled(entries, rel_mission: str, mission: str, registry: Registry, issues: list) -> list[tuple]:
    """Groups of <mission>/<label folder>/<group folder>/, labelled by their label folder."""
    candidates = []
    for label_entry, rel_label in _folders(entries, rel_mission, "label folder", mission, issues):
        label = registry.label_of_folder(label_entry.name)
        if label is None:
            issues.append(DiscoveryIssue(mission, rel_label, _not_a_label_folder(label_entry, rel_label, registry)))
            continue
        group_entries, problem = _entries(Path(label_entry.path), rel_label, "label folder")
        if problem:
            issues.append(DiscoveryIssue(mission, rel_label, problem))
        candidates += [_candidate(e, rel, label)
                       for e, rel in _folders(group_entries, rel_label, "group folder", mission, issues)]
    return candidates


def _unlabelled(entries, rel_mission: str, mission: str, registry: Registry, issues: list) -> list[tuple]:
    """Groups of <mission>/<group folder>/, unreviewed (label None). A label folder here is reported, not read
    as a group named 审核通过: its groups would lose the label a reviewer gave them."""
    candidates = []
    for entry, rel in _folders(entries, rel_mission, "group folder", mission, issues):
        if registry.label_of_folder(entry.name) is not None:
            issues.append(DiscoveryIssue(mission, rel, f"{rel} is a label folder of reviewed groups: this mission "
                                                       f"looks labelled; drop --unlabeled to read reviewed groups "
                                                       f"(skipped)"))
            continue
        candidates.append(_candidate(entry, rel, None))
    return candidates


def discover_mission(input_dir: Path, mission: Mission, folders: list[Path], registry: Registry,
                     unlabeled: bool = False) -> tuple[list[Group], list[DiscoveryIssue]]:
    """All groups of one mission in discovery order, plus the issues found on the way. Nothing on disk is
    passed over without an issue: a file where a folder belongs, a loose photo, an unreadable folder, a
    dangling photo link, a folder of the other layout (labelled vs `unlabeled`). Group ids are NFC-normalised
    first; an id found twice (two folders, two labels, or two spellings of the mission folder) fails every copy,
    naming them all, since no label can be trusted."""
    input_dir = Path(input_dir)
    layout = _unlabelled if unlabeled else _labelled
    candidates = []  # (order key, label, folder relative path, group id, image names, problem)
    issues: list[DiscoveryIssue] = []
    for mission_dir in folders:
        rel_mission = mission_dir.relative_to(input_dir).as_posix()
        entries, problem = _entries(mission_dir, rel_mission, "mission folder")
        if problem:
            issues.append(DiscoveryIssue(mission.name, rel_mission, problem))
        candidates += layout(entries, rel_mission, mission.name, registry, issues)
    candidates.sort(key=lambda c: c[0])

    places: dict[str, list[str]] = {}
    for _, label, rel_group, gid, _, _ in candidates:
        places.setdefault(gid, []).append(f"{rel_group} ({label})" if label else rel_group)
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
