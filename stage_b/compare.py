"""`python -m stage_b.compare`: the command's name since before the subpackages; its code is
stage_b.evaluate.compare."""
import sys

from stage_b.evaluate.compare import main

if __name__ == "__main__":
    sys.exit(main())
