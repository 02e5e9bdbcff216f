"""`group_qc_run.json`: what a GRPO run trained on, so evaluation and preflight can obey it. Pure (no
torch/swift; the plugin collects the facts inside `swift rlhf` and calls `write_run_record`).

The plugin writes it at train start on the main rank, next to ms-swift's `args.json`, and updates it at
train end. Evaluation finds it from an adapter (`<run>/checkpoint-N` -> `<run>/group_qc_run.json`), takes the
run's selection as its default and refuses to score groups the run trained on.

Paths in it (the selection's Stage-A folder, files and photo folder, each Stage-A file read, the best checkpoint)
are stored relative to the run folder (qc_core.paths), the folder it was written in kept as `written_in`: a copied
project's run reads its own data and names its own checkpoint. `group-qc run-record best RUN|PARENT` prints
the best checkpoint's path (of the newest run under a parent), resolved, and fails naming it when it is not there.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import write_text_atomic
from qc_core.paths import WRITTEN_IN, resolved, stored
from qc_core.exits import run_cli
from qc_core.missions import load_registry

from stage_b.data.dataset import ids_digest, load_records
from stage_b.data.settings import Selection, selection_from
from stage_b.data.split import in_split, split_of

RUN_FILE = "group_qc_run.json"
# Bump when a field changes meaning; a reader refuses any other format and says which.
RUN_FORMAT = 1
REPO = Path(__file__).resolve().parents[2]
SELECTION_PATHS = ("stage_a_dir", "input_dir", "files")   # the selection's fields that name files or folders


class RunRecordError(UserError):
    """A run file that cannot be used (names the file and what happens instead)."""


def file_facts(path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(Path(path).resolve()), "bytes": os.path.getsize(path), "sha256": digest.hexdigest()}


def code_version() -> dict:
    """The package version and, from a git checkout, the commit and whether the tree had changes."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        package = version("group-qc")
    except PackageNotFoundError:
        package = None
    commit = dirty = None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        if commit:
            dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                        capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return {"package": package, "git_commit": commit, "git_dirty": dirty}


def build_run_record(selection: Selection, train_counts: dict, val_counts: dict, stage_a_files, *,
                     rewards: list[str], reward_weights: list[float], lora: dict, world_size: int,
                     output_dir: str) -> dict:
    """The record's content; counts are `stage_b.data.dataset.build_rows` counts (with the split's ids)."""
    missions = {}
    for mission in dict.fromkeys([*train_counts, *val_counts]):
        train = train_counts.get(mission, {"rows": 0, "ids": []})
        missions[mission] = {"train_groups": train["rows"], "val_groups": val_counts.get(mission, {}).get("rows", 0),
                             "train_ids_sha256": ids_digest(train["ids"])}
    return {
        "format": RUN_FORMAT,
        "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        WRITTEN_IN: os.path.abspath(output_dir),
        "output_dir": ".",
        "selection": portable_selection(selection.to_record(), output_dir),
        "selection_origin": {name: selection.where(name) for name in selection.to_record()},
        "missions": missions,
        "stage_a_files": [{**f, "path": stored(f["path"], output_dir)} for f in map(file_facts, stage_a_files)],
        "rewards": {"names": list(rewards), "weights": [float(w) for w in reward_weights]},
        "lora": lora,
        "world_size": world_size,
        "code": code_version(),
    }


def portable_selection(record: dict, base) -> dict:
    """A selection record (Selection.to_record) with its paths relative to `base`, the run folder."""
    out = dict(record)
    for key in SELECTION_PATHS:
        value = out.get(key)
        if isinstance(value, str) and value:
            out[key] = stored(value, base)
        elif isinstance(value, (list, tuple)):
            out[key] = [stored(v, base) if isinstance(v, str) and v else v for v in value]
    return out


def resolved_selection(record: dict, base) -> dict:
    """A run's selection record with its paths resolved against the run folder where it is now."""
    out = dict(record)
    for key in SELECTION_PATHS:
        value = out.get(key)
        if isinstance(value, str) and value:
            out[key] = str(resolved(value, base))
        elif isinstance(value, (list, tuple)):
            out[key] = [str(resolved(v, base)) if isinstance(v, str) and v else v for v in value]
    return out


def best_checkpoint(record: dict, path) -> Path | None:
    """The run's best checkpoint (validation.best_checkpoint), resolved against the run folder; None if none."""
    best = (record.get("validation") or {}).get("best_checkpoint")
    return resolved(best, Path(path).parent) if best else None


def write_run_record(folder, record: dict) -> Path:
    """Atomic write (a reader never sees half a file)."""
    return write_text_atomic(Path(folder) / RUN_FILE, json.dumps(record, ensure_ascii=False, indent=2) + "\n")


def read_run_record(path) -> dict:
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:   # RecursionError: JSON nested thousands deep
        raise RunRecordError(f"{path} cannot be read ({exc})") from None
    if not isinstance(record, dict) or record.get("format") != RUN_FORMAT:
        found = record.get("format") if isinstance(record, dict) else None
        raise RunRecordError(f"{path} has format {found!r}, this group-qc reads format {RUN_FORMAT} (written by "
                             f"another version)")
    for key in ("selection", "missions"):
        if not isinstance(record.get(key), dict):
            raise RunRecordError(f"{path} lacks {key!r}")
    return record


def run_file_of(adapter) -> Path | None:
    """`<run>/group_qc_run.json` for an adapter folder `<run>/checkpoint-N`, a model merged from it
    (`swift export --merge_lora true` writes `<run>/checkpoint-N-merged`), or the run folder itself. A merged model
    moved elsewhere keeps its run when group_qc_run.json is copied beside it."""
    adapter = Path(adapter).expanduser()
    for folder in (adapter, adapter.parent):
        if (folder / RUN_FILE).is_file():
            return folder / RUN_FILE
    return None


def is_training_output(adapter) -> bool:
    """An ms-swift training folder (args.json beside or above it): one that should have a run file."""
    adapter = Path(adapter).expanduser()
    return (adapter / "args.json").is_file() or (adapter.parent / "args.json").is_file()


def find_run(adapters) -> tuple[dict | None, Path | None, list[str]]:
    """(record, its path, notes) for the first adapter inside a recorded run. A missing or unreadable run
    file is a note, never an error: the caller falls back to its flags and says so."""
    notes = []
    for adapter in adapters:
        path = run_file_of(adapter)
        if path is None:
            if is_training_output(adapter):
                notes.append(f"no {RUN_FILE} beside {adapter} (trained by an older group-qc or without the "
                             f"plugin): the split comes from flags and GROUP_QC_* variables; pass the training "
                             f"run's --val_ratio and --split_seed")
            continue
        try:
            return read_run_record(path), path, notes
        except RunRecordError as exc:
            notes.append(f"{exc}: the split comes from flags and GROUP_QC_* variables instead; pass the training "
                         f"run's --val_ratio and --split_seed")
    return None, None, notes


def run_selection(record: dict, path) -> Selection:
    return Selection.from_record(resolved_selection(record["selection"], Path(path).parent), f"run {path}")


def trained_ids(record: dict, path) -> dict[str, set[str] | None]:
    """Per mission of the run, the group ids it trained on: the run's Stage-A input read again, split the run's
    way, and checked against the ids digest the run recorded. None for a mission whose input is gone or has
    changed since (its ids are then unknown)."""

    missions = record.get("missions") or {}
    try:
        selection = run_selection(record, path)
        records = load_records(selection, load_registry())
    except (ValueError, OSError):
        return {m: None for m in missions}
    ids: dict[str, list[str]] = {}
    for r in records:
        if in_split(r["group_id"], "train", selection.val_ratio, selection.seed):
            ids.setdefault(r["mission"], []).append(r["group_id"])
    return {m: (set(ids.get(m, [])) if ids_digest(ids.get(m, [])) == facts.get("train_ids_sha256") else None)
            for m, facts in missions.items()}


def train_overlap(record: dict, path, rows: list[dict]) -> list[dict]:
    """The rows whose group the run trained on. Where the run's input can be read again unchanged, exactly those
    groups (a group added since, a new work order a reviewer labelled, was never trained on); otherwise every
    group of the run's missions that the run's split puts in 'train' (the check errs towards refusing)."""
    selection = run_selection(record, path)
    known = trained_ids(record, path)
    out = []
    for r in rows:
        if r["mission"] not in record["missions"]:
            continue
        ids = known.get(r["mission"])
        if (r["group_id"] in ids) if ids is not None else \
                split_of(r["group_id"], selection.val_ratio, selection.seed) == "train":
            out.append(r)
    return out


def stage_a_changes(record: dict, stage_a_files, path) -> list[str]:
    """Stage-A files read now whose content differs from the run's (by sha256), or that the run did not read (the
    run's paths resolved against its folder `path`.parent)."""
    recorded = {str(resolved(f["path"], Path(path).parent).resolve()): f["sha256"]
                for f in record.get("stage_a_files", [])}
    changes = []
    for path in stage_a_files:
        facts = file_facts(path)
        if recorded.get(facts["path"]) != facts["sha256"]:
            changes.append(facts["path"])
    return changes


def selection_for(flags, adapters, environ=None) -> tuple[Selection, dict | None, Path | None, list[str]]:
    """A command's selection when it is given adapters: flags > GROUP_QC_* variables > the run's record >
    defaults. Returns (selection, run record or None, its path, notes to print)."""
    record, path, notes = find_run(adapters or [])
    selection = selection_from(flags, environ, base=run_selection(record, path) if record else None)
    return selection, record, path, notes


def main(argv=None) -> int:
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="group-qc run-record", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    best = sub.add_parser("best", help="print the best checkpoint of a run (or of the newest run under a folder)")
    best.add_argument("run", help=f"a run folder (holding {RUN_FILE}) or a folder of runs (v0-…, v1-…)")
    args = p.parse_args(argv)

    def show() -> int:
        path = newest_run_file(Path(args.run))
        checkpoint = best_checkpoint(read_run_record(path), path)
        if checkpoint is None:
            raise RunRecordError(f"{path} names no best checkpoint yet (the run has not ended, or it saved none)")
        if not checkpoint.is_dir():
            raise RunRecordError(f"{path}: the best checkpoint {checkpoint} does not exist (moved or deleted?)")
        print(checkpoint)
        return 0
    sys.exit(run_cli(show))


def newest_run_file(folder: Path) -> Path:
    """The run file in `folder`, else the newest of its subfolders' (ms-swift's v<N>-<time>: by N, so v10 is after
    v9; then by name)."""
    if (folder / RUN_FILE).is_file():
        return folder / RUN_FILE

    def version(p: Path) -> tuple[int, str]:
        m = re.match(r"v(\d+)-", p.parent.name)
        return (int(m.group(1)) if m else -1, p.parent.name)
    runs = sorted(folder.glob(f"*/{RUN_FILE}"), key=version)
    if not runs:
        raise RunRecordError(f"no {RUN_FILE} in {folder} or its subfolders: give a run folder of group-qc "
                             f"grpo (run_grpo.sh), or its output_dir")
    return runs[-1]


if __name__ == "__main__":
    main()
