"""`python -m stage_b.evaluate`."""
import sys

from stage_b.evaluate.cli import main

sys.exit(main())
