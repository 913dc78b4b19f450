"""The first step of every ingest: what was asked (`IngestRequest`), checked and resolved (`Resolved`): the filing
principal, the kind the URL says, its canonical form. Nothing is fetched or stored here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from lev.auth.policy import Principal, filing_target, require
from lev.core.errors import folder_not_found, ingest_failed, invalid_body, transcription_unavailable
from lev.ingest import youtube
from lev.ingest.deps import Deps
from lev.ingest.urls import canonical_url, classify_media_url
from lev.net.guard import check_host
from store import folders as folder_store

MAX_TEXT_CHARS = 1_000_000
MAX_URL_CHARS = 4096
TRANSCRIBED = ("audio", "video")


@dataclass(frozen=True)
class IngestRequest:
    """POST /api/v1/ingest and MCP add_to_knowledge, as the caller sent them."""

    kind: str
    url: str | None = None
    text: str | None = None
    title: str | None = None
    in_kb: bool = True
    auto_transform: bool = False
    folder_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Resolved:
    """A checked request: `kind` is what the item will be (text, url, youtube, pdf, audio, video); `canonical` the
    key a URL's content is shared by; `principal` files new items where they belong."""

    principal: Principal
    kind: str
    title: str | None
    in_kb: bool
    auto_transform: bool
    url: str | None = None
    canonical: str | None = None
    text: str | None = None


async def resolve(deps: Deps, principal: Principal, req: IngestRequest) -> Resolved:
    """400 for a malformed request, 403/404 for a folder the caller cannot file into, else the resolved request."""
    require(principal, "write")
    for name, value in (("url", req.url), ("text", req.text), ("title", req.title)):
        if value is not None and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise invalid_body(f"{name} must not contain NUL characters.")
    title = req.title.strip() or None if req.title else None
    if req.kind == "text":
        text = _text(req)
        filing = await _filing(deps, principal, req.folder_id)
        return Resolved(filing, "text", title, req.in_kb, req.auto_transform, text=text)
    if req.kind == "url":
        url = _url(req)
        filing = await _filing(deps, principal, req.folder_id)
        return await _resolve_url(deps, filing, url, title, req.in_kb, req.auto_transform)
    raise invalid_body("kind must be 'url' or 'text'.")


def _text(req: IngestRequest) -> str:
    if req.url is not None:
        raise invalid_body("kind 'text' takes `text`, not `url`.")
    if req.text is None or not req.text.strip():
        raise invalid_body("kind 'text' needs a non-empty `text`.")
    if len(req.text) > MAX_TEXT_CHARS:
        raise invalid_body(f"text is limited to {MAX_TEXT_CHARS} characters.")
    return req.text


def _url(req: IngestRequest) -> str:
    if req.text is not None:
        raise invalid_body("kind 'url' takes `url`, not `text`.")
    if not req.url or not req.url.strip():
        raise invalid_body("kind 'url' needs a `url`.")
    if len(req.url) > MAX_URL_CHARS:
        raise invalid_body(f"url is limited to {MAX_URL_CHARS} characters.")
    return req.url.strip()


async def _filing(deps: Deps, principal: Principal, folder_id: uuid.UUID | None) -> Principal:
    """The principal filing into `folder_id`: 403 forbidden_scope outside a scoped token's folders, 404
    folder_not_found (with `missing`) when the user has no such folder."""
    filing = filing_target(principal, folder_id)
    if folder_id is not None:
        async with deps.db.read_session() as s:
            if not await folder_store.owned_ids(s, principal.user_id, [folder_id]):
                raise folder_not_found("There is no such folder.", missing=[str(folder_id)])
    return filing


async def _resolve_url(deps: Deps, principal: Principal, url: str, title: str | None, in_kb: bool,
                       auto_transform: bool) -> Resolved:
    if not url.lower().startswith(("http://", "https://")):
        raise ingest_failed("only http and https URLs can be ingested")
    kind = classify_media_url(url) or "url"
    if kind == "youtube":
        # yt-dlp does its own networking and cannot use the guarded transport: at least the YouTube host itself
        # must resolve to public addresses (the URL was already matched against YouTube's hosts).
        parts = urlsplit(url)
        await check_host(parts.hostname or "www.youtube.com", parts.port or 443)
        canonical = youtube.canonical_url(url)
        return Resolved(principal, kind, title, in_kb, auto_transform, url=canonical, canonical=canonical)
    if kind in TRANSCRIBED and deps.transcriber is None:
        raise transcription_unavailable()
    try:
        canonical = canonical_url(url)
    except ValueError:
        raise ingest_failed("the URL cannot be parsed") from None
    return Resolved(principal, kind, title, in_kb, auto_transform, url=url, canonical=canonical)
