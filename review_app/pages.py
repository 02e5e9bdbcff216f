"""The app's pages: static HTML shells and their scripts (static/), filled by the JSON API in the browser. No page
holds data rendered on the server and no inline script, so the Content-Security-Policy can forbid both; every text a
person typed (a name, a note, a reason) reaches the page through textContent, never as HTML."""
from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import FileResponse, HTMLResponse

STATIC = Path(__file__).parent / "static"
PAGES = {"login": "Sign in", "review": "Review", "lead": "Reviewer lead", "owner": "QC owner", "password": "Password"}
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SHELL = """<!doctype html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · group-qc</title>
<link rel="stylesheet" href="/static/app.css">
</head>
<body data-page="{name}">
<header id="top"><b>group-qc</b> <span id="nav"></span> <span id="who"></span></header>
<div id="notice" hidden></div>
<main id="main"></main>
<script src="/static/common.js"></script>
<script src="/static/{name}.js"></script>
</body>
</html>
"""


def page_response(name: str):
    text = SHELL.format(title=PAGES[name], name=name)

    def page():
        return HTMLResponse(text, headers={"Cache-Control": "no-store"})
    page.__name__ = f"page_{name}"
    return page


def static_response(name: str):
    path = STATIC / name
    if "/" in name or name.startswith(".") or path.suffix not in TYPES or not path.is_file():
        raise HTTPException(404, {"error": f"no static file {name!r}"})
    return FileResponse(path, media_type=TYPES[path.suffix], headers={"Cache-Control": "no-cache"})
