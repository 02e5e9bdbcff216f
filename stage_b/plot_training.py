"""`python -m stage_b.plot_training`: the command's name since before the subpackages; its code is
stage_b.pages.plot_training."""
import sys

from stage_b.pages.plot_training import main

if __name__ == "__main__":
    sys.exit(main())
