"""The review app: a FastAPI application over one project folder and one database (review_app.store).

The JSON API (docs/judging_and_review.md, "The served review app"; its OpenAPI schema at /api/openapi.json) is what
the pages use and what a script may use: signing in (routes_auth), a reviewer's work (routes_review), the lead's and
the owner's (routes_team). Every request is checked against the signed-in account (review_app.access): a reviewer
reads and decides their own queue only (another queue's card, a day of no project, a photo outside the day's folders:
404, the same answer as for a card that does not exist); a lead reads every queue, reassigns one and settles
conflicts; the owner reads the promises and accepts a weaker one. Every request that changes anything needs the
session's CSRF token in X-CSRF-Token. Every answer passes the HTTP wrappers of review_app.web (security headers, a body
limit). A database failure is a 503 saying so: nothing is acknowledged that was not stored.
"""
from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response

from review_app.access import COOKIE, Context, Settings
from review_app.labels_sync import LabelsWriter
from review_app.pages import PAGES, page_response, static_response
from review_app.project import Project
from review_app.routes_auth import auth_routes
from review_app.routes_review import review_routes
from review_app.routes_team import lead_routes, owner_routes
from review_app.store import Store, StoreError, now
from review_app.web import BodyLimit, SecurityHeaders


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

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": f"the request is not valid: {problems}"[:1000]}, 422)

    auth_routes(app, ctx)
    review_routes(app, ctx)
    lead_routes(app, ctx)
    owner_routes(app, ctx)
    _page_routes(app, ctx)
    return app


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


__all__ = ["create_app", "Settings", "COOKIE"]
