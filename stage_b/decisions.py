"""`python -m stage_b.decisions`: the command's name since before the subpackages; its code is
stage_b.labels.decisions."""
import sys

from stage_b.labels.decisions import main

if __name__ == "__main__":
    sys.exit(main())
