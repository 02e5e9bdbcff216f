"""`python -m stage_b.monitor`: the older name of `group-qc monitor` (stage_b.monitoring.monitor),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.monitoring.monitor import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.monitor", "monitor", main))
