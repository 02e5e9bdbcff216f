"""`python -m stage_b.judge`: the command's name since before the subpackages; its code is stage_b.judging.judge."""
import sys

from stage_b.judging.judge import main

if __name__ == "__main__":
    sys.exit(main())
