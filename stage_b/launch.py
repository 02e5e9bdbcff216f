"""`python -m stage_b.launch`: the older name of `group-qc grpo` (stage_b.train.launch),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.train.launch import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.launch", "grpo", main))
