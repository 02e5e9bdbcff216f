"""`group-qc day STAGE_A_ARGS -- JUDGE_ARGS`: a day's Stage-A and its verdicts in one process.

scripts/judge.sh runs this when Stage-A needs one device (cuda=cpu or one GPU id): `stage_a.cli` with the arguments
before `--`, then, only if it succeeded, `stage_b.judge` with those after it. The two steps are the same code as the
two commands; what one process saves is the second start: importing torch, transformers, peft and ms-swift, 12 s of
each model process on the demo's CPU (`python -c "import swift.template"`), and on a GPU the device's start too.

The exit status is Stage-A's when Stage-A failed (the judge then never starts: it would judge from summaries that are
not all there) and the judge's otherwise. judge.sh answers a failure by running the two steps again one command and
one mission at a time, each resuming where this run stopped, so one broken mission stops none of the others.
"""
from __future__ import annotations

import gc
import sys

from qc_core.errors import UserError
from qc_core.exits import EXIT_ERROR
from stage_a import cli as stage_a_cli
from stage_b.judging import judge

SEPARATOR = "--"


def split_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(Stage-A's arguments, the judge's): the list split at its one `--`."""
    if argv.count(SEPARATOR) != 1:
        raise UserError(f"expected Stage-A's arguments, then {SEPARATOR}, then the judge's (exactly one {SEPARATOR}); "
                        f"got {len(argv)} argument(s) with {argv.count(SEPARATOR)}")
    cut = argv.index(SEPARATOR)
    return argv[:cut], argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    try:
        stage_a_args, judge_args = split_arguments(sys.argv[1:] if argv is None else argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    status = stage_a_cli.main(stage_a_args)
    if status != 0:
        return status
    gc.collect()   # the Stage-A model goes before the verdict model loads (on a GPU: its memory)
    _empty_device_cache()
    return judge.main(judge_args)


def _empty_device_cache() -> None:
    torch = sys.modules.get("torch")   # loaded by Stage-A's engine; nothing to free when it never was
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
