"""Known-answer (gold) checks mixed into the day's review. Pure (hashlib, the project's pure core).

`stage_b.judge --gold FILE… [--gold_share S]` reads labelled Stage-A records (earlier days' labels, say) and mixes
ceil(S x the mission's groups today) of them into each mission's day, drawn by the SHA-256 of the audit seed and
group id (a resume mixes in the same ones; a group already among today's is never drawn). Each is judged like the
day's groups and written to the day's verdict file with its answer moved out of sight: `label` null, the answer in
`gold` ({"label", "from"}), which no review page shows. On the page it is a blind audit card (or, in a mission whose
every group goes to review, a review card with the mission's reason), like the day's own: nothing in the card or
the page's index tells it apart (tests/test_gold.py checks it). Known limits: its group id is its own (an id from an
earlier day); on a day without blind audits of a certified mission the gold cards are that mission's only audits.

Gold lines are not the day's work: the judge's automation figures and stage_b.monitor leave them out, and
stage_b.decisions scores each reviewer's decisions on them against the answer instead of making labels of them.
"""
from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

from qc_core.jsonl import JsonlError, iter_jsonl
from qc_core.missions import MissionError
from qc_core.records import RecordError, validate_record

from .bounds import in_range

DEFAULT_GOLD_SHARE = 0.05


class GoldError(ValueError):
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
                if rec.get("label") not in ("pass", "fail"):
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
                out.setdefault(mission, []).append({**rec, "mission": mission, "_gold_from": str(path)})
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
