"""`python -m stage_b.preflight`: the older name of `group-qc preflight` (stage_b.train.preflight),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.train.preflight import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.preflight", "preflight", main))
