"""The review app: a FastAPI application over one project folder and one database (review_app.store).

The JSON API (docs/judging_and_review.md, "The served review app"; its OpenAPI schema at /api/openapi.json) is what
the pages use and what a script may use. Every request is checked against the signed-in account: a reviewer reads
and decides their own queue only (another queue's card, a day of no project, a photo outside the day's folders: 404,
the same answer as for a card that does not exist); a lead reads every queue, reassigns one and settles conflicts; the
owner reads the promises and accepts a weaker one. Every request that changes anything needs the session's CSRF token
in X-CSRF-Token. Security headers (a strict Content-Security-Policy with no inline script) are on every answer, and a
request body over MAX_BODY bytes is refused before it is read whole.
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from review_app import accounts, decision_store, queues, views
from review_app.cards import answer, card_view
from review_app.labels_sync import LabelsWriter
from review_app.pages import PAGES, page_response, static_response
from review_app.project import Card, Day, Project
from review_app.store import Account, Store, StoreError, now, now_iso

COOKIE = "gq_session"
MAX_BODY = 64 * 1024
MAX_NOTE = 2000
IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp",
               ".bmp": "image/bmp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


@dataclass
class Settings:
    idle_seconds: float = 2 * 3600.0
    lifetime_seconds: float = 12 * 3600.0
    secure_cookies: bool = False       # behind HTTPS (docs: a reverse proxy)
    lease_seconds: float = decision_store.LEASE_SECONDS
    cost_per_hour: float | None = None
    accepted_points: list = field(default_factory=list)


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


class LoginIn(BaseModel):
    name: str = Field(max_length=400)
    password: str = Field(max_length=accounts.MAX_PASSWORD)


class PasswordIn(BaseModel):
    old: str = Field(max_length=accounts.MAX_PASSWORD)
    new: str = Field(max_length=accounts.MAX_PASSWORD)


ID = Field(min_length=8, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")


class DecisionIn(BaseModel):
    id: str = ID
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)
    decision: Literal["通过", "不通过", "unsure"]
    note: str = Field(default="", max_length=MAX_NOTE)
    base: int = Field(ge=0, le=10**9)
    on_screen_ms: int | None = Field(default=None, ge=0, le=10**10)


class LeaseIn(BaseModel):
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)


class AdjudicationIn(BaseModel):
    id: str = ID
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)
    decision: Literal["通过", "不通过"]
    reason: str = Field(min_length=8, max_length=MAX_NOTE)
    base: int = Field(ge=0, le=10**9)


class ReassignIn(BaseModel):
    day: str = Field(max_length=1000)
    from_reviewer: str = Field(alias="from", max_length=400)
    to: str = Field(max_length=400)


class AcceptIn(BaseModel):
    point: str = Field(max_length=1000)
    words: str = Field(min_length=8, max_length=MAX_NOTE)


def _refuse(status: int, message: str, **extra):
    raise HTTPException(status, {"error": message, **extra})


def create_app(store: Store, project: Project, settings: Settings | None = None, writer: LabelsWriter | None = None,
               start_writer: bool = True) -> FastAPI:
    ctx = Context(store, project, writer or LabelsWriter(store, project), settings or Settings())

    async def lifespan(app):
        if start_writer:
            ctx.writer.start()
        yield
        if start_writer:
            ctx.writer.stop()
    app = FastAPI(title="group-qc review app", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json",
                  lifespan=lifespan)
    app.state.ctx = ctx
    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        detail = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
        headers = {"Retry-After": str(detail.pop("retry_after"))} if "retry_after" in detail else None
        return JSONResponse(detail, exc.status_code, headers=headers)

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError):   # nothing acknowledged that was not stored
        return JSONResponse({"error": str(exc)}, 503)

    from fastapi.exceptions import RequestValidationError

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": f"the request is not valid: {problems}"[:1000]}, 422)

    _auth_routes(app, ctx)
    _review_routes(app, ctx)
    _lead_routes(app, ctx)
    _owner_routes(app, ctx)
    _page_routes(app, ctx)
    return app


# -- who is asking ----------------------------------------------------------------------------------------------------
def _session(request: Request) -> Session:
    ctx: Context = request.app.state.ctx
    token = request.cookies.get(COOKIE)
    found = ctx.store.session(token, now(), ctx.settings.idle_seconds, ctx.settings.lifetime_seconds) if token else None
    if found is None:
        _refuse(401, "sign in first (no session, or it ended)")
    assert found is not None and token is not None
    return Session(found[0], found[1], token)


def signed_in(request: Request) -> Session:
    """The session of a request; one whose password is still the one-time one may only change it."""
    s = _session(request)
    if s.account.must_change:
        _refuse(403, "set your own password first (the one-time password signs in once)")
    return s


def _check_csrf(request: Request, s: Session) -> None:
    given = request.headers.get("x-csrf-token", "")
    if not given or not hmac.compare_digest(given.encode(), s.csrf.encode()):
        _refuse(403, "missing or wrong CSRF token: reload the page (a change needs the X-CSRF-Token header)")


def changing(request: Request, s: Session = Depends(signed_in)) -> Session:
    _check_csrf(request, s)
    return s


def role(*roles: str):
    def check(s: Session = Depends(signed_in)) -> Session:
        if s.account.role not in roles:
            _refuse(403, f"this needs the role {' or '.join(roles)}; you are a {s.account.role}")
        return s
    return check


def changing_as(*roles: str):
    def check(request: Request, s: Session = Depends(role(*roles))) -> Session:
        _check_csrf(request, s)
        return s
    return check


def _day(ctx: Context, day_id: str) -> Day:
    day = ctx.project.day(day_id)
    if day is None:
        _refuse(404, f"no day {day_id!r} in this project (a day folder holds <mission>_verdicts.jsonl; it may have "
                     f"been moved or removed)")
    assert day is not None
    return day


def _card(ctx: Context, s: Session, day_id: str, card_id: str, decide: bool = False) -> tuple[Day, Card, dict]:
    """The day and card if this account may see (or decide) it, else 404: a card outside one's queue is answered
    like one that does not exist."""
    day = _day(ctx, day_id)
    card = day.cards.get(card_id)
    moves = decision_store.moves_of(ctx.store, day.id)
    allowed = queues.may_decide if decide else queues.may_see
    if card is None or not allowed(day, card, s.account.name, s.account.role, moves):
        _refuse(404, f"no card {card_id!r} in your queue for day {day_id!r}")
    assert card is not None
    return day, card, moves


# -- routes -----------------------------------------------------------------------------------------------------------
def _auth_routes(app: FastAPI, ctx: Context) -> None:
    @app.post("/api/login")
    def login(body: LoginIn, request: Request):
        client = request.client.host if request.client else "unknown"
        try:
            done = accounts.sign_in(ctx.store, body.name, body.password, client, request.cookies.get(COOKIE))
        except accounts.SignInRefused as exc:
            _refuse(exc.status, exc.message, **({"retry_after": exc.retry_after} if exc.retry_after else {}))
        response = JSONResponse({"csrf_token": done.csrf, "name": done.account.name, "role": done.account.role,
                                 "must_change_password": done.account.must_change})
        response.set_cookie(COOKIE, done.token, httponly=True, samesite="strict", secure=ctx.settings.secure_cookies,
                            max_age=int(ctx.settings.lifetime_seconds), path="/")
        return response

    @app.post("/api/logout", status_code=204)
    def logout(request: Request):
        s = _session(request)
        _check_csrf(request, s)
        ctx.store.end_session(s.token)
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/api/me")
    def me(request: Request):
        s = _session(request)
        return {"name": s.account.name, "role": s.account.role, "csrf_token": s.csrf,
                "must_change_password": s.account.must_change}

    @app.post("/api/password")
    def password(body: PasswordIn, request: Request):
        s = _session(request)
        _check_csrf(request, s)
        try:
            accounts.change_password(ctx.store, s.account, s.token, body.old, body.new)
        except accounts.AccountError as exc:
            _refuse(400, str(exc))
        return {"changed": True}


def _decided_maps(ctx: Context, day: Day) -> tuple[list[dict], dict[str, set[str]], dict[str, str]]:
    rows = decision_store.decisions_of_day(ctx.store, day.id)
    names = {a.id: a.name for a in ctx.store.accounts()}
    decided_by: dict[str, set[str]] = {}
    for r in rows:
        if r["role"] == "reviewer":
            decided_by.setdefault(r["card"], set()).add(r["name"])
    leased = {card: names.get(account, "?") for card, account in decision_store.leases_of(ctx.store, day.id).items()}
    return rows, decided_by, leased


def _review_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/days")
    def days(s: Session = Depends(signed_in)):
        out = []
        for day_id in ctx.project.day_folders():
            day = ctx.project.day(day_id)
            if day is None:
                continue
            moves = decision_store.moves_of(ctx.store, day.id)
            rows, decided_by, leased = _decided_maps(ctx, day)
            if s.account.role == "reviewer":
                mine = queues.queue(day, s.account.name, "reviewer", moves, decided_by, leased)
                if not mine and not day.open_queue:
                    continue
                done = {r["card"] for r in rows if r["account"] == s.account.id}
                out.append({"day": day_id, "cards": len(mine), "decided": sum(c.id in done for c in mine),
                            "open_queue": day.open_queue})
            else:
                out.append({"day": day_id, "cards": len(day.cards), "decided": len({r["card"] for r in rows}),
                            "open_queue": day.open_queue, "reviewers": queues.reviewers_of(day, moves),
                            "problems": day.problems[:20]})
        return {"days": out}

    @app.get("/api/queue")
    def queue(day: str, reviewer: str | None = None, s: Session = Depends(signed_in)):
        d = _day(ctx, day)
        name, who_role = s.account.name, s.account.role
        if reviewer is not None and reviewer != name:
            if who_role not in ("lead", "owner"):
                _refuse(403, "only a lead or the owner sees another reviewer's queue")
            name, who_role = reviewer, "reviewer"
        elif who_role in ("lead", "owner"):
            who_role = "lead"   # every card of the day
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, decided_by, leased = _decided_maps(ctx, d)
        mine = {r["card"]: r for r in rows if r["name"] == name}
        cards = queues.queue(d, name, who_role, moves, decided_by, leased)
        return {"day": d.id, "reviewer": name, "open_queue": d.open_queue, "lease_seconds": ctx.settings.lease_seconds,
                "cards": [card_view(c, mine.get(c.id), queues.assignees(c, moves),
                                    sorted(decided_by.get(c.id, ())) if who_role != "reviewer" else None)
                          for c in cards]}

    @app.post("/api/lease")
    def lease(body: LeaseIn, s: Session = Depends(changing_as("reviewer"))):
        d, card, _ = _card(ctx, s, body.day, body.card, decide=True)
        if not d.open_queue:
            return {"lease": None}   # a queue of one's own needs none
        holder = decision_store.lease(ctx.store, card, s.account, ctx.settings.lease_seconds)
        if holder is not None:
            _refuse(409, f"{holder['name']} has this card open until {holder['until']}", leased_to=holder["name"])
        return {"lease": ctx.settings.lease_seconds}

    @app.post("/api/decisions")
    def decide(body: DecisionIn, s: Session = Depends(changing_as("reviewer", "lead"))):
        d, card, _ = _card(ctx, s, body.day, body.card, decide=True)
        outcome = decision_store.record(ctx.store, event_id=body.id, account=s.account, card=card,
                                        decision=body.decision, note=body.note.strip(), base=body.base,
                                        on_screen_ms=body.on_screen_ms,
                                        exclusive=d.open_queue and s.account.role == "reviewer")
        if outcome.status in (200, 201):
            ctx.writer.poke()
        return JSONResponse(outcome.body, outcome.status)

    @app.get("/api/answer")
    def model_answer(day: str, card: str, s: Session = Depends(signed_in)):
        d, c, _ = _card(ctx, s, day, card)
        rows, _, _ = _decided_maps(ctx, d)
        if not any(r["card"] == c.id and r["account"] == s.account.id for r in rows) and not \
                (s.account.role in ("lead", "owner") and not c.blind):
            _refuse(403, "the model's answer on a blind audit shows once your decision on it is saved")
        return answer(c)

    @app.get("/api/photo")
    def photo(day: str, card: str, n: int, s: Session = Depends(signed_in)):
        _, c, _ = _card(ctx, s, day, card)
        path = ctx.project.photo(c, n)
        if path is None or path.suffix.lower() not in IMAGE_TYPES:
            _refuse(404, f"no photo {n} of card {card!r} that this app may show (outside the day's photo folders, "
                         f"or missing)")
        assert path is not None
        return FileResponse(path, media_type=IMAGE_TYPES[path.suffix.lower()],
                            headers={"Cache-Control": "private, max-age=3600"})


def _lead_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/reviewers")
    def reviewers(s: Session = Depends(role("lead", "owner"))):
        view = views.reviewers_view(ctx.project)
        return {**view, "sync": {**decision_store.sync_state(ctx.store), **ctx.writer.state}}

    @app.get("/api/queues")
    def day_queues(day: str, s: Session = Depends(role("lead", "owner"))):
        d = _day(ctx, day)
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, decided_by, leased = _decided_maps(ctx, d)
        have = {a.name: a for a in ctx.store.accounts()}
        out = []
        for name in (queues.reviewers_of(d, moves) or sorted(n for n, a in have.items() if a.role == "reviewer")):
            cards = queues.queue(d, name, "reviewer", moves, decided_by, leased)
            done = {r["card"] for r in rows if r["name"] == name}
            out.append({"reviewer": name, "account": name in have and not have[name].disabled,
                        "cards": len(cards), "decided": sum(c.id in done for c in cards)})
        return {"day": d.id, "open_queue": d.open_queue, "queues": out}

    @app.post("/api/reassign")
    def reassign(body: ReassignIn, s: Session = Depends(changing_as("lead"))):
        d = _day(ctx, body.day)
        target = ctx.store.account_by_name(body.to)
        if target is None or target.role != "reviewer" or target.disabled:
            _refuse(400, f"{body.to!r} is not a reviewer account: group-qc users add NAME --role reviewer makes one")
        if body.to == body.from_reviewer:
            _refuse(400, "a queue is reassigned to another reviewer")
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, _, _ = _decided_maps(ctx, d)
        done = {r["card"] for r in rows if r["name"] == body.from_reviewer}
        moving, kept = [], 0
        for c in d.cards.values():
            names = queues.assignees(c, moves)
            if body.from_reviewer not in names or c.id in done:
                continue
            if body.to in names:   # an overlap is two people: it stays with its first reviewer
                kept += 1
                continue
            moving.append(c.id)
        decision_store.reassign(ctx.store, d.id, moving, body.from_reviewer, body.to, s.account)
        return {"moved": len(moving), "kept": kept,
                "why_kept": f"{kept} card(s) stay: {body.to} decides them already (an overlap needs two people)"
                if kept else None}

    @app.post("/api/adjudications")
    def adjudicate(body: AdjudicationIn, s: Session = Depends(changing_as("lead"))):
        d, card, _ = _card(ctx, s, body.day, body.card)
        rows, _, _ = _decided_maps(ctx, d)
        deciders = {r["name"]: r["decision"] for r in rows if r["card"] == card.id and r["role"] == "reviewer"}
        if s.account.name in deciders:
            _refuse(403, "you decided this card as a reviewer: a conflict is settled by a second person")
        definite = {x for x in deciders.values() if x in ("通过", "不通过")}
        if len(definite) < 2 and not views.is_conflict(ctx.project, card.mission, card.group_id):
            _refuse(409, "this card's reviewers do not disagree: there is no conflict to settle")
        outcome = decision_store.record(ctx.store, event_id=body.id, account=s.account, card=card,
                                        decision=body.decision, note="", base=body.base,
                                        kind=decision_store.ADJUDICATION, reason=body.reason.strip())
        if outcome.status in (200, 201):
            ctx.writer.poke()
        return JSONResponse(outcome.body, outcome.status)

    @app.get("/api/search")
    def search(group: str, s: Session = Depends(role("lead", "owner"))):
        if not group.strip() or len(group) > 200:
            _refuse(400, "give part of a group id (1 to 200 characters)")
        return {"cards": views.search(ctx.project, group.strip())}

    @app.get("/api/sync")
    def sync(s: Session = Depends(role("lead", "owner"))):
        return {**decision_store.sync_state(ctx.store), **ctx.writer.state}


def _owner_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/promises")
    def promises(s: Session = Depends(role("owner", "lead"))):
        return {"points": views.promises_view(ctx.project, decision_store.acceptances(ctx.store))}

    @app.get("/api/monitor")
    def monitor(s: Session = Depends(role("owner", "lead"))):
        return {"monitors": views.monitor_view(ctx.project)}

    @app.get("/api/monitor/plot")
    def monitor_plot(file: str, s: Session = Depends(role("owner", "lead"))):
        known = {m["plot"]: m for m in views.monitor_view(ctx.project) if m.get("plot")}
        if file not in known:
            _refuse(404, f"no monitor plot {file!r} in this project")
        return FileResponse(ctx.project.root / file, media_type="image/png")

    @app.get("/api/workload")
    def workload(day: str, s: Session = Depends(role("owner", "lead"))):
        view = views.workload_view(ctx.project, _day(ctx, day).id, ctx.settings.cost_per_hour)
        return view

    @app.post("/api/acceptances")
    def accept(body: AcceptIn, s: Session = Depends(changing_as("owner"))):
        from stage_b.rules import acceptances as recorded
        from stage_b.rules.replacement import ReplacementError
        point = next((p for p in views.promises_view(ctx.project, []) if p["point"] == body.point), None)
        if point is None or "error" in point:
            _refuse(404, f"no readable operating point {body.point!r} in this project")
        assert point is not None
        if not point["weaker"]:
            _refuse(409, f"{body.point} promises nothing weaker than the point it replaces: nothing to accept")
        at = now_iso()
        try:
            line = recorded.record(ctx.project.root / body.point, point["sha256"], body.words, s.account.name, at)
        except (ReplacementError, recorded.AcceptancesError) as exc:
            _refuse(400, str(exc))
        decision_store.accept(ctx.store, body.point, point["sha256"], line["words"], s.account)
        return {**line, "missions": sorted(point["weaker"])}


def _page_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/", include_in_schema=False)
    def home(request: Request):
        token = request.cookies.get(COOKIE)
        found = ctx.store.session(token, now(), ctx.settings.idle_seconds, ctx.settings.lifetime_seconds) \
            if token else None
        if found is None or found[0].must_change:
            return RedirectResponse("/login", 303)
        return RedirectResponse({"reviewer": "/review", "lead": "/lead", "owner": "/owner"}[found[0].role], 303)

    for name in PAGES:
        app.add_api_route(f"/{name}", page_response(name), methods=["GET"], include_in_schema=False)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        return static_response(name)


class BodyLimit:
    """Refuses a request body over MAX_BODY bytes (413) as it arrives, whatever its Content-Length says."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return await _too_large(send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > MAX_BODY:
                    raise _TooLarge()
            return message
        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _too_large(send)


class _TooLarge(Exception):
    pass


async def _too_large(send) -> None:
    body = JSONResponse({"error": f"the request is over {MAX_BODY // 1024} KiB (a note is at most {MAX_NOTE} "
                                  f"characters)"}, 413)
    await send({"type": "http.response.start", "status": 413, "headers": body.raw_headers})
    await send({"type": "http.response.body", "body": body.body})


class SecurityHeaders:
    """A strict CSP, no sniffing, no framing, no referrer, and no caching of API answers."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        api = scope["path"].startswith("/api/")

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"),
                            (b"cross-origin-opener-policy", b"same-origin")]
                if api and not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)
        await self.app(scope, receive, with_headers)


__all__ = ["create_app", "Settings", "COOKIE", "MAX_BODY", "Path"]
