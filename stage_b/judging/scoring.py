"""Putting a mission's groups to the verdict model: the prompt rows (a group that cannot be put to the model is named,
never dropped), one engine loaded on first use, and the verdict lines written batch by batch (flushed, so tail -f
shows them)."""
from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qc_core.jsonl import JsonlAppender
from qc_core.records import StageARecord, utc_now
from qc_core.paths import with_input_dir_stored
from stage_b.data.dataset import DatasetError, prompt_row, rows_for
from stage_b.data.settings import Selection
from stage_b.judging.verdict_file import Provenance, verdict_record
from stage_b.model.engine_settings import EngineSettings
from stage_b.model.model_replies import reply_starts
from stage_b.rules.operating_point import MissionPoint, p_fail


class LazyEngine:
    """The verdict engine, loaded when the first mission has groups to judge (a resumed run with nothing left
    loads no model); it keeps the time judging took."""

    def __init__(self, settings: EngineSettings):
        self.settings, self._engine, self.started, self.seconds = settings, None, 0.0, 0.0

    def get(self):
        if self._engine is None:
            self._engine = self.settings.engine(temperature=0.0)
            self.started = time.perf_counter()
        return self._engine


def group_key(record: Mapping[str, Any]) -> tuple[str, str]:
    """A group is its mission and id: one work order photographed for several missions is several groups."""
    return record["mission"], record["group_id"]


def prompt_rows(records: list[StageARecord], selection: Selection,
                registry) -> tuple[dict[tuple, dict], dict[tuple, str]]:
    """({group_key: what the model is asked}, {group_key: why it cannot be asked}). Only photo-aware rows can fail
    (a photo missing or unreadable): such a group goes to the errors file, retried on the next run, and the others
    are judged."""
    try:
        return {group_key(r): row for r, row in zip(records, rows_for(records, selection, registry, prompt_row))}, {}
    except DatasetError:
        rows, failed = {}, {}
        for record in records:
            try:
                rows[group_key(record)] = rows_for([record], selection, registry, prompt_row)[0]
            except DatasetError as exc:
                failed[group_key(record)] = f"group {record['group_id']} of {record['mission']}: {exc}"
        return rows, failed


def score_and_write(engine, prompts: dict[tuple, dict], unjudgeable: dict[tuple, str], todo: list[StageARecord],
                   point: MissionPoint, provenance: Provenance, path: Path, errors_file: Path, batch_size: int,
                   allow_uncertified: bool = False, guided: bool = True) -> int:
    written = 0
    with JsonlAppender(path) as out, JsonlAppender(errors_file) as errors:
        for record in todo:
            if group_key(record) in unjudgeable:
                why = unjudgeable[group_key(record)]
                errors.write({"group_id": record["group_id"], "mission": record["mission"], "error": why,
                              "created_at": utc_now()})
                print(f"warning: not judged (retried on the next run): {why}", file=sys.stderr)
        todo = [r for r in todo if group_key(r) in prompts]
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            rows = [prompts[group_key(r)] for r in batch]
            scores, failed = engine.verdict_logprobs(rows)
            ok = [i for i in range(len(rows)) if scores[i] is not None]
            p = {i: p_fail(scores[i]) for i in ok}
            starts = reply_starts({i: rows[i] for i in ok}, p, point, guided)
            todo_gen = [i for i in ok if not starts[i][1]]   # complete starts need no generation
            replies, gen_failed = (engine.generate([rows[i] for i in todo_gen],
                                                   prefixes=[starts[i][0] for i in todo_gen])
                                   if todo_gen else ([], {}))
            failed.update({todo_gen[k]: why for k, why in gen_failed.items()})
            written_replies = {i: starts[i][0] for i in ok if starts[i][1]}
            written_replies.update({i: replies[k][0] for k, i in enumerate(todo_gen)})
            for i in ok:
                if i in failed:
                    continue
                # the photo folder stored relative to the verdict file: a copied project reads its own photos
                out.write(with_input_dir_stored(verdict_record(batch[i], p[i], point, written_replies[i], provenance,
                                                               allow_uncertified), path.parent))
                written += 1
            for i, why in sorted(failed.items()):
                errors.write({"group_id": batch[i]["group_id"], "mission": batch[i]["mission"], "error": why,
                              "created_at": utc_now()})
                print(f"warning: not judged (retried on the next run): {why}", file=sys.stderr)
    return written
