"""The Stage-A JSONL record: one schema, one builder, one validator, used by the writer (Stage-A),
the merger and every reader (Stage-B). Pure (stdlib only).

    {"group_id", "mission", "label", "images", "per_image": {"图片_1": ..., ...}, "model", "created_at"}
    optional: "adapters" (Stage-A LoRA), "input_dir" (the folder `images` are relative to, stored relative
    to the file that holds the record: qc_core.paths; review pages find the photos there), "model_fingerprint"
    (qc_core.checkpoints.stage_a_fingerprint of the model and adapters: a promise names the Stage-A model it was
    certified on by it)

Writers (make_record, stage_a.convert) always write `model` and `created_at`; readers need only the fields a
reader uses (REQUIRED_FIELDS), so files written by the project's public origin, which lack them, still load.
`from_origin` maps the origin's other shapes onto this one (see its docstring).

`label` is "pass" or "fail" for a group a reviewer filed under a label folder, and null (None) for an
unreviewed group (Stage-A run with --unlabeled): null means "nobody has judged this group yet", never a
third verdict, so Stage-B training and evaluation refuse such records (stage_b.data.dataset.load_records).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import PurePosixPath
from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar

from .errors import UserError


@dataclass(frozen=True)
class Group:
    """One work order's photo group as Stage-A found it (stage_a.discovery) and a record names it."""
    group_id: str
    mission: str          # canonical name
    label: str | None     # "pass" | "fail"; None: unreviewed (discovered with --unlabeled)
    images: tuple[str, ...]  # POSIX paths relative to input_dir, natural order

    @property
    def folder(self) -> str:
        return str(PurePosixPath(self.images[0]).parent)


class _RecordFields(TypedDict):
    """What every reader needs (REQUIRED_FIELDS)."""
    group_id: str
    mission: str
    label: str | None          # "pass" | "fail"; None: unreviewed
    images: list[str]          # relative to input_dir, natural order
    per_image: dict[str, str]  # 图片_1..图片_N: each photo's one-line summary


class StageARecord(_RecordFields, total=False):
    """One line of <mission>_stage_a.jsonl as make_record (and stage_a.convert) writes it (module doc); a file of the
    public origin lacks `model` and `created_at`. `review` is the labelled record's (stage_b.labels.resolve), and a
    gold group mixed into a judging day carries `gold_label` and `gold_from` (stage_b.labels.gold)."""
    model: str
    created_at: str
    adapters: list[str]
    input_dir: str
    model_fingerprint: str
    reviewer_reason: str
    review: dict
    gold_label: str
    gold_from: str | None


_Record = TypeVar("_Record", bound=Mapping[str, Any])   # a line as read (a dict) or as written (StageARecord)
IMAGE_KEY_PREFIX = "图片_"
LABELS = ("pass", "fail", None)   # None: unreviewed
REQUIRED_FIELDS = ("group_id", "mission", "label", "images", "per_image")   # what every reader needs
PROVENANCE_FIELDS = ("model", "created_at")   # every writer writes them; no reader needs them
_THINK = re.compile(r"<think>.*?</think>", re.S)
_SPACES = re.compile(r"\s+")


class RecordError(UserError):
    """A record (or a summary) that breaks the Stage-A contract."""


def image_key(index: int) -> str:
    """1-based photo key used everywhere: 图片_1, 图片_2, ..."""
    return f"{IMAGE_KEY_PREFIX}{index}"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def normalize_summary(text) -> str:
    """One clean line from raw model output, or RecordError.

    Reasoning blocks are dropped; line breaks and runs of whitespace become one space (a summary
    is one line by contract, and a stray newline must not cost a whole group). Empty -> error.
    """
    if not isinstance(text, str):
        raise RecordError(f"summary is not text: {type(text).__name__}")
    text = _THINK.sub(" ", text).replace("<think>", " ").replace("</think>", " ")
    text = _SPACES.sub(" ", text).strip()
    if not text:
        raise RecordError("empty summary")
    return text


def make_record(group: Group, summaries: list[str], model: str, adapters=None,
                created_at: str | None = None, input_dir=None, model_fingerprint: str | None = None) -> StageARecord:
    if len(summaries) != len(group.images):
        raise RecordError(f"{group.group_id}: {len(summaries)} summaries for {len(group.images)} photos")
    record: StageARecord = {
        "group_id": group.group_id,
        "mission": group.mission,
        "label": group.label,
        "images": list(group.images),
        "per_image": {image_key(i + 1): s for i, s in enumerate(summaries)},
        "model": model,
        "created_at": created_at or utc_now(),
    }
    if adapters:
        record["adapters"] = list(adapters)
    if input_dir is not None:
        record["input_dir"] = str(input_dir)
    if model_fingerprint:
        record["model_fingerprint"] = model_fingerprint
    validate_record(record, provenance=True)
    return record


def validate_record(record: _Record, known_missions=None, *, provenance: bool = False) -> _Record:
    """Raise RecordError naming the first broken rule; return the record unchanged.

    Readers check what they use (REQUIRED_FIELDS); a writer passes provenance=True, which also requires
    `model` and `created_at` as non-empty strings, so every file group-qc writes says what made it and when."""
    missing = [k for k in REQUIRED_FIELDS + (PROVENANCE_FIELDS if provenance else ()) if k not in record]
    if missing:
        raise RecordError(f"missing field(s) {', '.join(missing)}")
    gid = record["group_id"]
    if not isinstance(gid, str) or not gid:
        raise RecordError("group_id must be a non-empty string")
    for key in PROVENANCE_FIELDS if provenance else ():
        if not isinstance(record[key], str) or not record[key].strip():
            raise RecordError(f"{gid}: {key} must be a non-empty string, got {record[key]!r}")
    if known_missions is not None and record["mission"] not in known_missions:
        raise RecordError(f"{gid}: unknown mission {record['mission']!r}; known: {', '.join(known_missions)}")
    if record["label"] not in LABELS:
        raise RecordError(f"{gid}: label must be 'pass', 'fail' or null (unreviewed), got {record['label']!r}")
    images, per_image = record["images"], record["per_image"]
    if not isinstance(images, list) or not images:
        raise RecordError(f"{gid}: images must be a non-empty list")
    if not isinstance(per_image, dict):
        raise RecordError(f"{gid}: per_image must be an object")
    expected = [image_key(i + 1) for i in range(len(images))]
    if list(per_image) != expected:
        raise RecordError(f"{gid}: per_image keys {list(per_image)} != {expected} (one per image, in order)")
    for key, value in per_image.items():
        if not isinstance(value, str) or not value.strip() or "\n" in value or "\r" in value:
            raise RecordError(f"{gid}: {key} must be a non-empty single line")
    return record


# The project's public origin (github Pein2017/Qwen3-VL) writes the same groups in other shapes; these tables
# are everything from_origin knows about them. Sources, in that repository:
#   src/stage_a/inference.py @2201f48 (process_group): "timestamp" instead of "created_at", no "model",
#     absolute "images" (str(p.resolve())), per_image keys 图片_k;
#   src/stage_a/inference.py @2226699 and later: per_image keys image_k, "images" as bare file names, no time;
#   src/stage_b/ingest/stage_a.py (_parse_label: strip + lower) and scripts/add_gt_fail_reason_to_stage_a.py
#     (_normalize_label: 通过/不通过, 1/2); discovery maps the folders 审核通过/审核不通过 to pass/fail.
# the origin's reviewer reason (scripts/add_gt_fail_reason_to_stage_a.py there) is our optional reviewer_reason,
# which group_qc_sft uses as the reason to learn (stage_b.data.sft)
ORIGIN_FIELDS = {"timestamp": "created_at", "gt_fail_reason_text": "reviewer_reason"}
ORIGIN_IMAGE_KEY = re.compile(r"image_([1-9][0-9]*)")
ORIGIN_LABELS = {"pass": "pass", "通过": "pass", "审核通过": "pass", "1": "pass",
                 "fail": "fail", "不通过": "fail", "审核不通过": "fail", "2": "fail"}


def from_origin(record: dict) -> dict:
    """The record in group-qc's shape when it is in one of the origin's; a copy, the input is left alone.

    - `timestamp` becomes `created_at` (kept as written), unless the record already has a `created_at`;
    - per_image keys `image_1..image_N` become `图片_1..图片_N` (ordered by k, as the origin's reader orders
      them), when every key has that form and there are as many as `images`: another count is a RecordError
      naming the group and both counts;
    - a label the origin spells otherwise (`PASS`, ` fail `, `通过`, `审核不通过`, `1`/`2`) becomes pass/fail;
    - image paths stay as written: an absolute one keeps working wherever it is joined onto an input folder
      (`Path(input_dir) / "/abs/x.jpg"` is `/abs/x.jpg`), so review pages find the photos;
    - `model` is not invented (readers do not need it; stage_a.convert fills it when writing).
    Anything else, a record already in our shape included, passes through unchanged: validate_record judges it.
    """
    out = {}
    for key, value in record.items():
        ours = ORIGIN_FIELDS.get(key)
        out[ours if ours and ours not in record else key] = value
    if "label" in out:
        out["label"] = _origin_label(out["label"])
    if "per_image" in out:
        out["per_image"] = _origin_per_image(out.get("group_id"), out.get("images"), out["per_image"])
    return out


def _origin_label(label):
    # An int too: the origin's reader takes str(label), so 1/2 may have been written as numbers.
    if not isinstance(label, (str, int)):
        return label
    return ORIGIN_LABELS.get(str(label).strip().casefold(), label)


def _origin_per_image(group_id, images, per_image):
    if not isinstance(per_image, dict) or not per_image:
        return per_image
    matches = [ORIGIN_IMAGE_KEY.fullmatch(str(k)) for k in per_image]
    if not all(matches):   # our 图片_k keys, or a mix: validate_record names the keys it expected
        return per_image
    if isinstance(images, list) and len(per_image) != len(images):
        raise RecordError(f"group {group_id}: per_image has {len(per_image)} image_k summaries for "
                          f"{len(images)} images (one per image)")
    indexed = sorted((int(m.group(1)), value) for m, value in zip(matches, per_image.values()))
    return {image_key(k): value for k, value in indexed}


def summaries_of(record: Mapping[str, Any]) -> list[str]:
    """Per-photo summaries in photo order (keys 图片_1..图片_N)."""
    per_image = record["per_image"]
    return [per_image[image_key(i + 1)] for i in range(len(per_image))]


def error_record(mission: str, error: str, *, group_id: str | None, path: str | None,
                 stage: str, label: str | None = None) -> dict:
    """A line of `<mission>_stage_a.errors.jsonl`: what failed, where, at which step."""
    return {"group_id": group_id, "mission": mission, "label": label, "path": path,
            "stage": stage, "error": error, "created_at": utc_now()}
