"""`group-qc compare <metrics A> <metrics B>`: two evaluations side by side (e.g. the starting
point and the GRPO result, or text-only and photo-aware GRPO), with B - A and whether the change exceeds the 95%
intervals (the intervals do not overlap: a conservative test). The header says what each model read (summaries,
or summaries and photos) and on which groups; scoring different groups is said, not hidden."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli

ROWS = (("accuracy", "accuracy_ci95", True), ("miss_rate", "miss_rate_ci95", False),
        ("overkill_rate", "overkill_rate_ci95", False), ("balanced_accuracy", None, True),
        ("fail_recall", None, True), ("fail_precision", None, True), ("format_compliance", None, True),
        ("invalid_verdict_rate", None, False))


def load(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:   # RecursionError: JSON nested thousands deep
        raise UserError(f"cannot read metrics file {path}: {exc}") from None
    if "overall" not in data or "per_mission" not in data:
        raise UserError(f"{path} is not a group-qc evaluate metrics.json (no 'overall'/'per_mission')")
    return data


def separated(ci_a, ci_b) -> bool:
    return bool(ci_a and ci_b) and (ci_a[1] < ci_b[0] or ci_b[1] < ci_a[0])


def compare_rows(a: dict, b: dict) -> list[dict]:
    out = []
    for key, ci_key, higher_is_better in ROWS:
        va, vb = a.get(key), b.get(key)
        delta = None if va is None or vb is None else vb - va
        sig = separated(a.get(ci_key), b.get(ci_key)) if ci_key else None
        better = None if delta is None or delta == 0 else (delta > 0) == higher_is_better
        out.append({"metric": key, "a": va, "b": vb, "delta": delta, "beyond_ci95": sig, "better": better})
    return out


def describe(data: dict | None) -> str:
    """What an evaluation's model read and which groups it scored, from metrics.json's `data`."""
    data = data or {}
    return (f"read {data.get('mode_settings', 'summaries only')}; "
            f"{data.get('split', '?')} split, {data.get('split_settings', 'split not recorded')}")


def scored(metrics: dict) -> tuple:
    """Which groups an evaluation scored, as far as metrics.json says: the split, its ratio and seed (values, not
    where they came from), and the groups per mission."""
    data = metrics.get("data") or {}
    selection = data.get("selection") or {}
    return (data.get("split"), selection.get("val_ratio"), selection.get("seed"),
            sorted((data.get("groups") or {}).items()))


def render(a: dict, b: dict, name_a: str, name_b: str) -> str:
    fmt = lambda x: "n/a" if x is None else f"{100 * x:6.1f}%"  # noqa: E731
    lines = [f"A = {name_a}: {describe(a.get('data'))}", f"B = {name_b}: {describe(b.get('data'))}"]
    if scored(a) != scored(b):
        lines.append("note: A and B scored different groups; differences mix the models with the data")
    for scope, ma, mb in [("overall", a["overall"], b["overall"]),
                          *[(m, a["per_mission"].get(m, {}), b["per_mission"].get(m, {}))
                            for m in dict.fromkeys([*a["per_mission"], *b["per_mission"]])]]:
        lines.append(f"\n{scope}  (n: A {ma.get('n', 0)}, B {mb.get('n', 0)})")
        lines.append(f"  {'metric':<22}{name_a[:14]:>14}{name_b[:14]:>14}{'B - A':>10}  beyond 95% CI")
        for r in compare_rows(ma, mb):
            delta = "n/a" if r["delta"] is None else f"{100 * r['delta']:+.1f} pt"
            sig = {True: "yes", False: "no", None: ""}[r["beyond_ci95"]]
            mark = {True: " (better)", False: " (worse)", None: ""}[r["better"]]
            lines.append(f"  {r['metric']:<22}{fmt(r['a']):>14}{fmt(r['b']):>14}{delta:>10}  {sig}{mark}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc compare", description=__doc__)
    p.add_argument("metrics_a", help="metrics.json of the reference (e.g. the starting point)")
    p.add_argument("metrics_b", help="metrics.json of the candidate (e.g. after GRPO)")
    p.add_argument("--names", nargs=2, default=["A", "B"], help="column names")
    args = p.parse_args(argv)

    def body() -> int:
        print(render(load(args.metrics_a), load(args.metrics_b), *args.names))
        return 0
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
