"""The public face of a published folder: its page `/p/{slug}` and its Atom feed `/p/{slug}/feed.atom`. No account
needed; both send `X-Robots-Tag: noindex`, count against each visitor address's own rate limit for the folder,
and answer 404 as soon as the page is turned off (its entries are cached a few seconds, never the publication)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from lev import runtime
from lev.core import clock, context
from lev.core.errors import ApiError, rest_body, rest_headers
from lev.handlers import deps, pages
from lev.sharing import public

NOINDEX = {"X-Robots-Tag": "noindex, nofollow", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


async def _published(request: Request) -> public.Published | Response:
    pub = await public.published(deps(), str(request.path_params.get("slug", "")))
    if pub is None:
        page = pages._render("not_found.html", request, status=404)
        page.headers.update(NOINDEX)
        return page
    try:
        info = context.current()
        await runtime.get_runtime().limiter.check_public_page(pub.slug, info.ip if info else None)
    except ApiError as err:
        info = context.current()
        return JSONResponse(rest_body(err, info.request_id if info else None), status_code=err.status,
                            headers={**rest_headers(err), **NOINDEX})
    return pub


async def page(request: Request) -> Response:
    pub = await _published(request)
    if isinstance(pub, Response):
        return pub
    html: HTMLResponse = pages._render("public.html", request, pub=pub)
    html.headers.update(NOINDEX)
    return html


async def feed(request: Request) -> Response:
    pub = await _published(request)
    if isinstance(pub, Response):
        return pub
    return Response(public.atom(pub, clock.now()), media_type="application/atom+xml; charset=utf-8", headers=NOINDEX)


def add_routes(app: Any) -> None:
    app.add_url_rule("/p/{slug}", "public_page", page, methods=["GET"])
    app.add_url_rule("/p/{slug}/feed.atom", "public_feed", feed, methods=["GET"])
