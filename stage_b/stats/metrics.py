"""Verdict quality in the numbers QC owners use. Pure (math only).

Positive class = fail (a defective installation). Per group: expected `通过`/`不通过`, predicted `通过`,
`不通过` or None (unparseable: counted wrong, reported separately, never dropped).
  miss rate    = fail groups not judged 不通过 / fail groups   (an unparseable reply on a defective group is a
                 miss: nothing failed it, and evaluation routes nothing to review)
  overkill rate = pass groups judged 不通过 / pass groups
With the replies at hand, also the reason's grounding (stage_b.contract.grounding): reason_contradiction_rate,
citation_precision, citation_recall.
95% Wilson score intervals for accuracy, miss rate and overkill rate; a rate over zero groups is None.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from stage_b.contract.grounding import Grounding, ground, grounding_metrics
from stage_b.contract.verdict import FAIL, PASS

# predictions.jsonl's rows as the layers below stage_b.evaluate read them (it declares them: Prediction)
PredictionRows = Sequence[Mapping[str, Any]]

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> list[float] | None:
    """95% Wilson score interval of k successes in n trials; None when n == 0."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def confusion(pairs) -> dict:
    """{(expected, predicted): count} with predicted None for unparseable verdicts."""
    return dict(Counter((e, p if p in (PASS, FAIL) else None) for e, p in pairs))


def metrics_from_confusion(cm: dict, format_ok: int = 0) -> dict:
    """All QC metrics from a confusion dict (see module doc)."""
    fail_caught = cm.get((FAIL, FAIL), 0)
    fail_missed = cm.get((FAIL, PASS), 0)
    fail_invalid = cm.get((FAIL, None), 0)
    pass_ok = cm.get((PASS, PASS), 0)
    pass_overkill = cm.get((PASS, FAIL), 0)
    pass_invalid = cm.get((PASS, None), 0)
    n_fail = fail_caught + fail_missed + fail_invalid
    n_pass = pass_ok + pass_overkill + pass_invalid
    n = n_fail + n_pass
    correct = fail_caught + pass_ok
    invalid = fail_invalid + pass_invalid
    recalls = [r for r in (_rate(fail_caught, n_fail), _rate(pass_ok, n_pass)) if r is not None]
    return {
        "n": n, "n_pass": n_pass, "n_fail": n_fail,
        "accuracy": _rate(correct, n), "accuracy_ci95": wilson(correct, n),
        "balanced_accuracy": sum(recalls) / len(recalls) if recalls else None,
        "fail_recall": _rate(fail_caught, n_fail),
        "fail_precision": _rate(fail_caught, fail_caught + pass_overkill),
        "miss_rate": _rate(fail_missed + fail_invalid, n_fail),
        "miss_rate_ci95": wilson(fail_missed + fail_invalid, n_fail),
        "overkill_rate": _rate(pass_overkill, n_pass), "overkill_rate_ci95": wilson(pass_overkill, n_pass),
        "format_compliance": _rate(format_ok, n),
        "invalid_verdict_rate": _rate(invalid, n), "invalid_verdicts": invalid,
        "confusion": {"通过->通过": pass_ok, "通过->不通过": pass_overkill, "通过->invalid": pass_invalid,
                      "不通过->不通过": fail_caught, "不通过->通过": fail_missed, "不通过->invalid": fail_invalid},
    }


def compute_metrics(predictions: PredictionRows, missions: list[str] | None = None,
                    grounded: list | None = None) -> dict:
    """{"overall": {...}, "per_mission": {mission: {...}}}. `missions` lists missions to report even
    when they have no groups (n = 0, rates None). `grounded`: each prediction's grounding
    (stage_b.contract.grounding.ground
    of its completion), when the caller has them; computed here otherwise."""
    if grounded is None:
        grounded = [ground(p["completion"], p.get("summaries"), p["mission"]) if "completion" in p else None
                    for p in predictions]
    pairs = list(zip(predictions, grounded))
    names = list(dict.fromkeys((missions or []) + [p["mission"] for p in predictions]))
    per_mission = {m: _metrics([(p, g) for p, g in pairs if p["mission"] == m]) for m in names}
    return {"overall": _metrics(pairs), "per_mission": per_mission}


def _metrics(pairs: list[tuple[Mapping[str, Any], Grounding]]) -> dict:
    """The figures of (prediction, grounding) pairs."""
    rows = [r for r, _ in pairs]
    out = metrics_from_confusion(confusion((r["expected"], r["predicted"]) for r in rows),
                                 format_ok=sum(1 for r in rows if r.get("rewards", {}).get("qc_format") == 1.0))
    if all("completion" in r for r in rows):
        out.update(grounding_metrics([g for _, g in pairs]))
    return out
