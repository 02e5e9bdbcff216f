"""`python -m stage_b.lora`: the command's name since before the subpackages; its code is stage_b.train.lora."""
import sys

from stage_b.train.lora import main

if __name__ == "__main__":
    sys.exit(main())
