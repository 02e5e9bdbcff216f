"""`python -m stage_b.plan_audits`: the command's name since before the subpackages; its code is
stage_b.monitoring.plan_audits."""
import sys

from stage_b.monitoring.plan_audits import main

if __name__ == "__main__":
    sys.exit(main())
