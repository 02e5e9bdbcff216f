"""`python -m stage_b.launch`: the command's name since before the subpackages; its code is stage_b.train.launch."""
import sys

from stage_b.train.launch import main

if __name__ == "__main__":
    sys.exit(main())
