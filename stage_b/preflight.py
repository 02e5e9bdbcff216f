"""`python -m stage_b.preflight`: the command's name since before the subpackages; its code is
stage_b.train.preflight."""
import sys

from stage_b.train.preflight import main

if __name__ == "__main__":
    sys.exit(main())
