"""Signing in and out, the session's account, and a new password (the one-time password's only use)."""
from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from review_app import accounts
from review_app.access import COOKIE, Context, check_csrf, refuse, session_of


class LoginIn(BaseModel):
    name: str = Field(max_length=400)
    password: str = Field(max_length=accounts.MAX_PASSWORD)


class PasswordIn(BaseModel):
    old: str = Field(max_length=accounts.MAX_PASSWORD)
    new: str = Field(max_length=accounts.MAX_PASSWORD)


def auth_routes(app: FastAPI, ctx: Context) -> None:
    @app.post("/api/login")
    def login(body: LoginIn, request: Request):
        client = request.client.host if request.client else "unknown"
        try:
            done = accounts.sign_in(ctx.store, body.name, body.password, client, request.cookies.get(COOKIE))
        except accounts.SignInRefused as exc:
            refuse(exc.status, exc.message, **({"retry_after": exc.retry_after} if exc.retry_after else {}))
        response = JSONResponse({"csrf_token": done.csrf, "name": done.account.name, "role": done.account.role,
                                 "must_change_password": done.account.must_change})
        response.set_cookie(COOKIE, done.token, httponly=True, samesite="strict", secure=ctx.settings.secure_cookies,
                            max_age=int(ctx.settings.lifetime_seconds), path="/")
        return response

    @app.post("/api/logout", status_code=204)
    def logout(request: Request):
        s = session_of(request)
        check_csrf(request, s)
        ctx.store.end_session(s.token)
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/api/me")
    def me(request: Request):
        s = session_of(request)
        return {"name": s.account.name, "role": s.account.role, "csrf_token": s.csrf,
                "must_change_password": s.account.must_change}

    @app.post("/api/password")
    def password(body: PasswordIn, request: Request):
        s = session_of(request)
        check_csrf(request, s)
        try:
            accounts.change_password(ctx.store, s.account, s.token, body.old, body.new)
        except accounts.AccountError as exc:
            refuse(400, str(exc))
        return {"changed": True}
