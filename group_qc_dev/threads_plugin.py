"""An ms-swift plugin for the demo's two side-by-side SFT runs: `--external_plugins group_qc_dev/threads_plugin.py
--callbacks threads_from_file` makes a run take the CPU threads a file names, read before each step.

Why: scripts/demo.sh trains the Stage-A summary model and the Stage-B start point at once, one thread each (two
processes on two threads each fight: 252 s against 66 s, python -m group_qc_dev.bench_parallel_sft). The start point
finishes first, and the Stage-A run then went on alone on one of the two cores for about 130 s. The demo writes 2 into
the file when the start point is done, and from its next step the Stage-A run uses both cores (a 1024x1024 matmul
loop: 1.43 s on one thread, 0.68 s after torch.set_num_threads(2) in the same process started with
OMP_NUM_THREADS=1). The threads change only the speed of a step, never what it computes beyond float summation order.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from swift.callbacks import TrainerCallback, callbacks_map

THREADS_FILE = "GROUP_QC_THREADS_FILE"   # the variable naming the file; unset or no file: nothing changes
log = logging.getLogger("group_qc.threads")


def threads_wanted(path: str | None) -> int | None:
    """The whole number in the file, or None when there is no file (yet) or it does not hold one."""
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


class ThreadsFromFile(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        import torch
        wanted = threads_wanted(os.environ.get(THREADS_FILE))
        if wanted is not None and wanted != torch.get_num_threads():
            log.warning("step %d: %d CPU thread(s) from now on (%s)", state.global_step, wanted,
                        os.environ[THREADS_FILE])
            torch.set_num_threads(wanted)


callbacks_map["threads_from_file"] = ThreadsFromFile
