"""`python -m group_qc_dev.monitor_table monitor.json`: the demo's day table, one row per day and mission: inspection
state, the audit share the day was judged at, audits, escapes, the two detectors, status."""
from __future__ import annotations

import sys

from stage_b.monitoring.monitor_file import load_monitor


def table(monitor: dict) -> str:
    head = ("day", "mission", "state", "audit share", "audited", "escapes / auto-passed audited", "miss detector",
            "escape detector", "status", "next share")
    rows = [head, tuple("---" for _ in head)]
    for day in monitor["days"]:
        for mission, m in monitor["missions"].items():
            d = next((r for r in m["days"] if r["day"] == day and r["judged"]), None)
            if d is None:
                continue
            rows.append((day, mission, d["state"], _share(d["audit_share"]), str(d["audited"]),
                         f"{d['escapes']} / {d['audited_auto_passed']}", f"{d['miss_detector']:.3g}",
                         f"{d['escape_detector']:.3g}", d["status"], _share(d["next_audit_share"])))
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def _share(x) -> str:
    return "-" if x is None else f"{100 * x:.3g}%"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m group_qc_dev.monitor_table MONITOR_JSON", file=sys.stderr)
        return 2
    print(table(load_monitor(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
