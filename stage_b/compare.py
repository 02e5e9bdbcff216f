"""`python -m stage_b.compare`: the older name of `group-qc compare` (stage_b.evaluate.compare),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.evaluate.compare import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.compare", "compare", main))
