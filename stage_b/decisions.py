"""`python -m stage_b.decisions`: the older name of `group-qc decisions` (stage_b.labels.decisions),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.labels.decisions import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.decisions", "decisions", main))
