"""Known-answer (gold) checks mixed into the day's review. Pure (hashlib, the project's pure core).

`stage_b.judging.judge --gold FILE… [--gold_share S]` reads labelled Stage-A records (earlier days' labels, say) and
mixes
ceil(S x the mission's groups today) of them into each mission's day, drawn by the SHA-256 of the audit seed and
group id (a resume mixes in the same ones; a group already among today's is never drawn). Each is judged like the
day's groups and written to the day's verdict file with its answer moved out of sight: `label` null, the answer in
`gold` ({"label", "from"}), which no review page shows. On the page it is a blind audit card (or, in a mission whose
every group goes to review, a review card with the mission's reason), like the day's own: nothing in the card or
the page's index tells it apart (tests/test_gold.py checks it). Known limits: its group id is its own (an id from an
earlier day); on a day without blind audits of a certified mission the gold cards are that mission's only audits.

Photos: a gold card must look and work like any audit card, so with a day's `--input_dir` the judge copies each
drawn gold group's photos into the day's output folder (`photos/<mission>/<group id>/<name>`, a neutral name: a
page link must not say "gold") and points the record there. The photos are read from the folder the gold record was
reviewed from (its `input_dir`), named and checked, never followed blindly: the folder must exist and not be a
filesystem root, every photo must resolve inside it (no `../`, no symlink out) and decode as an image. A gold group
whose photos cannot be found is not mixed in (the next in the draw takes its place), and the judge says which and
why (photo_problem, with_photo_copies).

Gold lines are not the day's work: the judge's automation figures and stage_b.monitoring.monitor leave them out, and
stage_b.labels.decisions scores each reviewer's decisions on them against the answer instead of making labels of them.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qc_core.errors import UserError
from qc_core.images import PhotoError, load_photo
from qc_core.jsonl import JsonlError, iter_jsonl
from qc_core.missions import MissionError
from qc_core.paths import with_input_dir_resolved
from qc_core.records import RecordError, validate_record
from stage_b.contract.bounds import in_range
from stage_b.contract.verdict import label_from_file

DEFAULT_GOLD_SHARE = 0.05
PHOTOS_DIR = "photos"   # under the day's output folder: the gold groups' photo copies


class GoldError(UserError):
    """A gold setting or file that cannot be used (names the file, line or value)."""


def check_gold_share(value) -> float:
    return in_range(value, "--gold_share", 0.0, 1.0, "a share from 0 to 1, e.g. 0.05", GoldError)


def load_gold(files, registry) -> dict[str, list[dict]]:
    """{mission: labelled records} from the gold files; every line checked, every problem named as file:line."""
    out: dict[str, list[dict]] = {}
    problems: list[str] = []
    seen: dict[tuple[str, str], str] = {}   # (mission, group id) -> where it was first read
    resolved: set[Path] = set()
    for path in map(Path, files):
        if path.resolve() in resolved:   # --gold F F: one file given twice reads once
            continue
        resolved.add(path.resolve())
        if not path.is_file():
            problems.append(f"--gold {path} does not exist: give labelled Stage-A files "
                            "(e.g. <labels>/*_stage_a.jsonl)")
            continue
        try:
            for line_no, rec in iter_jsonl(path, allow_torn_tail=False):
                where = f"{path}:{line_no}"
                try:
                    validate_record(rec)
                    mission = registry.resolve(rec["mission"]).name
                except (RecordError, MissionError, KeyError, TypeError) as exc:
                    problems.append(f"{where}: {exc}")
                    continue
                if label_from_file(rec.get("label")) is None:
                    problems.append(f"{where}: group {rec['group_id']} has no label (pass or fail): a known-answer "
                                    f"check needs one")
                    continue
                key = (mission, rec["group_id"])
                if key in seen:   # two files holding one group: a known answer is checked once a day
                    if seen[key] != where:
                        print(f"note: {where}: group {rec['group_id']} of {mission} was read already at {seen[key]}; "
                              f"it is a gold check once", file=sys.stderr)
                    continue
                seen[key] = where
                out.setdefault(mission, []).append({**with_input_dir_resolved(rec, path.parent), "mission": mission,
                                                    "_gold_from": str(path)})
        except JsonlError as exc:
            problems.append(str(exc))
    if problems:
        raise GoldError(f"{len(problems)} problem(s) in the gold files:\n  " + "\n  ".join(problems[:20]))
    if not out:
        raise GoldError(f"--gold {' '.join(map(str, files))} holds no labelled group: nothing to mix in; give the "
                        f"labels folder's files (<labels>/*_stage_a.jsonl) once a day has been reviewed, or leave "
                        f"--gold out")
    return out


def _rank(seed: int, mission: str, group_id: str) -> str:
    return hashlib.sha256(f"gold\0{seed}\0{mission}\0{group_id}".encode("utf-8")).hexdigest()


def mix_in(gold: dict[str, list[dict]], today: dict[str, list[dict]], share: float, seed: int) -> dict[str, list[dict]]:
    """{mission: gold records to judge today} (module doc): the answer moved to `gold_label`, `label` null."""
    out = {}
    for mission, records in today.items():
        ids = {r["group_id"] for r in records}
        pool = sorted((g for g in gold.get(mission, []) if g["group_id"] not in ids),
                      key=lambda g: _rank(seed, mission, g["group_id"]))
        k = min(len(pool), math.ceil(share * len(records))) if share > 0 else 0
        out[mission] = [{**{key: v for key, v in g.items() if key != "_gold_from"}, "label": None,
                         "gold_label": g["label"], "gold_from": g["_gold_from"]} for g in pool[:k]]
    return out


def photo_problem(rec: Mapping[str, Any]) -> str | None:
    """Why a gold group's photos cannot be shown (module doc), or None: each must lie inside the folder its record
    was reviewed from, exist and be a file (decoding is checked when it is copied)."""
    return photo_sources(rec)[1]


def photo_sources(rec: Mapping[str, Any]) -> tuple[list[Path], str | None]:
    folder = rec.get("input_dir")
    if not isinstance(folder, str) or not folder:
        return [], "its record names no input_dir (the folder its photos were reviewed from)"
    try:
        root = Path(folder).resolve()
    except (OSError, RuntimeError):
        return [], f"its photo folder {folder} cannot be resolved"
    if root == Path(root.anchor):
        return [], (f"its record names the filesystem root {folder} as its photo folder (refused: a photo folder "
                    f"holds work orders)")
    if not root.is_dir():
        return [], f"its photo folder {folder} does not exist (moved or deleted?)"
    sources = []
    for rel in rec.get("images") or []:
        try:
            src = (root / rel).resolve()
        except (OSError, RuntimeError):
            return [], f"photo {rel!r} cannot be resolved under {folder}"
        if root not in src.parents:
            return [], f"photo {rel!r} lies outside its folder {folder} (refused)"
        if not src.is_file():
            return [], f"photo {rel} is not found under {folder}"
        sources.append(src)
    if not sources:
        return [], "its record names no photo"
    return sources, None


def _safe(name: str) -> str:
    """A path part made of the name when it is a plain one, else its digest (a group id with `/` or `..` in it)."""
    if re.fullmatch(r"[\w.\-（）()]+", name) and name not in (".", ".."):
        return name
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


def with_photo_copies(records: list[dict], photos_dir: Path) -> tuple[list[dict], list[str]]:
    """(the gold records whose photos were copied under `photos_dir`, pointing at the copies; why each other one was
    left out). A copy is written whole (a temporary file renamed into place), again on a resume."""
    kept: list[dict] = []
    left_out: list[str] = []
    for rec in records:
        sources, why = photo_sources(rec)
        names, copies = set(), []
        for k, src in enumerate(sources, start=1):
            try:
                load_photo(src, max_pixels=64 * 64)   # decodes: a torn or renamed file is not shown as a photo
            except PhotoError as exc:
                why = str(exc)
                break
            name = _safe(src.name) if src.name not in names else f"{k}_{_safe(src.name)}"
            names.add(name)
            copies.append((src, Path(_safe(rec["mission"])) / _safe(rec["group_id"]) / name))
        if why:
            left_out.append(f"gold group {rec['group_id']} of {rec['mission']} not mixed in: {why}")
            continue
        for src, rel in copies:
            dst = photos_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        kept.append({**rec, "input_dir": str(photos_dir), "images": [rel.as_posix() for _, rel in copies]})
    return kept, left_out
