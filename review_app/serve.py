"""`group-qc serve`: the review app over one project folder (also `python -m review_app.serve`).

    group-qc serve --project DIR [--db URL] [--host 127.0.0.1] [--port 8080] [--labels DIR] [--photos DIR …]
        [--https] [--session_hours 12] [--idle_minutes 120] [--lease_minutes 5] [--cost_per_hour X]

DIR is the folder the judged days, the operating points and the monitor are in (the demo's demo_out, the docs'
output/); decisions become labels in DIR/labels (or --labels) as they are made. The database is DIR/group-qc.db
(SQLite, one server per file) unless --db names PostgreSQL (postgresql://USER:PASSWORD@HOST/DATABASE: any number of
servers). It refuses to start without an owner account (`group-qc users add NAME --role owner --project DIR`) and
binds to 127.0.0.1 unless --host says otherwise; on a network, put it behind HTTPS (a reverse proxy: docs) and pass
--https so its cookies are only sent over it. Ctrl-C stops it after writing every stored decision into the labels.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import EXIT_ERROR, EXIT_LOCKED
from qc_core.jsonl import LockedError
from review_app.access import Settings
from review_app.app import create_app
from review_app.project import Project
from review_app.store import Store, database_url, shown_url, single_server
from stage_b.contract.bounds import in_range


class ServeError(UserError):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="group-qc serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--project", required=True, help="the project folder (judged days, operating points, monitor)")
    p.add_argument("--db", default=None, help="a database URL (default: DIR/group-qc.db, SQLite)")
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", default="8080")
    p.add_argument("--labels", default=None, help="the labels folder decisions go to (default DIR/labels)")
    p.add_argument("--photos", nargs="+", default=[], help="folders outside DIR whose photos the days show")
    p.add_argument("--https", action="store_true", help="served behind HTTPS: cookies are sent over it only")
    p.add_argument("--session_hours", default="12", help="a session's lifetime (default 12)")
    p.add_argument("--idle_minutes", default="120", help="a session ends after this long unused (default 120)")
    p.add_argument("--lease_minutes", default="5", help="how long a card in a shared queue stays with the reviewer "
                                                        "who opened it (default 5)")
    p.add_argument("--cost_per_hour", default=None, help="a person-hour's price, to show the day's cost")
    return p


def prepare(args) -> tuple:
    project = Path(args.project)
    if not project.is_dir():
        raise ServeError(f"--project {project} is not a folder: give the folder holding the judged days")
    port = int(in_range(args.port, "--port", 1, 65535, "a port number, e.g. 8080", ServeError))
    settings = Settings(lifetime_seconds=3600 * in_range(args.session_hours, "--session_hours", 0.01, 24 * 30,
                                                         "hours, e.g. 12", ServeError),
                        idle_seconds=60 * in_range(args.idle_minutes, "--idle_minutes", 1, 24 * 60 * 30,
                                                   "minutes, e.g. 120", ServeError),
                        lease_seconds=60 * in_range(args.lease_minutes, "--lease_minutes", 0.1, 120,
                                                    "minutes, e.g. 5", ServeError),
                        secure_cookies=args.https,
                        cost_per_hour=None if args.cost_per_hour is None else
                        in_range(args.cost_per_hour, "--cost_per_hour", 0, 1e9, "a price, e.g. 60", ServeError))
    for folder in args.photos:
        if not Path(folder).is_dir():
            raise ServeError(f"--photos {folder} is not a folder")
    url = database_url(args.db, project)
    store = Store(url)
    store.migrate()
    if not store.has_owner():
        store.close()
        raise ServeError(f"no owner account in {shown_url(url)}: the app starts with an owner (there is no default "
                         f"account). Add one: group-qc users add NAME --role owner --project {project}")
    return project, port, settings, url, store


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        project, port, settings, url, store = prepare(args)
    except (UserError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    import uvicorn
    try:
        with single_server(url):
            app = create_app(store, Project(project, args.labels, args.photos), settings)
            if args.host not in ("127.0.0.1", "localhost", "::1"):
                print(f"note: serving on {args.host}: put it behind HTTPS (docs/judging_and_review.md) and pass "
                      f"--https", file=sys.stderr)
            print(f"serving {project.resolve()} at http://{args.host}:{port}/ (database {shown_url(url)}; labels "
                  f"{app.state.ctx.project.labels_dir}); Ctrl-C stops it", flush=True)
            uvicorn.run(app, host=args.host, port=port, log_level="warning", access_log=False)
    except LockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
