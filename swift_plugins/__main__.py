"""`group-qc plugin-path` (or `group-qc plugin-path`) prints the absolute path of the ms-swift plugin file,
for use from any folder:

    swift rlhf --external_plugins "$(group-qc plugin-path)" ...

(ms-swift takes --external_plugins relative to the current folder, so the bare `swift_plugins/qc_plugin.py`
works only from the repository root.)"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent / "qc_plugin.py"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="group-qc plugin-path", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    print(PLUGIN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
