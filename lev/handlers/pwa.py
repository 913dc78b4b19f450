"""Lev as an installable web app: the web app manifest (with a share target), the service worker, the favicon, the
browser extension to download (`/extension.zip`, shipped in the package), and `/share`, where a link or text shared
from a phone's share sheet lands: the Add form pre-filled for a signed-in user (sign-in first otherwise, then back).
`/share` itself stores nothing; the form saves through the JSON API with the session's CSRF token, like every
page."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response

from lev.core import weburl
from lev.core.packagedata import extension_zip
from lev.handlers import deps, pages
from lev.store import folders as folder_store

SHARE_PATH = "/share"
FIELDS = ("title", "text", "url")
MAX_FIELD = {"title": 500, "text": 100_000, "url": 4096}
MAX_CARRIED = 6000  # the shared text carried through the sign-in page (a URL has to hold it)
_LINK = re.compile(r"https?://[^\s<>\"']+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""

MANIFEST: dict[str, Any] = {
    "id": "/",
    "name": "Lev",
    "short_name": "Lev",
    "description": "Your library of pages, notes and recordings, searchable by you and your AI agents.",
    "start_url": "/",
    "scope": "/",
    "display": "standalone",
    "background_color": "#f5f6f8",
    "theme_color": "#1d2230",
    "icons": [
        {"src": "/static/icon-192.png", "sizes": "192x192", "type": "image/png"},
        {"src": "/static/icon-512.png", "sizes": "512x512", "type": "image/png"},
        {"src": "/static/icon-maskable-512.png", "sizes": "512x512", "type": "image/png", "purpose": "maskable"},
        {"src": "/static/icon.svg", "sizes": "any", "type": "image/svg+xml"},
    ],
    "share_target": {
        "action": SHARE_PATH,
        "method": "POST",
        "enctype": "multipart/form-data",
        "params": {"title": "title", "text": "text", "url": "url"},
    },
}


async def manifest(_request: Request) -> Response:
    return JSONResponse(MANIFEST, media_type="application/manifest+json",
                        headers={"Cache-Control": "public, max-age=3600"})


async def service_worker(_request: Request) -> Response:
    """The service worker, from the root so that its scope is the whole app; revalidated on every update check."""
    return FileResponse(pages.STATIC / "sw.js", media_type="text/javascript", headers={"Cache-Control": "no-cache"})


async def favicon(_request: Request) -> Response:
    return FileResponse(pages.STATIC / "favicon.ico", media_type="image/x-icon",
                        headers={"Cache-Control": "public, max-age=86400"})


def prefill(fields: dict[str, str]) -> dict[str, str]:
    """What the Add form shows for a share: the shared URL, else the first http(s) link found in the text (then left
    out of the note), the title, and the rest of the text as a note; `kind` is url when there is a link."""
    title = " ".join(fields.get("title", "").split())[:MAX_FIELD["title"]]
    text = fields.get("text", "").strip()[:MAX_FIELD["text"]]
    url = fields.get("url", "").strip()
    if not weburl.is_http_url(url):
        url = ""
        found = _LINK.search(text)
        if found:
            url = found.group(0).rstrip(_TRAILING)
            text = (text[:found.start()] + text[found.start() + len(url):]).strip()
    url = url[:MAX_FIELD["url"]]
    if url and text == title:
        text = ""  # share sheets often send the page title as the text too
    return {"kind": "url" if url else "text", "url": url, "title": title, "text": text}


async def _shared_fields(request: Request) -> dict[str, str]:
    if request.method == "POST":
        form = await request.form()
        return {k: v for k in FIELDS if isinstance(v := form.get(k), str)}
    return {k: v for k in FIELDS if (v := request.query_params.get(k)) is not None}


async def share(request: Request) -> Response:
    """GET or POST (the manifest's share target): the Add form, pre-filled."""
    fields = await _shared_fields(request)
    p = await pages._principal(request)
    if p is None:  # sign in first, then come back here with what was shared
        carried = {k: v[:MAX_CARRIED] for k, v in fields.items() if v}
        target = SHARE_PATH + (f"?{urlencode(carried)}" if carried else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    async with deps().db.read_session() as s:
        folders = await folder_store.list_visible(s, p.scope)
    return pages._render("share.html", request, p, shared=prefill(fields), folders=folders)


async def extension(_request: Request) -> Response:
    """The browser extension, zipped: unzip it and load the folder unpacked (the Integrations page says how)."""
    return Response(extension_zip(), media_type="application/zip",
                    headers={"Content-Disposition": 'attachment; filename="lev-extension.zip"',
                             "Cache-Control": "no-cache"})


def add_routes(app: Any) -> None:
    """Register the manifest, the service worker, the favicon, the extension and the share target on the app."""
    app.add_url_rule("/manifest.webmanifest", "pwa_manifest", manifest, methods=["GET"])
    app.add_url_rule("/sw.js", "pwa_sw", service_worker, methods=["GET"])
    app.add_url_rule("/favicon.ico", "pwa_favicon", favicon, methods=["GET"])
    app.add_url_rule("/extension.zip", "pwa_extension", extension, methods=["GET"])
    app.add_url_rule(SHARE_PATH, "pwa_share", share, methods=["GET", "POST"])
