"""`group-qc <command> …` (also `python -m group_qc`): one router, as `swift <cmd>` and `trl <cmd>` are; each command
is a module of its own, imported only when it runs (the server does not load what Stage-A needs).

    group-qc serve --project DIR …        the review app (review_app.serve)
    group-qc users add NAME --role R …    its accounts (review_app.users)
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "serve": ("review_app.serve", "the review app over a project folder: accounts, queues, decisions saved as made"),
    "users": ("review_app.users", "the review app's accounts: add (a one-time password), list, reset, disable"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: group-qc <command> [options]\n\ncommands:\n" + "\n".join(lines) + \
        "\n\n`group-qc <command> --help` tells each command's options."


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"error: group-qc has no command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
