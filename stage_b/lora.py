"""`python -m stage_b.lora`: the older name of `group-qc lora` (stage_b.train.lora),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.train.lora import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.lora", "lora", main))
