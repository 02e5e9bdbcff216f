"""`python -m stage_b.evaluate`."""
import sys

from .cli import main

sys.exit(main())
