"""The review app's schema as a versioned list of migrations, applied in order inside one transaction each, on SQLite
and PostgreSQL alike (the only difference, a table's own sequence column, is written `{seq}`). A database records
the last version applied (`schema_version`); a database newer than this code is refused, never written.

Append a migration to change the schema; never edit one that has shipped (tests/test_review_store.py opens a
database at every earlier version, with data, and migrates it).
"""
from __future__ import annotations

SEQUENCE = {"sqlite": "INTEGER PRIMARY KEY", "postgresql": "BIGSERIAL PRIMARY KEY"}

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "accounts, sessions, sign-in failures, decisions and their events, leases, reassignments", [
        """CREATE TABLE accounts (
             id {seq},
             name TEXT NOT NULL UNIQUE,            -- the name rule's form (qc_core.names.reviewer_name)
             skeleton TEXT NOT NULL UNIQUE,        -- one person, one name (qc_core.names.name_skeleton)
             role TEXT NOT NULL,
             password_hash TEXT NOT NULL,          -- argon2id (argon2-cffi)
             must_change INTEGER NOT NULL,         -- 1 while the password is the one-time password printed at add
             disabled INTEGER NOT NULL DEFAULT 0,
             created_at TEXT NOT NULL)""",
        """CREATE TABLE sessions (
             token_hash TEXT PRIMARY KEY,          -- sha256 of the cookie's token: a stolen table signs no one in
             account_id BIGINT NOT NULL REFERENCES accounts(id),
             csrf TEXT NOT NULL,
             created DOUBLE PRECISION NOT NULL,
             last_seen DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE sign_in_failures (
             subject TEXT PRIMARY KEY,             -- 'name:<skeleton>' or 'client:<address>'
             failures INTEGER NOT NULL,
             first_at DOUBLE PRECISION NOT NULL,
             locked_until DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE decision_events (
             seq {seq},
             id TEXT NOT NULL UNIQUE,              -- made by the page: the same id twice is one decision
             account_id BIGINT NOT NULL REFERENCES accounts(id),
             day TEXT NOT NULL,
             card TEXT NOT NULL,
             mission TEXT NOT NULL,
             group_id TEXT NOT NULL,
             kind TEXT NOT NULL,                   -- 'decision' or 'adjudication' (a lead settling a conflict)
             decision TEXT NOT NULL,
             note TEXT NOT NULL,
             reason TEXT,                          -- an adjudication's reason
             version INTEGER NOT NULL,             -- this account's decision on the card after this event
             decided_at TEXT NOT NULL,
             on_screen_ms BIGINT,
             source_file TEXT NOT NULL,
             line_sha256 TEXT NOT NULL,
             synced INTEGER NOT NULL DEFAULT 0,    -- 1 once its line is in the labels folder's decisions log
             sync_problem TEXT)""",
        "CREATE INDEX decision_events_unsynced ON decision_events (synced, seq)",
        "CREATE INDEX decision_events_card ON decision_events (day, card, account_id, version)",
        """CREATE TABLE decisions (
             day TEXT NOT NULL,
             card TEXT NOT NULL,
             account_id BIGINT NOT NULL REFERENCES accounts(id),
             version INTEGER NOT NULL,
             decision TEXT NOT NULL,
             note TEXT NOT NULL,
             event_id TEXT NOT NULL,
             PRIMARY KEY (day, card, account_id))""",
        """CREATE TABLE leases (
             day TEXT NOT NULL,
             card TEXT NOT NULL,
             account_id BIGINT NOT NULL REFERENCES accounts(id),
             until_at DOUBLE PRECISION NOT NULL,
             PRIMARY KEY (day, card))""",
        """CREATE TABLE reassignments (
             day TEXT NOT NULL,
             card TEXT NOT NULL,
             from_name TEXT NOT NULL,
             to_name TEXT NOT NULL,
             by_account BIGINT NOT NULL REFERENCES accounts(id),
             at TEXT NOT NULL,
             PRIMARY KEY (day, card, from_name))""",
    ]),
    (2, "the owner's acceptances of weaker re-certified promises", [
        """CREATE TABLE acceptances (
             seq {seq},
             point TEXT NOT NULL,                  -- the operating point's path in the project
             point_sha256 TEXT NOT NULL,
             words TEXT NOT NULL,
             account_id BIGINT NOT NULL REFERENCES accounts(id),
             at TEXT NOT NULL)""",
    ]),
]

LATEST = MIGRATIONS[-1][0]


def statements(version: int, dialect: str) -> list[str]:
    """The SQL of one migration for a dialect ('sqlite' or 'postgresql')."""
    for number, _, sql in MIGRATIONS:
        if number == version:
            return [s.replace("{seq}", SEQUENCE[dialect]) for s in sql]
    raise KeyError(version)
