"""`python -m stage_b.plan_audits`: the older name of `group-qc plan-audits` (stage_b.monitoring.plan_audits),
kept for one release; it says so on stderr (qc_core.renamed)."""
import sys

from qc_core.renamed import run_renamed
from stage_b.monitoring.plan_audits import main

if __name__ == "__main__":
    sys.exit(run_renamed("python -m stage_b.plan_audits", "plan-audits", main))
