"""From verdict probabilities to a threshold a QC owner chose by miss rate. Pure (math/json only).

`p_fail` is the model's probability of the first line `不通过` against `通过`, from the log-probabilities of
both whole lines (stage_b.generate.VerdictEngine.verdict_logprobs), normalised over the two.

The rule, so that anyone can recompute it from predictions.jsonl:
  - the verdict at threshold t is 不通过 iff p_fail >= t;
  - on the validation split, t is the largest of the candidates (every validation p_fail, plus 1.0, which
    fails nothing but a p_fail of exactly 1) whose miss rate is <= the target R;
  - a mission without fail groups in validation has no miss rate, so it gets no threshold;
  - the review margin m: the distances |p_fail - t| of the validation groups t gets wrong, sorted; m is the
    smallest distance that covers `review_share` of them (0 when t gets none wrong). A judged group with
    |p_fail - t| <= m needs a person's review.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
from pathlib import Path

from .metrics import wilson
from .verdict import FAIL, PASS

OPERATING_POINT_FORMAT = 1
DEFAULT_REVIEW_SHARE = 0.8
RULE = ("verdict is 不通过 iff p_fail >= threshold; threshold = the largest validation p_fail (or 1.0) whose "
        "validation miss rate <= target_miss_rate; needs_review iff |p_fail - threshold| <= review_margin")


class OperatingPointError(ValueError):
    """An operating point that cannot be computed or used (names the file, mission or value)."""


def p_fail(logprobs: dict[str, float]) -> float:
    """P(不通过 line) / (P(不通过 line) + P(通过 line)) from the two lines' log-probabilities, without overflow."""
    diff = logprobs[PASS] - logprobs[FAIL]
    if diff > 0:
        e = math.exp(-diff)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(diff))


def verdict_at(p: float, threshold: float) -> str:
    return FAIL if p >= threshold else PASS


def check_rate(value, what: str) -> float:
    """A rate or threshold in [0, 1], or an error naming `what`."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise OperatingPointError(f"{what} {value!r} is not a number; use a value from 0 to 1") from None
    if not 0.0 <= x <= 1.0 or math.isnan(x):
        raise OperatingPointError(f"{what} {value!r} is out of range: use a value from 0 to 1")
    return x


def rates_at(points: list[tuple[float, str]], threshold: float) -> dict:
    """Miss and overkill at one threshold over (p_fail, expected) pairs, with 95% Wilson intervals."""
    n_fail = sum(e == FAIL for _, e in points)
    n_pass = len(points) - n_fail
    misses = sum(e == FAIL and p < threshold for p, e in points)
    overkills = sum(e == PASS and p >= threshold for p, e in points)
    return {"threshold": threshold, "n": len(points), "n_fail": n_fail, "n_pass": n_pass,
            "misses": misses, "overkills": overkills,
            "miss_rate": misses / n_fail if n_fail else None, "miss_rate_ci95": wilson(misses, n_fail),
            "overkill_rate": overkills / n_pass if n_pass else None, "overkill_rate_ci95": wilson(overkills, n_pass)}


def curve(points: list[tuple[float, str]]) -> list[dict]:
    """The miss/overkill trade-off at every candidate threshold, from 1.0 down (miss falls, overkill rises)."""
    candidates = sorted({p for p, _ in points} | {1.0}, reverse=True)
    fails = sorted(p for p, e in points if e == FAIL)
    passes = sorted(p for p, e in points if e == PASS)
    out = []
    for t in candidates:
        misses = _count_below(fails, t)
        overkills = len(passes) - _count_below(passes, t)
        out.append({"threshold": t, "miss_rate": misses / len(fails) if fails else None,
                    "overkill_rate": overkills / len(passes) if passes else None})
    return out


def _count_below(sorted_values: list[float], t: float) -> int:
    return bisect.bisect_left(sorted_values, t)


def pick_threshold(points: list[tuple[float, str]], target_miss_rate: float) -> float | None:
    """The rule's threshold (module doc); None when there is no fail group to measure a miss rate on."""
    if not any(e == FAIL for _, e in points):
        return None
    return next(c["threshold"] for c in curve(points) if c["miss_rate"] <= target_miss_rate)


def review_margin(points: list[tuple[float, str]], threshold: float, share: float) -> float:
    """The rule's review margin (module doc)."""
    wrong = sorted(abs(p - threshold) for p, e in points if verdict_at(p, threshold) != e)
    if not wrong:
        return 0.0
    return wrong[max(0, math.ceil(share * len(wrong)) - 1)]


def mission_point(points: list[tuple[float, str]], target: float, share: float) -> dict:
    """One mission's (or the pooled) entry of operating_point.json."""
    threshold = pick_threshold(points, target)
    if threshold is None:
        return {"threshold": None, "target_miss_rate": target, "n": len(points), "n_fail": 0,
                "n_pass": len(points), "why_none": "no fail (审核不通过) group in validation, so no miss rate to "
                                                   "hold to the target"}
    margin = review_margin(points, threshold, share)
    at = rates_at(points, threshold)
    in_band = [e for p, e in points if abs(p - threshold) <= margin]
    return {"target_miss_rate": target, **at, "review_margin": margin,
            "validation_needs_review": len(in_band),
            "validation_errors_in_review": sum(verdict_at(p, threshold) != e
                                               for p, e in points if abs(p - threshold) <= margin)}


def points_of(predictions: list[dict]) -> dict[str, list[tuple[float, str]]]:
    """(p_fail, expected) per mission from predictions that have a p_fail (groups not judged have none)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for p in predictions:
        if p.get("p_fail") is not None:
            out.setdefault(p["mission"], []).append((p["p_fail"], p["expected"]))
    return out


def parse_targets(values: list[str] | None) -> dict | None:
    """`--target_miss_rate 0.05 BBU接地线检查=0.02` -> {"default": 0.05, "per_mission": {...}}; None if not given."""
    if not values:
        return None
    default, per_mission = None, {}
    for value in values:
        if "=" in value:
            mission, rate = value.rsplit("=", 1)
            per_mission[mission.strip()] = check_rate(rate, f"--target_miss_rate for {mission.strip()}")
        elif default is None:
            default = check_rate(value, "--target_miss_rate")
        else:
            raise OperatingPointError(f"--target_miss_rate takes one plain rate (the default) plus MISSION=RATE "
                                      f"overrides; got a second plain value {value!r}")
    return {"default": default, "per_mission": per_mission}


def build_operating_point(predictions: list[dict], missions: list[str], targets: dict, *, review_share: float,
                          model: dict, adapters: list[dict], data: dict | None, resolve=None) -> dict:
    """operating_point.json's content. `resolve` maps a mission name or alias in `targets` to its canonical
    name (stage_a.missions); a target for a mission not scored here is an error, not ignored."""
    by_mission = points_of(predictions)
    per_target = {}
    for name, rate in targets["per_mission"].items():
        canonical = resolve(name) if resolve else name
        if canonical not in missions:
            raise OperatingPointError(f"--target_miss_rate names {name!r}, which is not among the missions scored "
                                      f"here ({', '.join(missions)})")
        per_target[canonical] = rate
    entries, missing_target = {}, []
    for mission in missions:
        target = per_target.get(mission, targets["default"])
        if target is None:
            missing_target.append(mission)
            continue
        entries[mission] = mission_point(by_mission.get(mission, []), target, review_share)
    if missing_target:
        raise OperatingPointError(f"no target miss rate for {', '.join(missing_target)}: give a default "
                                  f"(--target_miss_rate 0.05) or MISSION=RATE for each")
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    overall = (mission_point(pooled, targets["default"], review_share) if targets["default"] is not None else None)
    return {"format": OPERATING_POINT_FORMAT, "rule": RULE, "review_share": review_share,
            "model": model, "adapters": adapters, "data": data, "missions": entries, "overall": overall}


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_SAMPLE = 1 << 20


def checkpoint_identity(path) -> dict:
    """{"path", "fingerprint"} of a model or adapter folder. The fingerprint hashes its config files whole and,
    per weight file, the name, the size and the first and last MiB: any retrained or other checkpoint differs,
    a copied or moved one does not, and a 15 GB model is identified in milliseconds, not minutes."""
    folder = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        if f.name in ("config.json", "adapter_config.json"):
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
        elif f.suffix in _WEIGHT_SUFFIXES:
            size = f.stat().st_size
            with f.open("rb") as fh:
                head = fh.read(_SAMPLE)
                fh.seek(max(0, size - _SAMPLE))
                tail = fh.read(_SAMPLE)
            digest.update(f"{f.name}\0{size}\0".encode() + head + tail)
    return {"path": str(folder), "fingerprint": digest.hexdigest()[:32]}


def checkpoint_identities(model: str, adapters, model_type: str | None = None, template: str | None = None) -> dict:
    """{"model", "adapters"} identities of the checkpoints a command loads; a wrong path fails here, naming it."""
    from stage_a.checkpoints import resolve_model
    spec = resolve_model(model, tuple(adapters), model_type, template)
    return {"model": checkpoint_identity(spec.path), "adapters": [checkpoint_identity(a) for a in spec.adapters]}


def file_digest(path) -> str:
    """sha256 of a file's bytes (judge records which operating point it used)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_operating_point(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise OperatingPointError(f"operating point file {path} does not exist; write one with python -m "
                                  f"stage_b.evaluate --target_miss_rate R, or pass --threshold T")
    try:
        op = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OperatingPointError(f"cannot read operating point file {path}: {exc}") from None
    if not isinstance(op, dict) or op.get("format") != OPERATING_POINT_FORMAT:
        raise OperatingPointError(f"{path} is not an operating point file of format {OPERATING_POINT_FORMAT} "
                                  f"(format {op.get('format') if isinstance(op, dict) else None!r}); recompute it "
                                  f"with python -m stage_b.evaluate --target_miss_rate R")
    for mission, entry in (op.get("missions") or {}).items():
        if entry.get("threshold") is not None:
            check_rate(entry["threshold"], f"{path}: threshold of {mission}")
            check_rate(entry.get("review_margin", 0.0), f"{path}: review_margin of {mission}")
    return op


def thresholds_for(op: dict, path, missions: list[str], *, model: dict, adapters: list[dict],
                   fallback: float | None = None) -> dict[str, dict]:
    """{mission: {"threshold", "review_margin", "source"}} for judging `missions` with this model, or an error.

    Refused: a file computed for another model or other adapters (compared by content fingerprint, so a
    moved folder is fine), and a mission the file has no threshold for unless `fallback` (--threshold) is
    given. Every problem is named at once."""
    problems = []
    if op.get("model", {}).get("fingerprint") != model.get("fingerprint"):
        problems.append(f"it was computed for model {op.get('model', {}).get('path')} and this is {model.get('path')}")
    theirs = [a.get("fingerprint") for a in op.get("adapters") or []]
    if theirs != [a.get("fingerprint") for a in adapters]:
        problems.append(f"it was computed with adapters {[a.get('path') for a in op.get('adapters') or []] or 'none'}"
                        f" and these are {[a.get('path') for a in adapters] or 'none'}")
    out, entries = {}, op.get("missions") or {}
    for mission in missions:
        entry = entries.get(mission)
        if entry and entry.get("threshold") is not None:
            out[mission] = {"threshold": entry["threshold"], "review_margin": entry.get("review_margin", 0.0),
                            "source": f"{path}"}
        elif fallback is not None:
            out[mission] = {"threshold": fallback, "review_margin": 0.0, "source": "--threshold"}
        elif entry:
            problems.append(f"it has no threshold for {mission} ({entry.get('why_none', 'none computed')})")
        else:
            problems.append(f"it has no entry for {mission} (its missions: {', '.join(entries) or 'none'})")
    if problems:
        raise OperatingPointError(f"operating point {path} cannot be used: " + "; ".join(problems)
                                  + ". Recompute it for this model and these missions with python -m stage_b.evaluate "
                                    "--target_miss_rate R, or pass --threshold T for missions without one")
    return out
