"""`python -m stage_b.plot_training`: the older name of `group-qc plot-training` (stage_b.pages.plot_training),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.pages.plot_training import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.plot_training", "plot-training", main))
