"""The web app's pages: server-rendered Jinja2 templates under web/templates, pinned static files under
web/static. Pages read through the store with the signed-in user's scope; every change a page makes goes
through the JSON APIs (/api/v1 and /api/account) with the session cookie and its X-CSRF-Token."""

from __future__ import annotations

import math
import uuid
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from lev.auth import accounts
from lev.auth.policy import Principal
from lev.core import context
from lev.core.errors import ApiError
from lev.core.packagedata import packaged
from lev.feeds import service as feed_service
from lev.handlers import deps, page_search
from lev.handlers.page_words import FILTERS, STATUS_WORDS
from lev.highlights import service as highlights
from lev.imports import service as imports
from lev.library import reads as library
from lev.library.filters import parse_tags
from lev.limits.tiers import Tiers
from lev.sharing import service as sharing
from lev.store import activity as activity_store
from lev.store import folders as folder_store
from lev.store import items as item_store
from lev.store import lifecycle
from lev.store import users as user_store
from lev.tags import service as tag_service
from lev.tags import suggest
from lev.webhooks import events as webhook_events
from lev.webhooks import service as webhook_service

WEB = packaged("web")
STATIC = WEB / "static"
PER_PAGE = 25
ACTIVITY_PER_PAGE = 50
SIMILAR_SHOWN = 5
_env = Environment(loader=FileSystemLoader(WEB / "templates"), autoescape=select_autoescape(["html"]))
_env.filters.update(FILTERS)
_env.globals["status_words"] = STATUS_WORDS
_env.globals["life"] = lambda item: lifecycle.of_row(item["status"], item["transcription_status"])
_STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".txt": "text/plain",
                 ".png": "image/png", ".ico": "image/x-icon"}


def _render(name: str, request: Request, principal: Principal | None = None, status: int = 200,
            **ctx: Any) -> HTMLResponse:
    html = _env.get_template(name).render(
        request=request, me=principal, csrf=principal.extra.get("csrf_token") if principal else "",
        email=principal.extra.get("email") if principal else "", base_url=context.base_url(), path=request.url.path,
        **ctx,
    )
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


async def _principal(request: Request) -> Principal | None:
    try:
        async with deps().db.read_session() as s:
            return await accounts.authenticate_session(s, request.cookies.get(accounts.COOKIE_NAME))
    except ApiError:
        return None


def _to_login(request: Request) -> Response:
    return RedirectResponse(f"/login?next={quote(request.url.path, safe='/')}", status_code=303)


def _uuid(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def _int(value: str | None, default: int, low: int = 1, high: int = 100000) -> int:
    try:
        return min(high, max(low, int(value or default)))
    except ValueError:
        return default


def _bool(value: str | None) -> bool | None:
    return {"true": True, "false": False}.get((value or "").lower())


def _not_found(request: Request, p: Principal) -> HTMLResponse:
    return _render("not_found.html", request, p, status=404)


async def not_found_page(request: Request) -> HTMLResponse:
    """What a browser gets at an address Lev has no page for (instead of the API's JSON 404)."""
    return _render("not_found.html", request, await _principal(request), status=404)


async def home(request: Request) -> Response:
    """The library; signed out, the sign-in form, or on a server with no account yet the first account's form."""
    p = await _principal(request)
    if p is not None:
        return await _library(request, p, None)
    async with deps().db.read_session() as s:
        first = not await user_store.any_yet(s)
    if first and _signup_open():
        return _render("login.html", request, mode="signup", next="/", signup_open=True, first=True)
    return _render("login.html", request, mode="login", next="/")


def _signup_open() -> bool:
    return deps().settings.signup.strip().lower() == "open"


async def login_page(request: Request) -> Response:
    p = await _principal(request)
    if p is not None:
        return RedirectResponse("/", status_code=303)
    return _render("login.html", request, mode="login", next=accounts.safe_next(request.query_params.get("next")))


async def signup_page(request: Request) -> Response:
    if await _principal(request) is not None:
        return RedirectResponse("/", status_code=303)
    return _render("login.html", request, mode="signup", next=accounts.safe_next(request.query_params.get("next")),
                   signup_open=_signup_open())


async def invite_page(request: Request) -> Response:
    """An invitation's secret link: who invites whom to which folder, with Accept and Decline; signed out, the way
    to sign in or create an account and come back."""
    p = await _principal(request)
    code = str(request.path_params.get("code", ""))
    if p is None:
        return _render("invite.html", request, code=code, invitation=None, next=request.url.path,
                       signup_open=_signup_open())
    try:
        invitation = await sharing.by_link(deps(), p, code)
    except ApiError as err:
        return _render("invite.html", request, p, status=err.status, code=code, invitation=None, dead=err.message)
    return _render("invite.html", request, p, code=code, invitation=invitation)


async def verify_email_page(request: Request) -> Response:
    """A verification mail's link: one button confirms the address (a mail client's preview fetches nothing)."""
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    return _render("verify_email.html", request, p, code=str(request.path_params.get("code", "")))


async def _items_view(request: Request, p: Principal, folder_id: uuid.UUID | None) -> dict[str, Any]:
    q = request.query_params
    page = _int(q.get("page"), 1)
    filters = {"in_kb": _bool(q.get("in_kb")), "archived": _bool(q.get("archived")),
               "unfiled": None if folder_id else _bool(q.get("unfiled")), "read": _bool(q.get("read"))}
    tag = (q.get("tag") or "").strip()[:64] or None
    try:
        tag_keys = parse_tags(tag) if tag else ()
    except ApiError:
        tag, tag_keys = None, ()
    async with deps().db.transaction() as s:
        folders = await folder_store.list_visible(s, p.scope)
        found, total = await item_store.list_items(s, p.scope, folder_id=folder_id, page=page, per_page=PER_PAGE,
                                                   in_kb=filters["in_kb"], archived=filters["archived"],
                                                   unfiled=filters["unfiled"], read=filters["read"],
                                                   tag_keys=tag_keys)
    names = {f["id"]: f["name"] for f in folders}
    query = "&".join(f"{k}={str(v).lower()}" for k, v in filters.items() if v is not None)
    return {"folders": folders, "items": found, "total": total, "page": page,
            "pages": max(1, math.ceil(total / PER_PAGE)), "filters": filters, "names": names, "tag": tag,
            "tags": tag_service.tree((await tag_service.list_tags(deps(), p))["tags"]),
            "live": any(lifecycle.of_row(i["status"], i["transcription_status"]).moving for i in found),
            "query_string": "&".join(x for x in (query, f"tag={quote(tag, safe='')}" if tag else "") if x)}


async def _library(request: Request, p: Principal, folder: dict[str, Any] | None) -> Response:
    folder_id = uuid.UUID(folder["id"]) if folder else None
    view = await _items_view(request, p, folder_id)
    search, q, mode = await page_search.search_box(request, p, folder_id, view["folders"])
    feeds = await feed_service.list_feeds(deps(), p, folder_id) if folder_id else []
    share = await sharing.page_view(deps(), p, folder_id) if folder_id else None
    invitations = [] if folder_id else (await sharing.invitations(deps(), p, note=False))["invitations"]
    return _render("library.html", request, p, folder=folder, search=search, q=q, mode=mode, feeds=feeds,
                   poll_minutes=deps().settings.feed_poll_minutes, share=share, invitations=invitations,
                   mail=deps().mailer is not None, **view)


async def search_partial(request: Request) -> Response:
    """The search box's hits alone, as the box asks for them while one types (app.js)."""
    p = await _principal(request)
    if p is None:
        return Response(status_code=401)
    folder_id = _uuid(request.query_params.get("folder_id"))
    async with deps().db.read_session() as s:
        folders = await folder_store.list_visible(s, p.scope)
    if folder_id is not None and not any(f["id"] == str(folder_id) for f in folders):
        return Response(status_code=404)
    search, q, mode = await page_search.search_box(request, p, folder_id, folders)
    return _render("_search_results.html", request, p, search=search, q=q, mode=mode)


async def items_partial(request: Request) -> Response:
    """The item table alone, for the live refresh while items are processing."""
    p = await _principal(request)
    if p is None:
        return Response(status_code=401)
    folder_id = _uuid(request.query_params.get("folder_id"))
    view = await _items_view(request, p, folder_id)
    return _render("_items.html", request, p, folder={"id": str(folder_id)} if folder_id else None, **view)


async def folder_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    folder_id = _uuid(request.path_params.get("id"))
    async with deps().db.transaction() as s:
        folders = await folder_store.list_visible(s, p.scope)
    folder = next((f for f in folders if folder_id and f["id"] == str(folder_id)), None)
    if folder is None:
        return _not_found(request, p)
    return await _library(request, p, folder)


async def _item(p: Principal, item_id: uuid.UUID | None) -> dict[str, Any] | None:
    if item_id is None:
        return None
    async with deps().db.transaction() as s:
        return await item_store.get_visible(s, p.scope, item_id)


async def item_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    item = await _item(p, _uuid(request.path_params.get("id")))
    if item is None:
        return _not_found(request, p)
    async with deps().db.transaction() as s:
        folders = await folder_store.list_visible(s, p.scope)
    ready = lifecycle.of_row(item["status"], item["transcription_status"]).phase is lifecycle.Phase.READY
    similar = (await library.similar_items(deps(), p, uuid.UUID(item["id"]), SIMILAR_SHOWN))["results"] \
        if ready else []
    media = item["kind"] in lifecycle.RECORDINGS and bool(item["metadata"].get("mime"))
    original = await library.stored_file_name(deps(), p, uuid.UUID(item["id"]))
    q = request.query_params
    marks, reading = await highlights.reading(deps(), p, item, _int(q.get("part"), 1), q.get("highlight"))
    left_at = min(reading.parts, int(item["progress"] * reading.parts) + 1)  # where the reader left off
    if "part" not in q and "highlight" not in q and left_at > 1:
        marks, reading = await highlights.reading(deps(), p, item, left_at, None)
    saver = await sharing.saver(deps(), p, uuid.UUID(item["id"]))
    offered = [] if saver else await suggest.for_item(deps(), p, item)
    return _render("item.html", request, p, item=item, folders=folders, similar=similar, media=media,
                   original=original, names={f["id"]: f["name"] for f in folders}, marks=marks, reading=reading,
                   saver=saver, suggested=offered)


async def highlights_page(request: Request) -> Response:
    """The user's highlights, newest first, with their items; filterable by folder."""
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    folder_id = _uuid(request.query_params.get("folder_id"))
    page = _int(request.query_params.get("page"), 1)
    async with deps().db.read_session() as s:
        folders = await folder_store.list_visible(s, p.scope)
    if folder_id is not None and not any(f["id"] == str(folder_id) for f in folders):
        return _not_found(request, p)
    found = await highlights.recent(deps(), p, folder_id=folder_id, page=page, per_page=PER_PAGE)
    return _render("highlights.html", request, p, found=found["highlights"], total=found["total"], page=page,
                   pages=max(1, math.ceil(found["total"] / PER_PAGE)), folders=folders,
                   folder_id=str(folder_id) if folder_id else "")


async def item_status(request: Request) -> Response:
    """The status badges of one item (polled while it is processing); asks for a full reload once it is done."""
    p = await _principal(request)
    if p is None:
        return Response(status_code=401)
    item = await _item(p, _uuid(request.path_params.get("id")))
    if item is None:
        return Response(status_code=404)
    response = _render("_status.html", request, p, item=item, poll=True)
    if request.query_params.get("was") and request.query_params.get("was") != _state(item):
        response.headers["HX-Refresh"] = "true"
    return response


def _state(item: dict[str, Any]) -> str:
    return lifecycle.phase(item["status"], item["transcription_status"])


async def import_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    found = await imports.recent(deps(), p, 10)
    return _render("import.html", request, p, imports=found, live=any(i["status"] == "running" for i in found),
                   max_mb=deps().settings.import_max_bytes // (1 << 20))


async def imports_partial(request: Request) -> Response:
    """The import list alone, polled while an import runs."""
    p = await _principal(request)
    if p is None:
        return Response(status_code=401)
    found = await imports.recent(deps(), p, 10)
    return _render("_imports.html", request, p, imports=found, live=any(i["status"] == "running" for i in found))


async def integrations_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    async with deps().db.transaction() as s:
        folders = await folder_store.list_visible(s, p.scope)
        tokens = await accounts.list_tokens(s, p.user_id)
    hooks = await webhook_service.list_all(deps(), p)
    deliveries = {h["id"]: await webhook_service.deliveries(deps(), p, uuid.UUID(h["id"])) for h in hooks}
    preset = _uuid(request.query_params.get("folder"))
    return _render("integrations.html", request, p, folders=folders, tokens=tokens, webhooks=hooks,
                   deliveries=deliveries, event_types=webhook_events.EVENT_TYPES,
                   names={f["id"]: f["name"] for f in folders},
                   preset=str(preset) if preset and any(f["id"] == str(preset) for f in folders) else None,
                   caps=Tiers.from_settings(deps().settings).tokens)


async def activity_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    q = request.query_params
    token_id = _uuid(q.get("token_id"))
    surface = q.get("surface") if q.get("surface") in ("rest", "mcp", "web") else None
    page = _int(q.get("page"), 1)
    async with deps().db.transaction() as s:
        entries, total = await activity_store.list_for_user(s, p.user_id, token_id=token_id, surface=surface,
                                                            page=page, per_page=ACTIVITY_PER_PAGE)
        tokens = await accounts.list_tokens(s, p.user_id)
    filters = "&".join(f"{k}={v}" for k, v in (("token_id", token_id), ("surface", surface)) if v)
    return _render("activity.html", request, p, entries=entries, total=total, page=page, tokens=tokens,
                   token_names={t["id"]: t["name"] for t in tokens}, token_id=str(token_id) if token_id else "",
                   surface=surface or "", pages=max(1, math.ceil(total / ACTIVITY_PER_PAGE)), filters=filters)


async def account_page(request: Request) -> Response:
    p = await _principal(request)
    if p is None:
        return _to_login(request)
    async with deps().db.transaction() as s:
        account = await accounts.account_view(s, deps().settings, p)
        tokens = await accounts.list_tokens(s, p.user_id)
    active = [t for t in tokens if t["revoked_at"] is None]
    return _render("account.html", request, p, account=account, tokens=tokens, active=active,
                   mail=deps().mailer is not None)


async def static_file(request: Request) -> Response:
    name = str(request.path_params.get("name", ""))
    path = STATIC / name
    if "/" in name or name.startswith(".") or not path.is_file():
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(path, media_type=_STATIC_TYPES.get(path.suffix, "application/octet-stream"),
                        headers={"Cache-Control": "public, max-age=3600"})


def add_routes(app: Any) -> None:
    """Register the pages and the static files on the Connexion app."""
    for path, name, fn in _PAGES:
        app.add_url_rule(path, f"page_{name}", fn, methods=["GET"])


_PAGES = (
    ("/", "home", home), ("/login", "login", login_page), ("/signup", "signup", signup_page),
    ("/folders/{id}", "folder", folder_page), ("/items/{id}", "item", item_page),
    ("/items/{id}/status", "item_status", item_status), ("/partials/items", "items_partial", items_partial),
    ("/partials/search", "search_partial", search_partial),
    ("/settings/integrations", "integrations", integrations_page), ("/activity", "activity", activity_page),
    ("/settings/account", "account", account_page), ("/static/{name}", "static", static_file),
    ("/import", "import", import_page), ("/partials/imports", "imports_partial", imports_partial),
    ("/highlights", "highlights", highlights_page), ("/invite/{code}", "invite", invite_page),
    ("/verify-email/{code}", "verify_email", verify_email_page),
)
PATHS = tuple(path for path, _, _ in _PAGES)  # the pages' routes, for the request log and the metrics' labels
