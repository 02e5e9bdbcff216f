"""The older command names keep working for one release and say so: `python -m stage_b.judge` and the console
scripts `group-qc-judge`, … run the same code as `group-qc judge`, after one line on stderr naming the new command
(stderr, so that a script reading a command's output, `$(python -m stage_b.run_record best RUN)`, still reads it)."""
from __future__ import annotations

import sys
from typing import Callable

# `group-qc-<name>` console scripts (pyproject.toml) -> the `group-qc` command they run; group_qc.cli routes them
OLD_SCRIPTS = {
    "group-qc-stage-a": "stage-a", "group-qc-stage-a-merge": "stage-a-merge",
    "group-qc-stage-a-review": "stage-a-review", "group-qc-stage-a-convert": "stage-a-convert",
    "group-qc-preflight": "preflight", "group-qc-grpo": "grpo",
    "group-qc-eval": "evaluate", "group-qc-judge": "judge", "group-qc-decisions": "decisions",
    "group-qc-monitor": "monitor", "group-qc-plan-audits": "plan-audits", "group-qc-compare": "compare",
    "group-qc-plot-training": "plot-training", "group-qc-lora": "lora", "group-qc-run-record": "run-record",
    "group-qc-plugin-path": "plugin-path",
}


def renamed_line(old: str, command: str) -> str:
    return (f"note: `{old}` is an older name of `group-qc {command}`; it works in this release and goes in the next: "
            f"run `group-qc {command}`")


def run_renamed(old: str, command: str, main: Callable[[], int | None]) -> int:
    """Runs an older name's command after saying its new name (the shims in stage_b/ call this)."""
    print(renamed_line(old, command), file=sys.stderr)
    return int(main() or 0)
