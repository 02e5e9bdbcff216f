"""The HTTP wrappers every answer passes through: a request body over MAX_BODY is refused (413) as it arrives, and every
answer carries the security headers (a Content-Security-Policy with no inline script, no sniffing, no framing, no
referrer; API answers are never cached)."""
from __future__ import annotations

from fastapi.responses import JSONResponse

MAX_BODY = 64 * 1024
MAX_NOTE = 2000
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


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
