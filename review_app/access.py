"""Who is asking, and what they may reach: the app's settings and context, the session of a request (a cookie, its
CSRF token on every change), the role a route needs, and the day and card of a request checked against the account
(a card outside a reviewer's queue is answered 404, like one that does not exist)."""
from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request

from review_app import decision_store, queues
from review_app.labels_sync import LabelsWriter
from review_app.project import Card, Day, Project
from review_app.store import Account, Store, now

COOKIE = "gq_session"


@dataclass
class Settings:
    idle_seconds: float = 2 * 3600.0
    lifetime_seconds: float = 12 * 3600.0
    secure_cookies: bool = False       # behind HTTPS (docs: a reverse proxy)
    lease_seconds: float = decision_store.LEASE_SECONDS
    cost_per_hour: float | None = None


@dataclass
class Context:
    store: Store
    project: Project
    writer: LabelsWriter
    settings: Settings


@dataclass(frozen=True)
class Session:
    account: Account
    csrf: str
    token: str


def refuse(status: int, message: str, **extra):
    raise HTTPException(status, {"error": message, **extra})


def session_of(request: Request) -> Session:
    """The request's session, whatever its password state; 401 without a live one."""
    ctx: Context = request.app.state.ctx
    token = request.cookies.get(COOKIE)
    found = ctx.store.session(token, now(), ctx.settings.idle_seconds, ctx.settings.lifetime_seconds) if token else None
    if found is None:
        refuse(401, "sign in first (no session, or it ended)")
    assert found is not None and token is not None
    return Session(found[0], found[1], token)


def signed_in(request: Request) -> Session:
    """The session of a request; one whose password is still the one-time one may only change it."""
    s = session_of(request)
    if s.account.must_change:
        refuse(403, "set your own password first (the one-time password signs in once)")
    return s


def check_csrf(request: Request, s: Session) -> None:
    given = request.headers.get("x-csrf-token", "")
    if not given or not hmac.compare_digest(given.encode(), s.csrf.encode()):
        refuse(403, "missing or wrong CSRF token: reload the page (a change needs the X-CSRF-Token header)")


def role(*roles: str):
    def check(s: Session = Depends(signed_in)) -> Session:
        if s.account.role not in roles:
            refuse(403, f"this needs the role {' or '.join(roles)}; you are a {s.account.role}")
        return s
    return check


def changing_as(*roles: str):
    """A request that changes something: one of `roles`, and the session's CSRF token."""
    def check(request: Request, s: Session = Depends(role(*roles))) -> Session:
        check_csrf(request, s)
        return s
    return check


def day_of(ctx: Context, day_id: str) -> Day:
    day = ctx.project.day(day_id)
    if day is None:
        refuse(404, f"no day {day_id!r} in this project (a day folder holds <mission>_verdicts.jsonl; it may have "
                    f"been moved or removed)")
    assert day is not None
    return day


def card_of(ctx: Context, s: Session, day_id: str, card_id: str, decide: bool = False) -> tuple[Day, Card]:
    """The day and card if this account may see (or decide) it, else 404: a card outside one's queue is answered
    like one that does not exist."""
    day = day_of(ctx, day_id)
    card = day.cards.get(card_id)
    moves = decision_store.moves_of(ctx.store, day.id)
    allowed = queues.may_decide if decide else queues.may_see
    if card is None or not allowed(day, card, s.account.name, s.account.role, moves):
        refuse(404, f"no card {card_id!r} in your queue for day {day_id!r}")
    assert card is not None
    return day, card


def decided_maps(ctx: Context, day: Day) -> tuple[list[dict], dict[str, set[str]], dict[str, str]]:
    """(every account's decision on the day's cards, {card: the reviewers who decided it}, {card: who holds its
    lease})."""
    rows = decision_store.decisions_of_day(ctx.store, day.id)
    names = {a.id: a.name for a in ctx.store.accounts()}
    decided_by: dict[str, set[str]] = {}
    for r in rows:
        if r["role"] == "reviewer":
            decided_by.setdefault(r["card"], set()).add(r["name"])
    leased = {card: names.get(account, "?") for card, account in decision_store.leases_of(ctx.store, day.id).items()}
    return rows, decided_by, leased
