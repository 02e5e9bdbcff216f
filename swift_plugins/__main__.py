"""`python -m swift_plugins` (or `group-qc-plugin-path`) prints the absolute path of the ms-swift plugin file,
for use from any folder:

    swift rlhf --external_plugins "$(python -m swift_plugins)" ...

(ms-swift takes --external_plugins relative to the current folder, so the bare `swift_plugins/qc_plugin.py`
works only from the repository root.)"""
from pathlib import Path

PLUGIN = Path(__file__).resolve().parent / "qc_plugin.py"


def path() -> int:
    print(PLUGIN)
    return 0


if __name__ == "__main__":
    path()
