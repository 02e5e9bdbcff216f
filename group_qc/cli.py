"""`group-qc <command> …` (also `python -m group_qc`): one router, as `swift <cmd>` and `trl <cmd>` are; each command
is a module of its own, imported by name only when it runs (the server does not load what Stage-A needs, and the
router itself imports no model library). `group-qc --help` lists every command with one line each. The older names
(`python -m stage_b.judge`, the console scripts `group-qc-judge`, …) run the same modules for one release, after a
line on stderr naming the new command (qc_core.renamed).

    group-qc stage-a --input_dir … --model …     per-photo summaries (stage_a.cli)
    group-qc judge --operating_point … …         a day's verdicts (stage_b.judging.judge)
    group-qc monitor --days_under … --labels …   promises on live work (stage_b.monitoring.monitor)
    group-qc serve --project DIR …               the review app (review_app.serve)
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from qc_core.renamed import OLD_SCRIPTS, renamed_line

COMMANDS = {
    "stage-a": ("stage_a.cli", "Stage-A: a one-line summary per photo, one resumable JSONL per mission"),
    "stage-a-merge": ("stage_a.merge", "merge the shard files of a Stage-A run"),
    "stage-a-review": ("stage_a.audit", "a review page of a sample of Stage-A's summaries, with their photos"),
    "stage-a-convert": ("stage_a.convert", "Stage-A files of the public origin's format into this project's"),
    "preflight": ("stage_b.train.preflight", "before GRPO: do the rewards separate the start point's samples?"),
    "grpo": ("stage_b.train.launch", "Stage-B GRPO through ms-swift's swift rlhf (LoRA on the last K blocks)"),
    "lora": ("stage_b.train.lora", "the --target_regex (and swift flags) for LoRA on the last K blocks"),
    "run-record": ("stage_b.train.run_record", "a GRPO run's record: its best checkpoint, its split"),
    "plot-training": ("stage_b.pages.plot_training", "a GRPO run's training plot"),
    "evaluate": ("stage_b.evaluate.cli", "held-out quality, the report, a certified operating point"),
    "compare": ("stage_b.evaluate.compare", "two evaluations side by side"),
    "judge": ("stage_b.judging.judge", "a day's work orders: verdicts, routes, blind audits, the review page"),
    "day": ("stage_b.judging.day", "Stage-A then the judge in one process (what judge.sh runs on one device)"),
    "decisions": ("stage_b.labels.decisions", "import reviewers' exported decisions as labels"),
    "monitor": ("stage_b.monitoring.monitor", "do the promises hold on live work? the owner's status lines"),
    "plan-audits": ("stage_b.monitoring.plan_audits", "the audit share each mission needs, and its price"),
    "serve": ("review_app.serve", "the review app over a project folder: accounts, queues, decisions saved as made"),
    "users": ("review_app.users", "the review app's accounts: add (a one-time password), list, reset, disable"),
    "plugin-path": ("swift_plugins.__main__", "the ms-swift plugin file's absolute path, for --external_plugins"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: group-qc <command> [options]\n\ncommands:\n" + "\n".join(lines) + \
        "\n\n`group-qc <command> --help` tells each command's options."


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"error: group-qc has no command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


def old_script() -> int:
    """Every older console script (`group-qc-judge`, …) points here and is known by the name it was started as."""
    old = Path(sys.argv[0]).name.removesuffix(".exe")
    if old not in OLD_SCRIPTS:
        print(f"error: {old!r} is no group-qc command; `group-qc --help` lists them", file=sys.stderr)
        return 2
    print(renamed_line(old, OLD_SCRIPTS[old]), file=sys.stderr)
    return main([OLD_SCRIPTS[old], *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
