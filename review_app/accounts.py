"""Accounts, passwords and sign-in: who is who in the review app.

- Roles: a reviewer decides their own queue; a lead sees every queue, the reviewer table and the escapes waiting for
  a second person, reassigns a queue and settles a conflict; the owner reads the promises, the monitor and the
  workload and accepts a weaker re-certified promise in words. There is no default account: `group-qc users add`
  makes each one and prints a one-time password, which the first sign-in must replace.
- Names follow the reviewer name rule (qc_core.names.reviewer_name), and two accounts never share a look-alike name
  (name_skeleton): `REVIEWER-DAY4`, a full-width or Cyrillic spelling of an account's name is refused at `users add`,
  so a second account is a second person.
- Passwords are hashed with argon2id (argon2-cffi's PasswordHasher, its defaults: RFC 9106's second recommended
  setting), never stored or logged; a hash made with older parameters is renewed at the next sign-in.
- Sign-in is rate limited (OWASP's authentication cheat sheet): MAX_FAILURES wrong passwords for one name (whether or
  not it is an account, so the answer does not tell which names exist) within FAILURE_WINDOW lock that name for
  LOCK_SECONDS (429 with Retry-After); so do MAX_CLIENT_FAILURES from one client address.
- Sessions: a random token (secrets.token_urlsafe, 256 bits) in an HttpOnly, SameSite=Strict cookie, stored as its
  SHA-256; a new one at every sign-in (the old one ends), an idle limit and a lifetime; each carries its own CSRF token
  (OWASP's synchronizer token pattern), sent back by the page in X-CSRF-Token on every request that changes anything.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from qc_core.errors import UserError
from qc_core.names import ReviewerNameError, name_skeleton, reviewer_name
from review_app.store import Account, Store, StoreError, now

ROLES = ("reviewer", "lead", "owner")
MAX_FAILURES = 5
MAX_CLIENT_FAILURES = 30
FAILURE_WINDOW = 15 * 60.0
LOCK_SECONDS = 15 * 60.0
MIN_PASSWORD = 10
MAX_PASSWORD = 1024


class AccountError(UserError):
    """An account request that cannot be done (names the value and what to do)."""


class SignInRefused(Exception):
    """A sign-in that failed: `status` 401 (wrong name or password) or 429 (locked; `retry_after` seconds)."""

    def __init__(self, status: int, message: str, retry_after: int = 0):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


_HASHER: list = []   # one PasswordHasher (its parameters are argon2-cffi's defaults); tests may put a cheaper one here


def _hasher():
    if not _HASHER:
        from argon2 import PasswordHasher
        _HASHER.append(PasswordHasher())
    return _HASHER[0]


def hash_password(password: str) -> str:
    return _hasher().hash(password)


def check_role(role: str) -> str:
    if role not in ROLES:
        raise AccountError(f"--role {role!r}: give one of {', '.join(ROLES)}")
    return role


def check_new_password(password) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise AccountError(f"a password is {MIN_PASSWORD} to {MAX_PASSWORD} characters; choose a longer one (a "
                           f"sentence is easy to remember)")
    return password


def add_account(store: Store, name: str, role: str) -> tuple[Account, str]:
    """A new account and its one-time password (module doc)."""
    try:
        name = reviewer_name(name)
    except ReviewerNameError as exc:
        raise AccountError(f"account name {exc}") from None
    password = secrets.token_urlsafe(15)
    return store.add_account(name, name_skeleton(name), check_role(role), hash_password(password)), password


def reset_password(store: Store, name: str) -> str:
    """A new one-time password for an account (every session of it ends)."""
    account = store.account_by_name(_name(name))
    if account is None:
        raise AccountError(f"no account {name!r}: group-qc users list shows them")
    password = secrets.token_urlsafe(15)
    store.set_password(account.id, hash_password(password), must_change=True)
    return password


def _name(text) -> str:
    try:
        return reviewer_name(text)
    except ReviewerNameError as exc:
        raise AccountError(f"account name {exc}") from None


@dataclass(frozen=True)
class SignedIn:
    account: Account
    token: str
    csrf: str


def sign_in(store: Store, name, password, client: str, came_with: str | None = None) -> SignedIn:
    """A new session for a right name and password (module doc), or SignInRefused."""
    t = now()
    if not isinstance(name, str) or not isinstance(password, str) or len(password) > MAX_PASSWORD or len(name) > 400:
        raise SignInRefused(401, "wrong name or password")
    skeleton = name_skeleton(name)
    subjects = [f"name:{skeleton}", f"client:{client}"]
    until = store.locked_until(subjects, t)
    if until:
        raise SignInRefused(429, f"too many wrong passwords: sign-in is locked for {int(until - t) + 1} s",
                            int(until - t) + 1)
    found = store.account_by_skeleton(skeleton)
    ok = False
    if found is not None and not found[0].disabled:
        account, stored_hash = found
        ok = account.name == reviewer_name_or_none(name) and _verify(stored_hash, password)
    else:
        _verify(_DUMMY_HASH(), password)   # the same time whether or not the name is an account
    if not ok:
        locked = store.count_failure(subjects[0], t, FAILURE_WINDOW, MAX_FAILURES, LOCK_SECONDS)
        locked = max(locked, store.count_failure(subjects[1], t, FAILURE_WINDOW, MAX_CLIENT_FAILURES, LOCK_SECONDS))
        if locked:
            raise SignInRefused(429, f"too many wrong passwords: sign-in is locked for {int(locked - t) + 1} s",
                                int(locked - t) + 1)
        raise SignInRefused(401, "wrong name or password")
    store.clear_failures(subjects[0])
    if _hasher().check_needs_rehash(stored_hash):
        store.set_password(account.id, hash_password(password), account.must_change)
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    store.new_session(account.id, token, csrf, t, replaces=came_with)
    return SignedIn(account, token, csrf)


def change_password(store: Store, account: Account, token: str, old: str, new: str) -> None:
    """Replaces the account's password (the one-time one, or their own) after checking the old one; every other
    session of the account ends."""
    found = store.account_by_skeleton(name_skeleton(account.name))
    if found is None or not isinstance(old, str) or not _verify(found[1], old):
        raise AccountError("the current password is wrong")
    if old == new:
        raise AccountError("the new password is the old one: choose another")
    store.set_password(account.id, hash_password(check_new_password(new)), must_change=False)
    store.end_sessions_except(account.id, token)


def reviewer_name_or_none(text: str) -> str | None:
    try:
        return reviewer_name(text)
    except ReviewerNameError:
        return None


def _verify(stored_hash: str, password: str) -> bool:
    from argon2.exceptions import InvalidHashError, VerificationError
    try:
        return bool(_hasher().verify(stored_hash, password))
    except (VerificationError, InvalidHashError):
        return False


_dummy: dict = {}


def _DUMMY_HASH() -> str:
    """A hash of nothing, made with the hasher in use: a sign-in for a name that is no account takes as long."""
    hasher = _hasher()
    if hasher not in _dummy:
        _dummy[hasher] = hash_password(secrets.token_urlsafe(16))
    return _dummy[hasher]


__all__ = ["ROLES", "AccountError", "SignInRefused", "SignedIn", "add_account", "reset_password", "sign_in",
           "change_password", "check_role", "StoreError"]
