"""`python -m stage_a.review`: the name `python -m stage_a.audit` (Stage-A's audit page) had before; kept because
users type it."""
from __future__ import annotations

import sys

from .audit import main

if __name__ == "__main__":
    sys.exit(main())
