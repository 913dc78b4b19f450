"""Locations on search hits (issue 39): the item's text as GET /api/v1/items/{id} returns it, sliced with a hit's
char_start and char_end, is the hit's text, on REST and MCP; a PDF hit names the pages it starts and ends on; a hit
under a heading names it; kind and saved_at ride along."""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lev.core.contract import mcp_tools
from tests.fixtures_answers import FRESNEL, NEEDLE, NEEDLE_CHAPTER, Library, build_library
from tests.mcp.test_mcp import call
from tests.stack import Api, User, new_user

MODES = ("hybrid", "semantic", "keyword")


@pytest.fixture(scope="module")
def lib(server, admin, tmp_path_factory: pytest.TempPathFactory) -> tuple[User, Api, Library]:  # type: ignore[no-untyped-def]
    user = new_user(admin)
    c = Api(server.url, user.token(write=True, kb_only=False))
    return user, c, build_library(c, admin, Path(tmp_path_factory.mktemp("locations")))


def search(c: Api, q: str, **params: Any) -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def item_text(c: Api, item_id: str) -> str:
    item = c.get(f"/api/v1/items/{item_id}").json()
    return str(item["text"] if item["text"] is not None else item["transcript"])


def test_every_hit_slices_the_item_text(lib) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    texts: dict[str, str] = {}
    seen = 0
    for q in ("lighthouse", "Fresnel lens prisms", "keeper logbook watch", "storm relief boat", "albatross"):
        for mode in MODES:
            for hit in search(c, q, mode=mode, limit=50):
                where = hit["location"]
                if hit["item_id"] not in texts:
                    texts[hit["item_id"]] = item_text(c, hit["item_id"])
                text = texts[hit["item_id"]]
                assert text[where["char_start"]:where["char_end"]] == hit["text"], (q, mode, hit["item_id"])
                assert hit["kind"] in ("url", "text", "pdf") and hit["saved_at"][:4].isdigit()
                seen += 1
    assert seen > 200 and len(texts) == len(library.pages) + len(library.notes) + 2


def test_pdf_hits_name_their_pages(lib) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    text = item_text(c, library.pdf)
    starts = [text.index(f"Report page {n}:") for n in range(1, 6)]
    assert starts == sorted(starts) and starts[0] == 0
    found = search(c, "lighthouse station reported", kind="pdf", limit=50)
    assert {h["location"]["page"] for h in found} == {1, 2, 3, 4, 5}
    for hit in found:
        where = hit["location"]
        assert set(where) == {"char_start", "char_end", "page", "page_end", "heading"}
        assert where["page"] == bisect.bisect_right(starts, where["char_start"])
        assert where["page_end"] == bisect.bisect_right(starts, where["char_end"] - 1) >= where["page"]
    lens = search(c, "Fresnel lens cracked by frost at Cape Bleak", kind="pdf", mode="keyword")[0]
    assert FRESNEL in lens["text"] and lens["location"]["page"] <= 3 <= lens["location"]["page_end"]


def test_hits_name_the_heading_above_them(lib) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    needle = search(c, "quartermaster albatross feathers brass chest", item_id=library.long, mode="keyword")[0]
    assert NEEDLE in needle["text"]
    assert needle["location"]["heading"] == f"Chapter {NEEDLE_CHAPTER}: watch {NEEDLE_CHAPTER}"
    guide = library.pages["https://example.org/guide"]
    text = item_text(c, guide)
    heads = [(text.index(f"{h}\n"), h) for h in ("Lighthouse guide", "Visiting hours", "The lens")]
    found = search(c, "lighthouse", item_id=guide, limit=50)
    assert len(found) >= 2 and {h["location"]["heading"] for h in found} >= {"The lens"}
    for hit in found:  # the page's <h1>-<h6>, found as lines of its text: the last one at or before the hit
        start = hit["location"]["char_start"]
        assert hit["location"]["heading"] == [h for at, h in heads if at <= start][-1]
    polish = search(c, "brass polish paraffin clockwork", site="example.org", mode="keyword")[0]
    assert polish["item_id"] == guide and polish["location"]["heading"] == "The lens"
    note = search(c, "relief boat could not land", kind="text", before="2026-04-01", mode="keyword")[0]
    assert note["item_id"] == library.notes["January note"] and note["location"]["heading"] is None
    assert "page" not in note["location"] and "start_sec" not in note["location"]


def test_mcp_hits_carry_the_same_locations(lib, server) -> None:  # type: ignore[no-untyped-def]
    user, c, library = lib
    token = user.token(kb_only=False)
    schema = next(t for t in mcp_tools()["tools"] if t["name"] == "search_knowledge_base")["outputSchema"]
    for args in ({"query": "Fresnel lens", "kind": ["pdf"]}, {"query": "albatross feathers", "item_id": library.long},
                 {"query": "lighthouse", "limit": 10}):
        res = call(server, token, "search_knowledge_base", args)["result"]
        structured = res["structuredContent"]
        jsonschema.validate(structured, schema)
        assert json.loads(res["content"][0]["text"]) == structured
        rest = search(c, args["query"], **{k: v for k, v in args.items() if k != "query"})
        assert [h["location"] for h in structured["results"]] == [h["location"] for h in rest]
        for hit in structured["results"]:
            where = hit["location"]
            assert item_text(c, hit["item_id"])[where["char_start"]:where["char_end"]] == hit["text"]
