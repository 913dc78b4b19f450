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

from lev import runtime
from lev.auth.policy import Principal
from lev.core.errors import file_too_large, ingest_failed, invalid_body, not_found
from lev.ingest.save import INLINE_CHUNK_LIMIT, Stored, index_content, item_status, prepare, queue_transforms
from lev.ingest.urls import canonical_url
from lev.ingest.webpage import extract_html
from store import captures as capture_store
from store import contents as content_store
from store import items as item_store
from store.db import transaction

MAX_HTML_BYTES = 5 * 1024 * 1024  # 5242880 bytes of UTF-8, as the browser rendered the page
# The request body that carries it: JSON escaping (quotes, backslashes, newlines) can double the HTML's size.
MAX_BODY_BYTES = 2 * MAX_HTML_BYTES + 1024 * 1024
MAX_URL_CHARS = 4096
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


def check_source_url(url: str, field: str = "url") -> str:
    """An http(s) URL of at most 4096 characters, trimmed; 400 invalid_body otherwise."""
    url = url.strip()
    if not url:
        raise invalid_body(f"`{field}` must not be empty.")
    if len(url) > MAX_URL_CHARS:
        raise invalid_body(f"{field} is limited to {MAX_URL_CHARS} characters.")
    if not url.lower().startswith(("http://", "https://")):
        raise invalid_body(f"{field} must be an http or https URL.")
    try:
        canonical_url(url)
    except ValueError:
        raise invalid_body(f"{field} cannot be parsed as a URL.") from None
    return url


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


async def save(principal: Principal, page: Page, *, title: str | None, in_kb: bool,
               auto_transform: bool) -> Stored:
    """Store the page as the caller's own item (a new one, or the one an earlier capture of its URL made), filed into
    the principal's new-item folder; 400 ingest_failed when the page has no readable text."""
    found_title, text, meta = await asyncio.to_thread(extract_html, page.html, page.url)
    if not text:
        raise ingest_failed("the page has no readable text to store")
    title = title or found_title or page.url
    metadata: dict[str, Any] = {**meta, "captured": "browser", "content_type": "text/html"}
    chunks = await prepare(title, text, inline_limit=INLINE_CHUNK_LIMIT)
    status = "ready" if chunks.embedded else "processing"
    folder_id = principal.new_item_folder
    values = {"title": title, "in_kb": in_kb, "auto_transform": auto_transform, "status": status, "error": None}
    async with transaction() as s:
        await capture_store.lock_url(s, principal.user_id, page.canonical)
        if folder_id is not None and not await content_store.lock_folder(s, principal.user_id, folder_id):
            raise not_found()  # folders are locked before items and contents in every writer
        earlier = await capture_store.lock_owned(s, principal.scope, page.canonical)
        content_id = await capture_store.create_owned(s, user_id=principal.user_id, owner_url=page.canonical,
                                                      url=page.url, title=title, text=text, metadata=metadata,
                                                      status=status)
        if earlier is None:
            item_id = await content_store.create_item(
                s, user_id=principal.user_id, content_id=content_id, kind="url", title=title, url=page.url,
                in_kb=in_kb, auto_transform=auto_transform, status=status, folder_id=folder_id,
                created_by=principal.token_id)
            if item_id is None:
                raise not_found()
        else:
            item_id = earlier["item_id"]
            await capture_store.repoint_item(s, item_id, content_id, url=page.url, **values)
            await capture_store.delete_unreferenced(s, earlier["content_id"])
            if folder_id is not None:
                await item_store.add_memberships(s, item_id, [folder_id])
        todo = await index_content(s, content_id, title, chunks) if status == "ready" else []
    await queue_transforms(todo)
    if status == "processing":
        await runtime.enqueue("process_content", str(content_id))
    return Stored(item_status("url", status, "not_required"), content_id, item_id, folder_id, new=earlier is None)


async def captured(principal: Principal, url: str) -> Stored | None:
    """The caller's captured item of this URL (a URL ingest answers it: a server fetch never replaces what the
    user's browser saw), filed into the principal's new-item folder; None when the caller captured no such page."""
    try:
        canonical = canonical_url(url)
    except ValueError:
        return None
    folder_id = principal.new_item_folder
    async with transaction() as s:
        if folder_id is not None and not await content_store.lock_folder(s, principal.user_id, folder_id):
            raise not_found()
        found = await capture_store.lock_owned(s, principal.scope, canonical)
        if found is None:
            return None
        if folder_id is not None:
            await item_store.add_memberships(s, found["item_id"], [folder_id])
    return Stored(item_status("url", found["status"], "not_required"), found["content_id"], found["item_id"],
                  folder_id)
