"""Tried as an agent would (issue 39): the official MCP SDK client (pinned 2.3.0) against a library with a
multi-page PDF, pages from several sites and a long note: it sees the view linked from the tools, asks narrowed
searches, cites a PDF page from a hit's location, reads around a hit, and pages through the long note to its end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.fixtures_answers import FRESNEL, NEEDLE, NEEDLE_CHAPTER, build_library
from tests.stack import Api, new_user


async def _walk(url: str, token: str, pdf: str, long: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        async with streamable_http_client(f"{url}/api/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                out["meta"] = {n: (t.meta or {}).get("ui") for n, t in tools.items()}
                found = await session.call_tool("search_knowledge_base", {
                    "query": "Fresnel lens cracked by frost", "kind": ["pdf"], "mode": "keyword", "limit": 3})
                out["pdf_hits"] = found.structured_content["results"]
                sites = await session.call_tool("search_knowledge_base", {"query": "lighthouse",
                                                                          "site": "example.org", "limit": 20})
                out["site_hits"] = sites.structured_content["results"]
                needle = await session.call_tool("search_knowledge_base", {
                    "query": "quartermaster albatross feathers", "item_id": long, "mode": "keyword", "limit": 1})
                hit = needle.structured_content["results"][0]
                out["needle"] = hit
                around = await session.call_tool("get_item", {
                    "item_id": long, "offset": max(0, hit["location"]["char_start"] - 2000), "max_chars": 6000})
                out["around"] = around.structured_content
                pages, offset = [], 0
                while offset is not None:
                    page = (await session.call_tool("get_item", {"item_id": long, "offset": offset})).structured_content
                    pages.append(page["text"])
                    offset = page["next_offset"]
                out["pages"] = pages
                out["pdf_text"] = (await session.call_tool("get_item", {"item_id": pdf, "max_chars": 100_000})
                                   ).structured_content["text"]
    return out


def test_an_agent_narrows_cites_and_pages(server, admin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    user = new_user(admin)
    c = Api(server.url, user.token(write=True, kb_only=False))
    library = build_library(c, admin, tmp_path)
    out = asyncio.run(_walk(server.url, user.token(kb_only=False), library.pdf, library.long))
    assert out["meta"]["search_knowledge_base"] == out["meta"]["get_item"] == {"resourceUri": "ui://lev/results.html"}
    hit = out["pdf_hits"][0]
    assert hit["item_id"] == library.pdf and FRESNEL in hit["text"] and hit["kind"] == "pdf"
    where = hit["location"]
    assert where["page"] <= 3 <= where["page_end"]  # "the Fresnel lens was replaced (report, p. 3)"
    assert out["pdf_text"][where["char_start"]:where["char_end"]] == hit["text"]
    assert out["pdf_text"].index(FRESNEL) > out["pdf_text"].index("Report page 3:")
    assert {h["item_id"] for h in out["site_hits"]} == {library.pages["https://example.org/guide"],
                                                        library.pages["https://news.example.org/story"]}
    needle = out["needle"]
    assert NEEDLE in needle["text"]
    assert needle["location"]["heading"] == f"Chapter {NEEDLE_CHAPTER}: watch {NEEDLE_CHAPTER}"
    assert NEEDLE in out["around"]["text"] and len(out["around"]["text"]) == 6000
    assert "".join(out["pages"]) == library.long_text and len(out["pages"]) >= 3
