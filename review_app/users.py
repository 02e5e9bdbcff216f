"""`group-qc users`: the review app's accounts (review_app.accounts). No account exists until one is added here.

    group-qc users add NAME --role reviewer|lead|owner --project DIR [--db URL]   # last line: password: <one-time>
    group-qc users list --project DIR [--db URL]
    group-qc users reset NAME --project DIR [--db URL]     # a new one-time password; the account's sessions end
    group-qc users disable NAME | enable NAME --project DIR [--db URL]

(also `python -m review_app.users …`). The database is the project's own SQLite file (`DIR/group-qc.db`) unless --db
names another (postgresql://USER:PASSWORD@HOST/DATABASE); it is created and migrated on first use.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qc_core.exits import run_cli
from review_app.accounts import ROLES, AccountError, add_account, reset_password
from review_app.store import Store, database_url


def open_store(project, db) -> Store:
    project = Path(project)
    if not project.is_dir():
        raise AccountError(f"--project {project} is not a folder: give the project folder the server serves (the one "
                           f"holding the judged days and labels/)")
    store = Store(database_url(db, project))
    store.migrate()
    return store


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="group-qc users", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    for action, helptext in (("add", "add an account; prints its one-time password"), ("list", "list the accounts"),
                             ("reset", "a new one-time password for an account"), ("disable", "disable an account"),
                             ("enable", "enable a disabled account")):
        a = sub.add_parser(action, help=helptext)
        if action != "list":
            a.add_argument("name")
        if action == "add":
            a.add_argument("--role", required=True, choices=ROLES)
        a.add_argument("--project", required=True, help="the project folder the server serves")
        a.add_argument("--db", default=None, help="a database URL (default: DIR/group-qc.db, SQLite)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _users(args))


def _users(args) -> int:
    store = open_store(args.project, args.db)
    try:
        if args.action == "add":
            account, password = add_account(store, args.name, args.role)
            print(f"added {account.role} {account.name}; give them this one-time password (their first sign-in "
                  f"replaces it)")
            print(f"password: {password}")
        elif args.action == "list":
            for a in store.accounts():
                flags = ", ".join(x for x, on in (("one-time password", a.must_change), ("disabled", a.disabled)) if on)
                print(f"{a.name}\t{a.role}" + (f"\t({flags})" if flags else ""))
        elif args.action == "reset":
            print(f"password: {reset_password(store, args.name)}")
        else:
            found = store.account_by_name(args.name)
            if found is None:
                raise AccountError(f"no account {args.name!r}: group-qc users list shows them")
            store.set_disabled(found.id, args.action == "disable")
            print(f"{found.name}: {args.action}d")
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
