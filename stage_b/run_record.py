"""`python -m stage_b.run_record`: the older name of `group-qc run-record` (stage_b.train.run_record),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.train.run_record import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.run_record", "run-record", main))
