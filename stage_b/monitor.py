"""`python -m stage_b.monitor`: the command's name since before the subpackages; its code is
stage_b.monitoring.monitor."""
import sys

from stage_b.monitoring.monitor import main

if __name__ == "__main__":
    sys.exit(main())
