"""`python -m stage_b.evaluate`: the older name of `group-qc evaluate` (stage_b.evaluate.cli),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.evaluate.cli import main

sys.exit(run_renamed("python -m stage_b.evaluate", "evaluate", main))
