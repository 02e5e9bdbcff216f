"""`python -m stage_a.review`: the older name of `group-qc stage-a-review` (stage_a.audit, Stage-A's audit page),
kept for one release; it says so on stderr (qc_core.renamed)."""
from __future__ import annotations

import sys

from qc_core.renamed import run_renamed
from stage_a.audit import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_a.review", "stage-a-review", main))
