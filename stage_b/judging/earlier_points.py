"""A point that replaces another says so. Pure (the project's pure core).

The judge works out whether a re-certified point promises less than the one it replaces from the replaced file itself
(stage_b.rules.replacement.recomputed_weaker), so an edited `replaces` block cannot hide a weaker promise. A point
whose `replaces` block was deleted would name nothing to compare with: so when the days beside today's (the output
folder's parent, where judge.sh keeps them) were judged with the same model and adapters (by content) at another
operating point, a point without `replaces` is refused, naming that point, before any model loads.
"""
from __future__ import annotations

from pathlib import Path

from qc_core.jsonl import JsonlError, iter_jsonl
from stage_b.judging.settings import JudgeError
from stage_b.monitoring.days import verdict_files
from stage_b.rules.point_identity import PointKeys


def _first_line(path: Path) -> dict | None:
    try:
        for _, rec in iter_jsonl(path):
            return rec
    except (JsonlError, OSError):
        return None
    return None


def points_judged_beside(output_dir: Path, model: str | None, adapters: list) -> dict[str, str]:
    """{a recorded operating point: the day folder judged at it} for the day folders beside `output_dir` whose verdict
    files were written with this model and these adapters (their fingerprints; a verdict file's provenance is the same
    on every line, so its first line tells)."""
    out: dict[str, str] = {}
    parent, today = Path(output_dir).resolve().parent, Path(output_dir).resolve()
    if not parent.is_dir():
        return out
    for folder in sorted(p for p in parent.iterdir() if p.is_dir() and p.resolve() != today):
        for path in verdict_files(folder):
            rec = _first_line(path)
            prints = (rec or {}).get("fingerprints") or {}
            if rec and rec.get("operating_point") and prints.get("model") == model \
                    and list(prints.get("adapters") or []) == list(adapters):
                out.setdefault(rec["operating_point"], folder.name)
    return out


def check_names_what_it_replaces(op_path, op, point: PointKeys, checkpoints: dict, output_dir: Path) -> None:
    """JudgeError when the days beside today's were judged with this model at another point and this one names no
    point it replaces (module doc)."""
    if op.extra.get("replaces"):
        return
    earlier = {p: day for p, day in points_judged_beside(
        output_dir, checkpoints["model"]["fingerprint"], [a["fingerprint"] for a in checkpoints["adapters"]]).items()
        if not point.names(p)}
    if earlier:
        other, day = sorted(earlier.items())[0]
        where = Path(output_dir).resolve().parent / day
        raise JudgeError(f"{op_path} names no operating point it replaces, and {where} "
                         f"was judged with this model and these adapters at another one ({str(other)[:20]}…): a point "
                         f"that replaces another says which (group-qc evaluate --replaces OLD …), so that a "
                         f"promise weaker than the old one waits for the owner's words. Certify it again with "
                         f"--replaces, or judge into a folder of its own")
