"""`python -m stage_b.run_record`: the command's name since before the subpackages; its code is
stage_b.train.run_record."""
import sys

from stage_b.train.run_record import main

if __name__ == "__main__":
    sys.exit(main())
