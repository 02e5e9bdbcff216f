"""Stage-B rows built straight from Stage-A JSONL (no intermediate file). Pure (no torch/swift).

Selection: a Stage-A output folder plus missions (`all`, names or aliases), or explicit files/globs.
Each row: `messages` (system + user), `solution` (`通过`|`不通过` from `label`), `mission`, `group_id`,
`summaries`; in photo-aware mode (Selection.images, GROUP_QC_STAGE_B_IMAGES=1) also `images`, the group's photos
(ms-swift's multimodal column; stage_b.data.photos), with an `<image>` before each summary line.
Files of the project's public origin are read too (qc_core.records.from_origin).
Split by group-id hash (stage_b.data.split), the same everywhere. An unreviewed record
(`label` null, from Stage-A's --unlabeled) is refused: it has no verdict to train toward or to score.
The selection (input, missions, split, balancing) is `stage_b.data.settings.Selection`; ms-swift reaches this
through swift_plugins/qc_plugin.py, which reads it from the GROUP_QC_* environment.
"""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from qc_core.errors import UserError
from qc_core.jsonl import iter_jsonl
from qc_core.missions import MissionError, Registry, is_all, load_registry
from qc_core.paths import with_input_dir_resolved
from stage_a.outputs import MissionOutputs, existing_group_ids
from qc_core.records import RecordError, StageARecord, from_origin, summaries_of, validate_record

from stage_b.data.photos import PhotoSourceError, cache_folder, group_photo_copies
from stage_b.data.prompts import stage_b_messages
from stage_b.data.sft import REVIEWER_REASON, reply_for
from stage_b.data.settings import ENV_BALANCE, ENV_STAGE_A_DIR, ENV_STAGE_A_FILES, PHOTO_MODE, TEXT_MODE, Selection
from stage_b.data.split import in_split
from stage_b.contract.verdict import FAIL, PASS

log = logging.getLogger("group_qc.stage_b")


class DatasetError(UserError):
    """A Stage-B selection that cannot be built (names the path or mission and what to do)."""


def stage_a_files(source: Selection, missions: list, registry: Registry) -> list[Path]:
    """The Stage-A files a selection reads; every wrong path is an error naming it."""
    if source.files:
        paths = []
        for pattern in source.files:
            matched = sorted(glob.glob(os.path.expanduser(pattern)))
            if not matched:
                raise DatasetError(f"Stage-A file or glob {pattern!r} (from {source.where('files')}) matches "
                                   f"nothing: name existing <mission>_stage_a.jsonl files")
            paths += [Path(p) for p in matched if p.endswith(".jsonl") and not p.endswith(".errors.jsonl")]
        return paths
    if not source.stage_a_dir:
        raise DatasetError(f"no Stage-A input: pass --stage_a_dir (or set {ENV_STAGE_A_DIR}) to the Stage-A "
                           f"output_dir, or --stage_a_files ({ENV_STAGE_A_FILES}) to files or globs")
    folder = Path(source.stage_a_dir).expanduser()
    if not folder.is_dir():
        raise DatasetError(f"Stage-A folder {folder} (from {source.where('stage_a_dir')}) does not exist")
    paths, missing = [], []
    for mission in missions:
        outputs = mission_outputs(folder, mission)
        path = outputs.merged_main
        if path.is_file():
            check_merged(outputs)
            paths.append(path)
        else:
            hint = " (shard parts found: run group-qc stage-a-merge first)" if outputs.part_files() else ""
            missing.append(f"{path}{hint}")
    if missing and (not is_all(source.missions) or not paths):  # a mission asked for by name must be there
        raise DatasetError("missing Stage-A output: " + "; ".join(missing))
    for m in missing:
        log.warning("no Stage-A output for a mission, left out of 'all': %s", m)
    for path in sorted(folder.glob("*_stage_a.jsonl")):   # a file sitting there, read by nothing: say so
        try:
            registry.resolve(path.name[: -len("_stage_a.jsonl")])
        except ValueError:
            log.warning("%s names no known mission and is not read (known: %s)", path, ", ".join(registry.names))
    return paths


def mission_outputs(folder: Path, mission) -> MissionOutputs:
    """The mission's Stage-A output in `folder`: the file Stage-A writes (`<canonical name>_stage_a.jsonl`) or, when
    that is absent, one named after an alias (`BBU安装方式检查(正装)_stage_a.jsonl`, renamed or written by another
    tool), said in the log. Files under two of its names are an error naming both: which one is meant cannot be
    told, and reading both would count groups twice."""
    stems = [f"{name}_stage_a" for name in (mission.name, *mission.aliases)]
    found = [MissionOutputs(folder, stem) for stem in stems if (folder / f"{stem}.jsonl").is_file()]
    if len(found) > 1:
        raise DatasetError(f"mission {mission.name} has Stage-A files under {len(found)} of its names: "
                           + ", ".join(str(o.merged_main) for o in found) + "; keep one (merge them first if both "
                           f"hold groups), named {mission.stage_a_stem}.jsonl")
    if found and found[0].stem != mission.stage_a_stem:
        log.info("Stage-A output for %s read from %s (an alias's name)", mission.name, found[0].merged_main)
    return found[0] if found else MissionOutputs(folder, mission.stage_a_stem)


def check_merged(outputs: MissionOutputs) -> None:
    """Shard parts beside a merged file must all be in it: a part written after the merge would otherwise be
    left out of training without a word."""
    merged = existing_group_ids(outputs.merged_main)
    unmerged = {path: len(existing_group_ids(path) - merged) for _, _, path in outputs.part_files()}
    unmerged = {path: n for path, n in unmerged.items() if n}
    if unmerged:
        raise DatasetError(f"shard parts hold groups that {outputs.merged_main} lacks ("
                           + ", ".join(f"{path}: {n}" for path, n in unmerged.items())
                           + f"): run group-qc stage-a-merge --output_dir {outputs.output_dir} first")


def _unreviewed(record: Mapping[str, Any], where: str) -> DatasetError:
    return DatasetError(f"{where}: group {record['group_id']} is unreviewed (label null: Stage-A ran with "
                        f"--unlabeled), so it cannot be a training target or be scored; judge unreviewed groups "
                        f"with group-qc judge instead")


def load_records(source: Selection, registry: Registry | None = None, require_label: bool = True) -> list[StageARecord]:
    """Validated Stage-A records of the selected missions, canonical mission names, file order.

    With require_label (training, evaluation) an unreviewed record (label null) is an error naming its line:
    a null label must never become a training target nor be scored as if it were a verdict. Judging reads
    with require_label=False, since it ignores labels."""
    registry = registry or load_registry()
    chosen = registry.select(source.missions)
    wanted = {m.name for m in chosen}
    records: list[StageARecord] = []
    seen: dict[tuple, str] = {}
    for path in stage_a_files(source, chosen, registry):
        before = len(records)
        for line_no, record in iter_jsonl(path, on_torn=log.warning):  # a killed Stage-A's torn line: skipped, said
            try:
                # The public origin's files load as they are (timestamp, image_k keys, its label spellings).
                record = from_origin(record)
                record = dict(record, mission=registry.resolve(record.get("mission", "")).name)
                validate_record(record)
                record = with_input_dir_resolved(record, Path(path).parent)   # labels store it relative
            except (RecordError, ValueError) as exc:
                raise DatasetError(f"{path}:{line_no}: {exc}") from None
            if record["mission"] not in wanted:
                continue
            if require_label and record["label"] is None:
                raise _unreviewed(record, f"{path}:{line_no}")
            key = (record["mission"], record["group_id"])
            if key in seen:
                raise DatasetError(f"group {record['group_id']} of {record['mission']} appears twice: "
                                   f"{seen[key]} and {path}:{line_no}; merge or deduplicate the Stage-A files")
            seen[key] = f"{path}:{line_no}"
            records.append(cast(StageARecord, record))   # a JSON line until validate_record checked its fields
        if len(records) == before:
            log.warning("%s holds no group of the selected missions (%s)", path,
                        "an empty file" if path.stat().st_size == 0 else "records of other missions only")
    return records


def group_files(paths, registry: Registry | None = None) -> dict[tuple[str, str], Path]:
    """{(canonical mission, group id): the Stage-A file that holds it} (review pages name each group's source)."""
    registry = registry or load_registry()
    out = {}
    for path in paths:
        for _, record in iter_jsonl(Path(path), on_torn=log.warning):
            try:
                out[(registry.resolve(record.get("mission", "")).name, record["group_id"])] = Path(path).resolve()
            except (MissionError, KeyError, TypeError, AttributeError):
                continue
    return out


def _solution(record: StageARecord) -> str:
    # Looked up, not `PASS if pass else FAIL`: an unreviewed record reaching here must fail, not train as 不通过.
    solutions: dict[str | None, str] = {"pass": PASS, "fail": FAIL}
    solution = solutions.get(record["label"])
    if solution is None:
        raise _unreviewed(record, "Stage-B row")
    return solution


def prompt_row(record: StageARecord, registry: Registry, images: list[str] | None = None) -> dict:
    """What the model is asked for a group, never its label: the Stage-B messages over its summaries, and with
    `images` (photo-aware mode: one photo per summary, in order) an `<image>` before each summary line."""
    mission = registry.resolve(record["mission"])
    summaries = summaries_of(record)
    row = {"messages": stage_b_messages(mission, summaries, photos=images is not None), "mission": mission.name,
           "group_id": record["group_id"], "summaries": summaries}
    if images is not None:
        row["images"] = images
    return row


def row_mode(row: dict) -> str:
    """What a row puts to the model: summaries, or summaries+photos."""
    return PHOTO_MODE if "images" in row else TEXT_MODE


def row_from_record(record: StageARecord, registry: Registry, images: list[str] | None = None) -> dict:
    """A GRPO row: the prompt and the reviewer's verdict (`solution`) the rewards score against."""
    return {**prompt_row(record, registry, images), "solution": _solution(record)}


def rows_for(records: list[StageARecord], source: Selection, registry: Registry,
             make_row=row_from_record) -> list[dict]:
    """`make_row` over records, with each group's photos when the selection is photo-aware."""
    if not source.images:
        return [make_row(r, registry) for r in records]
    try:
        copies = group_photo_copies(records, source.input_dir, source.max_pixels,
                                    cache_folder(source.stage_a_dir, source.files))
    except PhotoSourceError as exc:
        raise DatasetError(str(exc)) from None
    return [make_row(r, registry, images) for r, images in zip(records, copies)]


def ids_digest(group_ids) -> str:
    """A short, order-free fingerprint of a set of group ids (logs and group_qc_run.json compare it)."""
    return hashlib.sha256("\n".join(sorted(group_ids)).encode("utf-8")).hexdigest()[:16]


def sft_row(record: StageARecord, registry: Registry, images: list[str] | None = None) -> dict:
    """A GRPO row plus the reply to imitate (`group_qc_sft`): the reviewer's verdict and a reason grounded in the
    summaries, or the reviewer's own reason when the record carries one (stage_b.data.sft)."""
    row = row_from_record(record, registry, images)
    reply = reply_for(registry.resolve(record["mission"]), row["summaries"], row["solution"],
                      record.get(REVIEWER_REASON))
    return {**row, "messages": row["messages"] + [{"role": "assistant", "content": reply}]}


def build_rows(source: Selection, split: str = "train", registry: Registry | None = None,
               allow_empty: bool = False, make_row=row_from_record, records: list[StageARecord] | None = None
               ) -> tuple[list[dict], dict]:
    """Rows of one split (made by `make_row`: GRPO prompts, or `sft_row`) and per-mission counts
    {mission: {"groups", "rows", "ids"}} (ids: the split's group ids); logs the counts. An empty split is an
    error (training on nothing is a wiring bug) unless allow_empty. `records`: `load_records(source)` when the
    caller has read them already (evaluation also puts them on its review page)."""
    registry = registry or load_registry()
    records = load_records(source, registry) if records is None else records
    counts: dict[str, dict] = {}
    chosen = []
    for record in records:
        c = counts.setdefault(record["mission"], {"groups": 0, "rows": 0, "ids": []})
        c["groups"] += 1
        if in_split(record["group_id"], split, source.val_ratio, source.seed):
            chosen.append(record)
            c["rows"] += 1
            c["ids"].append(record["group_id"])
    rows = rows_for(chosen, source, registry, make_row)
    for mission, c in counts.items():
        log.info("group_qc %s: %s: %d Stage-A groups -> %d %s rows, %d in the other split (%s; ids %s; %s)",
                 split, mission, c["groups"], c["rows"], split, c["groups"] - c["rows"], source.describe_split(),
                 ids_digest(c["ids"]), source.describe_mode())
    if not rows and not allow_empty:
        raise DatasetError(f"the {split} split of the selection {source.missions!r} is empty "
                           f"(groups per mission: { {m: c['groups'] for m, c in counts.items()} }, "
                           f"{source.describe_split()})")
    if source.balance_labels and split == "train" and rows:
        before = len(rows)
        rows = balance_by_label(rows, source.seed)
        log.info("group_qc train: %d rows -> %d, alternating 不通过/通过 (%s=1; the trainer must keep this "
                 "order: dataset_shuffle false)", before, len(rows), ENV_BALANCE)
    return rows, counts


def balance_by_label(rows: list[dict], seed: int = 0) -> list[dict]:
    """Rows reordered to alternate 不通过, 通过, 不通过, … with the smaller label cycled to match the larger.

    Why: each GRPO step trains on a few prompts. With labels drawn at random, most steps hold more of
    one verdict than the other, and the update is dominated by that shared push on the verdict's bias;
    what tells fail from pass (a direction that varies per prompt) is drowned. With every step holding
    as many fails as passes (any even number of consecutive rows), the bias pushes cancel exactly.
    Measured on the tiny demo model: validation accuracy 0.59 -> 0.98 in 25 first-token REINFORCE steps
    of 4 prompts balanced, no progress in 30 steps drawn at random. Deterministic for a seed; each
    label's rows are shuffled first, so missions mix. A split with one label only is returned as is.
    """
    by_label = {FAIL: [r for r in rows if r["solution"] == FAIL], PASS: [r for r in rows if r["solution"] == PASS]}
    if not by_label[FAIL] or not by_label[PASS]:
        return list(rows)
    rng = random.Random(f"balance:{seed}")
    for label_rows in by_label.values():
        rng.shuffle(label_rows)
    n = max(len(v) for v in by_label.values())
    out = []
    for i in range(n):
        out.append(by_label[FAIL][i % len(by_label[FAIL])])
        out.append(by_label[PASS][i % len(by_label[PASS])])
    return out
