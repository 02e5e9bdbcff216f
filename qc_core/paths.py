"""Paths a file stores, written so a copied or moved project still works. Pure (stdlib).

A record names other files (a run record its best checkpoint and its Stage-A input, a label record the folder its
photos were reviewed from): it stores each relative to the folder of the file that names it (`stored`), with the
folder it was written in kept once as a note (`WRITTEN_IN`), and a reader resolves them against where the file is now
(`resolved`). A project copied whole (`cp -r`, a new clone with its outputs) then reads its own files, never the
original's. A path that cannot be made relative (another drive) is stored absolute, and an absolute path in a file
written before this rule is read as it is.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

WRITTEN_IN = "written_in"   # the absolute folder a record was written in: a note for a person, never read back


def stored(path, base) -> str:
    """`path` (absolute, or relative to the current folder) as the file in folder `base` stores it: relative to
    `base`, in / form."""
    absolute = os.path.abspath(os.fspath(path))
    try:
        return Path(os.path.relpath(absolute, os.path.abspath(os.fspath(base)))).as_posix()
    except ValueError:   # another drive (Windows): no relative path exists
        return absolute


def with_input_dir_stored(record: Mapping[str, Any], base) -> dict[str, Any]:
    """A record as a file in folder `base` stores it: its `input_dir` (the folder its photos are in) relative."""
    folder = record.get("input_dir")
    return {**record, "input_dir": stored(folder, base)} if isinstance(folder, str) and folder else dict(record)


def with_input_dir_resolved(record: dict, base) -> dict:
    """A record read from a file in folder `base`: a relative `input_dir` resolved against it."""
    folder = record.get("input_dir")
    if isinstance(folder, str) and folder and not Path(folder).is_absolute():
        return {**record, "input_dir": str(resolved(folder, base))}
    return record


def resolved(value, base) -> Path:
    """A stored path read back: relative ones against `base` (the folder of the file that names it now)."""
    path = Path(os.fspath(value))
    return path if path.is_absolute() else Path(os.path.normpath(Path(base) / path))
