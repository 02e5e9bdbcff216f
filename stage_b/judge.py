"""`python -m stage_b.judge`: the older name of `group-qc judge` (stage_b.judging.judge),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.judging.judge import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.judge", "judge", main))
