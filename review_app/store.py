"""The review app's database, the system of record of every human decision: SQLite by default (one file in the project,
WAL, one writer at a time), PostgreSQL by URL for teams across sites; the same code and tests run on both (SQLAlchemy
Core, the schema in review_app.migrations).

One writer at a time, done right, on SQLite: every write transaction starts with BEGIN IMMEDIATE (it takes the write
lock at its start, so two writers never deadlock half-way and wait at most the busy timeout), inside a process lock
(threads queue in order instead of spinning on the busy handler); readers never block in WAL mode; synchronous=FULL,
so an acknowledged decision survives a crash of the machine too, not only of the server. On PostgreSQL each write
is a transaction whose conflicts are caught by the schema's unique keys and by compare-and-set updates on the
version, never by a read followed by a write that another server could interleave.

Every failure of the database itself (unreachable, locked, read-only, disk full) is a StoreError naming the database
and what to do; nothing is acknowledged that was not committed.
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from qc_core.errors import UserError
from qc_core.jsonl import LockedError, output_lock
from qc_core.records import utc_now
from review_app.migrations import LATEST, MIGRATIONS, statements

DB_FILE = "group-qc.db"   # the embedded default, in the project folder
SQLITE_BUSY_SECONDS = 10


class StoreError(UserError):
    """The database cannot do what was asked (names it, and what to do)."""


class StoreBusy(StoreError):
    """Another process holds the database's write lock for longer than the busy timeout."""


@dataclass(frozen=True)
class Account:
    id: int
    name: str
    role: str
    must_change: bool
    disabled: bool


def database_url(db: str | None, project: Path) -> str:
    """The SQLAlchemy URL of `--db` (a postgresql:// URL, a sqlite:/// URL or a file path), by default the project's
    own SQLite file."""
    if not db:
        return f"sqlite:///{(Path(project) / DB_FILE).resolve()}"
    scheme = urlsplit(db).scheme
    if scheme in ("postgresql", "postgres"):
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    if scheme.startswith("postgresql+") or scheme == "sqlite":
        return db
    if scheme and len(scheme) > 1:
        raise StoreError(f"--db {shown_url(db)}: give postgresql://USER:PASSWORD@HOST/DATABASE, sqlite:///PATH or a "
                         f"file path")
    return f"sqlite:///{Path(db).resolve()}"


def shown_url(url: str) -> str:
    """A database URL as a message may show it: without its password."""
    parts = urlsplit(url)
    if parts.password:
        url = url.replace(f":{parts.password}@", ":***@", 1)
    return url


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (`sqlite:///PATH`, or `sqlite:///file:PATH?mode=ro&uri=true`); None for another."""
    if not url.startswith("sqlite:///"):
        return None
    rest = url.split(":///", 1)[1]
    if rest.startswith("file:"):
        rest = rest[len("file:"):].split("?", 1)[0]
    return Path(rest)


def _explain(exc: Exception, url: str) -> StoreError:
    """A database failure as a sentence: which database, what happened, what to do."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
    where = shown_url(url)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return StoreBusy(f"the database {where} is locked by another process for over {SQLITE_BUSY_SECONDS} s "
                         f"({text}): stop the program holding it (a second server on this file, or a tool with it "
                         f"open in a transaction) and try again")
    if "readonly" in low or "read-only" in low:
        return StoreError(f"the database {where} is read-only ({text}): give the server write access to the file and "
                          f"its folder; nothing was saved")
    if "full" in low or "no space" in low:
        return StoreError(f"the disk of the database {where} is full ({text}): free space; nothing was saved")
    if "connect" in low or "connection" in low or "server closed" in low or "terminating" in low:
        return StoreError(f"cannot reach the database {where} ({text}): start it or check --db; nothing was saved")
    return StoreError(f"the database {where} failed: {text}; nothing was saved")


def _errors():
    from sqlalchemy import exc as sa_exc
    return (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DatabaseError)


class Store:
    """The database (module doc). Open with Store(url); `migrate()` brings its schema to LATEST."""

    def __init__(self, url: str):
        from sqlalchemy import create_engine, event
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
        self._write_lock = threading.Lock()
        if self.dialect == "sqlite":
            path = sqlite_path(url)
            if path is not None and not path.parent.is_dir():
                raise StoreError(f"the database's folder {path.parent} does not exist: give --project (or --db) an "
                                 f"existing folder")
            self.engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_SECONDS, "check_same_thread": False},
                                        pool_size=8, max_overflow=8)

            @event.listens_for(self.engine, "connect")
            def _on_connect(dbapi_connection, _record):
                dbapi_connection.isolation_level = None   # transactions are begun below, not by the driver
                cursor = dbapi_connection.cursor()
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_SECONDS * 1000}")
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = FULL")
                cursor.execute("PRAGMA foreign_keys = ON")
                cursor.close()

            @event.listens_for(self.engine, "begin")
            def _on_begin(conn):
                conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("writes") else "BEGIN")
        else:
            self.engine = create_engine(url, connect_args={"connect_timeout": 5}, pool_size=8, max_overflow=8,
                                        pool_pre_ping=True)

    # -- transactions --------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def read(self):
        try:
            with self.engine.connect() as conn:
                with conn.begin():
                    yield conn
        except _errors() as exc:
            raise _explain(exc, self.url) from None

    @contextlib.contextmanager
    def write(self):
        """One write transaction (module doc); committed when the block ends without an error."""
        lock = self._write_lock if self.dialect == "sqlite" else contextlib.nullcontext()
        try:
            with lock:
                with self.engine.connect() as conn:
                    conn.execution_options(writes=True)
                    with conn.begin():
                        yield conn
        except _errors() as exc:
            from sqlalchemy import exc as sa_exc
            if isinstance(exc, sa_exc.IntegrityError):
                raise
            raise _explain(exc, self.url) from None

    def execute(self, conn, sql: str, **params):
        from sqlalchemy import text
        return conn.execute(text(sql), params)

    def close(self) -> None:
        self.engine.dispose()

    # -- schema ----------------------------------------------------------------------------------------------------
    def version(self) -> int:
        """The schema version the database records (0: a new, empty database)."""
        from sqlalchemy import inspect
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table("schema_version"):
                    return 0
                return int(conn.exec_driver_sql("SELECT max(version) FROM schema_version").scalar() or 0)
        except _errors() as exc:
            raise _explain(exc, self.url) from None

    def migrate(self, to: int = LATEST) -> int:
        """Applies the migrations after the database's version, up to `to`, each in its own transaction; refuses a
        database written by a newer group-qc. Returns the version now."""
        with self.write() as conn:
            if self.dialect == "postgresql":   # two servers starting at once migrate one after the other
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(4242001)")
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
                                 "applied_at TEXT NOT NULL)")
        current = self.version()
        if current > LATEST:
            raise StoreError(f"the database {shown_url(self.url)} has schema version {current}, newer than this "
                             f"group-qc knows ({LATEST}): run the newer group-qc that wrote it")
        for number, _, _ in MIGRATIONS:
            if current < number <= to:
                with self.write() as conn:
                    if self.dialect == "postgresql":
                        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(4242001)")
                    done = int(conn.exec_driver_sql("SELECT coalesce(max(version), 0) FROM schema_version").scalar())
                    if done >= number:   # another server applied it meanwhile
                        continue
                    for sql in statements(number, self.dialect):
                        conn.exec_driver_sql(sql)
                    self.execute(conn, "INSERT INTO schema_version (version, applied_at) VALUES (:v, :at)",
                                 v=number, at=now_iso())
                current = number
        return current

    def require_current(self) -> None:
        version = self.version()
        if version != LATEST:
            raise StoreError(f"the database {shown_url(self.url)} is at schema version {version}, this group-qc needs "
                             f"{LATEST}: run group-qc users add (or serve), which migrates it")

    # -- accounts --------------------------------------------------------------------------------------------------
    def add_account(self, name: str, skeleton: str, role: str, password_hash: str) -> Account:
        from sqlalchemy import exc as sa_exc
        try:
            with self.write() as conn:
                same = self.execute(conn, "SELECT name FROM accounts WHERE skeleton = :s OR name = :n",
                                    s=skeleton, n=name).scalar()
                if same is not None:
                    raise StoreError(f"{name!r} is already an account, or looks like the account {same!r} (one "
                                     f"person, one name): give another name, or use {same!r}")
                self.execute(conn, "INSERT INTO accounts (name, skeleton, role, password_hash, must_change, "
                                   "created_at) VALUES (:n, :s, :r, :h, 1, :at)", n=name, s=skeleton, r=role,
                             h=password_hash, at=now_iso())
        except sa_exc.IntegrityError:
            raise StoreError(f"{name!r} is already an account, or looks like another account's name: give another "
                             f"name") from None
        account = self.account_by_name(name)
        assert account is not None
        return account

    def _account(self, row) -> Account:
        return Account(int(row.id), row.name, row.role, bool(row.must_change), bool(row.disabled))

    def account_by_name(self, name: str) -> Account | None:
        with self.read() as conn:
            row = self.execute(conn, "SELECT * FROM accounts WHERE name = :n", n=name).first()
        return self._account(row) if row else None

    def account_by_skeleton(self, skeleton: str) -> tuple[Account, str] | None:
        with self.read() as conn:
            row = self.execute(conn, "SELECT * FROM accounts WHERE skeleton = :s", s=skeleton).first()
        return (self._account(row), row.password_hash) if row else None

    def accounts(self) -> list[Account]:
        with self.read() as conn:
            rows = self.execute(conn, "SELECT * FROM accounts ORDER BY id").all()
        return [self._account(r) for r in rows]

    def has_owner(self) -> bool:
        with self.read() as conn:
            owners = self.execute(conn, "SELECT count(*) FROM accounts WHERE role = 'owner' AND disabled = 0").scalar()
        return owners > 0

    def set_password(self, account_id: int, password_hash: str, must_change: bool) -> None:
        with self.write() as conn:
            self.execute(conn, "UPDATE accounts SET password_hash = :h, must_change = :m WHERE id = :id",
                         h=password_hash, m=int(must_change), id=account_id)
            if must_change:   # a reset signs every session of the account out
                self.execute(conn, "DELETE FROM sessions WHERE account_id = :id", id=account_id)

    def set_disabled(self, account_id: int, disabled: bool) -> None:
        with self.write() as conn:
            self.execute(conn, "UPDATE accounts SET disabled = :d WHERE id = :id", d=int(disabled), id=account_id)
            if disabled:
                self.execute(conn, "DELETE FROM sessions WHERE account_id = :id", id=account_id)

    # -- sign-in failures ------------------------------------------------------------------------------------------
    def locked_until(self, subjects: list[str], now: float) -> float:
        with self.read() as conn:
            rows = [self.execute(conn, "SELECT locked_until FROM sign_in_failures WHERE subject = :s", s=s).scalar()
                    for s in subjects]
        return max([float(r) for r in rows if r is not None and float(r) > now], default=0.0)

    def count_failure(self, subject: str, now: float, window: float, limit: int, lock_seconds: float) -> float:
        """Counts a failed sign-in of `subject`; returns the time it is locked until (0: not locked). Failures older
        than `window` seconds start the count again."""
        with self.write() as conn:
            row = self.execute(conn, "SELECT failures, first_at FROM sign_in_failures WHERE subject = :s",
                               s=subject).first()
            if row is None or now - float(row.first_at) > window:
                failures, first = 1, now
            else:
                failures, first = int(row.failures) + 1, float(row.first_at)
            until = now + lock_seconds if failures >= limit else 0.0
            if row is None:
                self.execute(conn, "INSERT INTO sign_in_failures (subject, failures, first_at, locked_until) "
                                   "VALUES (:s, :f, :a, :u)", s=subject, f=failures, a=first, u=until)
            else:
                self.execute(conn, "UPDATE sign_in_failures SET failures = :f, first_at = :a, locked_until = :u "
                                   "WHERE subject = :s", s=subject, f=failures, a=first, u=until)
        return until

    def clear_failures(self, subject: str) -> None:
        with self.write() as conn:
            self.execute(conn, "DELETE FROM sign_in_failures WHERE subject = :s", s=subject)

    # -- sessions --------------------------------------------------------------------------------------------------
    def new_session(self, account_id: int, token: str, csrf: str, now: float, replaces: str | None = None) -> None:
        """Stores a session (by its token's digest); the session the browser came with, if any, ends: a sign-in
        always rotates the session."""
        with self.write() as conn:
            if replaces:
                self.execute(conn, "DELETE FROM sessions WHERE token_hash = :t", t=token_digest(replaces))
            self.execute(conn, "INSERT INTO sessions (token_hash, account_id, csrf, created, last_seen) "
                               "VALUES (:t, :a, :c, :n, :n)", t=token_digest(token), a=account_id, c=csrf, n=now)

    def session(self, token: str, now: float, idle: float, lifetime: float) -> tuple[Account, str] | None:
        """(the account, its CSRF token) of a live session; None for an unknown, expired or idle one (an expired one
        is removed). last_seen is written at most once a minute."""
        digest = token_digest(token)
        with self.read() as conn:
            row = self.execute(conn, "SELECT s.csrf, s.created, s.last_seen, a.* FROM sessions s JOIN accounts a "
                                     "ON a.id = s.account_id WHERE s.token_hash = :t", t=digest).first()
        if row is None:
            return None
        if now - float(row.created) > lifetime or now - float(row.last_seen) > idle or row.disabled:
            self.end_session(token)
            return None
        if now - float(row.last_seen) > 60:
            with self.write() as conn:
                self.execute(conn, "UPDATE sessions SET last_seen = :n WHERE token_hash = :t", n=now, t=digest)
        return self._account(row), row.csrf

    def end_session(self, token: str) -> None:
        with self.write() as conn:
            self.execute(conn, "DELETE FROM sessions WHERE token_hash = :t", t=token_digest(token))

    def end_sessions_except(self, account_id: int, token: str) -> None:
        with self.write() as conn:
            self.execute(conn, "DELETE FROM sessions WHERE account_id = :a AND token_hash <> :t", a=account_id,
                         t=token_digest(token))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def now_iso() -> str:
    return utc_now()


def now() -> float:
    return time.time()


@contextlib.contextmanager
def single_server(url: str):
    """Holds `<database>.serve.lock` while a server runs on a SQLite file: a second server on the same file exits 3
    (qc_core.exits), naming the first one's pid. (PostgreSQL serves any number of servers.)"""
    path = sqlite_path(url)
    if path is None:
        yield
        return
    lock = output_lock(f"{path}.serve")
    try:
        lock.__enter__()
    except LockedError:
        holder = Path(f"{path}.serve.lock").read_text(errors="replace").strip()
        raise LockedError(f"another group-qc serve (pid {holder or '?'}) is running on the database {path}: one server "
                          f"per SQLite file (stop it first, or use PostgreSQL with --db for several)") from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


__all__ = ["Store", "StoreError", "StoreBusy", "Account", "database_url", "single_server", "DB_FILE"]
