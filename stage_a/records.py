"""The Stage-A JSONL record: one schema, one builder, one validator, used by the writer (Stage-A),
the merger and every reader (Stage-B). Pure (stdlib only).

    {"group_id", "mission", "label", "images", "per_image": {"图片_1": ..., ...}, "model", "created_at"}
    optional: "adapters" (Stage-A LoRA), "input_dir" (the folder `images` are relative to; review pages find
    the photos there)

`label` is "pass" or "fail" for a group a reviewer filed under a label folder, and null (None) for an
unreviewed group (Stage-A run with --unlabeled): null means "nobody has judged this group yet", never a
third verdict, so Stage-B training and evaluation refuse such records (stage_b.dataset.load_records).
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from .discovery import Group

IMAGE_KEY_PREFIX = "图片_"
LABELS = ("pass", "fail", None)   # None: unreviewed
REQUIRED_FIELDS = ("group_id", "mission", "label", "images", "per_image", "model", "created_at")
_THINK = re.compile(r"<think>.*?</think>", re.S)
_SPACES = re.compile(r"\s+")


class RecordError(ValueError):
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
                created_at: str | None = None, input_dir=None) -> dict:
    if len(summaries) != len(group.images):
        raise RecordError(f"{group.group_id}: {len(summaries)} summaries for {len(group.images)} photos")
    record = {
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
    validate_record(record)
    return record


def validate_record(record: dict, known_missions=None) -> dict:
    """Raise RecordError naming the first broken rule; return the record unchanged."""
    missing = [k for k in REQUIRED_FIELDS if k not in record]
    if missing:
        raise RecordError(f"missing field(s) {', '.join(missing)}")
    gid = record["group_id"]
    if not isinstance(gid, str) or not gid:
        raise RecordError("group_id must be a non-empty string")
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


def summaries_of(record: dict) -> list[str]:
    """Per-photo summaries in photo order (keys 图片_1..图片_N)."""
    per_image = record["per_image"]
    return [per_image[image_key(i + 1)] for i in range(len(per_image))]


def error_record(mission: str, error: str, *, group_id: str | None, path: str | None,
                 stage: str, label: str | None = None) -> dict:
    """A line of `<mission>_stage_a.errors.jsonl`: what failed, where, at which step."""
    return {"group_id": group_id, "mission": mission, "label": label, "path": path,
            "stage": stage, "error": error, "created_at": utc_now()}
