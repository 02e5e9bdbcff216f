"""The photos a photo-aware Stage-B row carries (GROUP_QC_STAGE_B_IMAGES=1). Pure (PIL, no torch/swift).

A row's `images` are not the original files: ms-swift's loader neither applies EXIF orientation nor scales 16-bit
photos (PIL's convert("RGB") clips them), so a phone photo stored sideways would reach the model sideways while
Stage-A, which summarised it, and the review page both saw it upright. Each photo is therefore decoded once the way
Stage-A decodes it (qc_core.images.load_photo: upright, 8-bit RGB) within the selection's max_pixels, and saved as
a JPEG copy under `<Stage-A folder>/stage_b_photos/` (qc_core.thumbnails; reused while the photo is unchanged).
The copy is already within the budget, so ms-swift only rounds it to the model's patch grid, wherever the row is
read: `swift rlhf`, evaluation, judging.

Photos are found under --input_dir / GROUP_QC_INPUT_DIR when given, else under the input_dir the Stage-A record
names; a photo that is missing or cannot be decoded stops the build with its path and group.
"""
from __future__ import annotations

import glob
import os
from pathlib import Path

from qc_core.errors import UserError
from qc_core.records import StageARecord
from qc_core.thumbnails import CopyRule, make_thumbnails

CACHE_FOLDER = "stage_b_photos"
COPY_QUALITY = 95
SHOWN_PROBLEMS = 5


class PhotoSourceError(UserError):
    """Photos a photo-aware row needs and cannot have (the message names them and what to do)."""


def photo_sources(record: StageARecord, input_dir: str | None) -> list[Path]:
    """The group's photos in 图片_i order: `input_dir` (the setting) wins over the record's own input_dir."""
    folder = input_dir or record.get("input_dir")
    if not folder:
        raise PhotoSourceError(f"group {record['group_id']} of {record['mission']}: its Stage-A record names no "
                               f"input_dir, so its photos cannot be found: pass --input_dir "
                               f"(or set GROUP_QC_INPUT_DIR) "
                               f"to the folder Stage-A read")
    return [Path(folder).expanduser() / rel for rel in record["images"]]   # an absolute rel stays as it is


def cache_folder(stage_a_dir: str | None, file_patterns) -> Path:
    """Where the copies go: beside the Stage-A files the rows come from (the folder, else the first file's)."""
    if stage_a_dir:
        return Path(stage_a_dir).expanduser() / CACHE_FOLDER
    matched = [p for pattern in file_patterns for p in sorted(glob.glob(os.path.expanduser(pattern)))]
    return (Path(matched[0]).parent if matched else Path(".")) / CACHE_FOLDER


def group_photo_copies(records: list[StageARecord], input_dir: str | None, max_pixels: int,
                       cache: Path) -> list[list[str]]:
    """Per record, the absolute paths of its photos' copies (see the module docstring). Every problem is gathered
    first, then raised together (the first few named), so one run shows what to fix."""
    sources = [photo_sources(r, input_dir) for r in records]
    copies, _ = make_thumbnails([p for group in sources for p in group], cache,
                                rule=CopyRule(max_pixels=max_pixels, quality=COPY_QUALITY))
    problems = [f"group {r['group_id']} of {r['mission']}: {copies[p].error}"
                for r, group in zip(records, sources) for p in group if copies[p].error]
    if problems:
        raise PhotoSourceError(
            f"photo-aware Stage-B needs every photo of every group, and {len(problems)} cannot be read: "
            + "; ".join(problems[:SHOWN_PROBLEMS]) + (f" (+{len(problems) - SHOWN_PROBLEMS} more)"
                                                      if len(problems) > SHOWN_PROBLEMS else "")
            + ". Pass --input_dir (or GROUP_QC_INPUT_DIR) if the photos moved; fix or remove the group otherwise")
    return [[str((cache / str(copies[p].name)).resolve()) for p in group] for group in sources]   # each made
