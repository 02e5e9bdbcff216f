import sys

from group_qc.cli import main

sys.exit(main())
