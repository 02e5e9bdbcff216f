#!/usr/bin/env python
"""Two operating points side by side, per mission: certified or not, defective groups behind the promise, how many
would certify it, the threshold, and the share decided without review.

    python -m group_qc_dev.promises BEFORE/operating_point.json AFTER/operating_point.json [--names before after]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stage_b.rules.promise_texts import NO_AUTOMATION, automates_nothing


def rows(before: dict, after: dict) -> list[tuple]:
    out = []
    for mission in dict.fromkeys([*before["missions"], *after["missions"]]):
        row = [mission]
        for op in (before, after):
            e = op["missions"].get(mission) or {}
            row.append((e.get("certified"), e.get("n_fail", 0), e.get("fail_groups_needed"), e.get("automation_share"),
                        automates_nothing(e)))
        out.append(tuple(row))
    return out


def _cell(cell) -> str:
    certified, n_fail, needed, share, nothing = cell
    state = (NO_AUTOMATION if nothing else "certified") if certified else f"{needed or '∞'} needed"
    auto = "n/a" if share is None else f"{100 * share:.0f}%"
    return f"{n_fail:>3} defective, {state:>13}, auto {auto:>4}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--names", nargs=2, default=["before", "after"])
    args = p.parse_args(argv)
    before, after = (json.loads(Path(f).read_text(encoding="utf-8")) for f in (args.before, args.after))
    print(f"  {args.names[0]:<40} | {args.names[1]:<40} | mission")
    for mission, a, b in rows(before, after):
        print(f"  {_cell(a):<40} | {_cell(b):<40} | {mission}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
