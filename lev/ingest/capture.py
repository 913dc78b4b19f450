"""Pages captured in the user's browser (`POST /ingest` kind `page`, issue 34): the HTML as the browser rendered it
(behind a sign-in, built by scripts), its text extracted on the server exactly as for a fetched page (trafilatura),
nothing it references fetched.

The privacy rule: a captured page is the user's own content. Its content record has an owner and no shared
canonical URL, so no other user's ingest of the URL shares it, no other user's search finds it, a later server
fetch of the URL never replaces it (the owner's URL ingest answers the captured item) and it never overwrites the
shared content other users have. Capturing the same URL again updates the user's item: a fresh content record
takes the old one's place (the old one, its chunks and the item's outputs go), so a job still working on the old
text finds nothing to finish.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from lev.auth.policy import Principal, require
from lev.core.errors import file_too_large, ingest_failed, invalid_body, not_found
from lev.ingest.acquire import Source, Text
from lev.ingest.chunking import embed_chunks
from lev.ingest.deps import Deps
from lev.ingest.followups import enqueue, finishing, transforms
from lev.ingest.plan import chunk, plan
from lev.ingest.request import IngestRequest, Resolved, check_source_url, filing
from lev.ingest.save import Stored, index_content
from lev.ingest.urls import canonical_url
from lev.ingest.webpage import extract_html
from store import captures as capture_store
from store import items as item_store
from store import lifecycle

MAX_HTML_BYTES = 5 * 1024 * 1024  # 5242880 bytes of UTF-8, as the browser rendered the page
# The request body that carries it: JSON escaping (quotes, backslashes, newlines) can double the HTML's size.
MAX_BODY_BYTES = 2 * MAX_HTML_BYTES + 1024 * 1024
# An HTML document has at least one of these elements; plain text, JSON or another XML vocabulary has none.
_HTML_TAG = re.compile(
    r"<\s*(?:!doctype\s+html|html|head|body|title|meta|article|main|section|div|span|p|h[1-6]|a|ul|ol|li|table|"
    r"pre|blockquote|br|img|header|footer|nav|form|em|strong|b|i|code|figure|dl)[\s/>]", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    """A captured page that passed the checks: its URL, canonical URL and UTF-8 HTML."""

    url: str
    canonical: str
    html: bytes


def check(url: str | None, html: str | None, text: str | None) -> Page:
    """The request's page, or 400 invalid_body (no URL, not http(s), no HTML, HTML that is no HTML document) or
    413 file_too_large (HTML past 5 MiB of UTF-8, with `maxBytes`). Nothing is stored before these pass."""
    if text is not None:
        raise invalid_body("kind 'page' takes `html`, not `text`.")
    if url is None:
        raise invalid_body("kind 'page' needs the page's `url`.")
    url = check_source_url(url)
    if html is None or not html.strip():
        raise invalid_body("kind 'page' needs the page's `html`, as the browser rendered it.")
    data = html.encode("utf-8")
    if len(data) > MAX_HTML_BYTES:
        raise file_too_large(f"A page's HTML is limited to {MAX_HTML_BYTES} bytes (5 MiB) of UTF-8; this one has "
                             f"{len(data)}.", MAX_HTML_BYTES)
    if not _HTML_TAG.search(html):
        raise invalid_body("html is not an HTML document (no HTML element found).")
    return Page(url=url, canonical=canonical_url(url), html=data)


async def ingest_page(deps: Deps, principal: Principal, req: IngestRequest) -> Stored:
    """`POST /ingest` kind page: checked (nothing stored before), filed like any ingest, extracted, saved."""
    require(principal, "write")
    for name, value in (("url", req.url), ("html", req.html), ("title", req.title)):
        if value is not None and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise invalid_body(f"{name} must not contain NUL characters.")
    if req.source_url is not None:
        raise invalid_body("only kind 'text' takes `source_url`.")
    page = check(req.url, req.html, req.text)
    principal = await filing(deps, principal, req.folder_id)
    title = req.title.strip() or None if req.title else None
    return await save(deps, principal, page, title=title, in_kb=req.in_kb, auto_transform=req.auto_transform)


async def save(deps: Deps, principal: Principal, page: Page, *, title: str | None, in_kb: bool,
               auto_transform: bool) -> Stored:
    """Store the page as the caller's own item (a new one, or the one an earlier capture of its URL made), filed into
    the principal's new-item folder; 400 ingest_failed when the page has no readable text. Chunked, planned and
    embedded like any text of the pipeline; stored by its own transaction (the owner, the replaced content)."""
    found_title, text, meta = await asyncio.to_thread(extract_html, page.html, page.url)
    if not text:
        raise ingest_failed("the page has no readable text to store")
    metadata: dict[str, Any] = {**meta, "captured": "browser", "content_type": "text/html"}
    acquired = Text("url", title or found_title or page.url, text, Source(filename="", url=page.url), metadata)
    chunks = await chunk(acquired)
    p = plan(acquired, len(chunks.bodies))
    if p.embed_now and chunks.bodies:
        chunks.vectors = await embed_chunks(deps.embedder, p.title, chunks.bodies)
    folder_id = principal.new_item_folder
    columns = p.state.columns()
    async with deps.db.transaction() as s:
        await capture_store.lock_url(s, principal.user_id, page.canonical)
        if folder_id is not None and not await item_store.lock_folder(s, principal.user_id, folder_id):
            raise not_found()  # folders are locked before items and contents in every writer
        earlier = await capture_store.lock_owned(s, principal.scope, page.canonical)
        content_id = await capture_store.create_owned(s, user_id=principal.user_id, owner_url=page.canonical,
                                                      url=page.url, title=p.title, text=text, metadata=metadata,
                                                      status=p.state.status.value)
        if earlier is None:
            item_id = await item_store.create_item(
                s, user_id=principal.user_id, content_id=content_id, kind="url", title=p.title, url=page.url,
                in_kb=in_kb, auto_transform=auto_transform, folder_id=folder_id, created_by=principal.token_id,
                **columns)
            if item_id is None:
                raise not_found()
        else:
            item_id = earlier["item_id"]
            await capture_store.repoint_item(s, item_id, content_id, url=page.url, title=p.title, in_kb=in_kb,
                                             auto_transform=auto_transform, error=None, **columns)
            await capture_store.delete_unreferenced(s, earlier["content_id"])
            if folder_id is not None:
                await item_store.add_memberships(s, item_id, [folder_id])
        ready = p.state.status is lifecycle.Status.READY
        todo = await index_content(s, content_id, p.title, chunks) if ready else []
    await enqueue(deps.queue, finishing(p.job, content_id, principal.user_id) + transforms(todo))
    return Stored(p.state.phase, content_id, item_id, folder_id)


async def captured(deps: Deps, r: Resolved) -> Stored | None:
    """The caller's captured item of a resolved web-page URL (a URL ingest answers it: a server fetch never replaces
    what the user's browser saw), filed into the principal's new-item folder; None when there is none."""
    if r.kind != "url" or r.canonical is None:
        return None
    principal, folder_id = r.principal, r.principal.new_item_folder
    async with deps.db.read_session() as s:  # a URL the caller never captured costs one read, no transaction
        if not await capture_store.has_owned(s, principal.user_id, r.canonical):
            return None
    async with deps.db.transaction() as s:
        if folder_id is not None and not await item_store.lock_folder(s, principal.user_id, folder_id):
            raise not_found()
        found = await capture_store.lock_owned(s, principal.scope, r.canonical)
        if found is None:
            return None
        if folder_id is not None:
            await item_store.add_memberships(s, found["item_id"], [folder_id])
    phase = lifecycle.of_row(found["status"], found["transcription_status"]).phase
    return Stored(phase, found["content_id"], found["item_id"], folder_id)
