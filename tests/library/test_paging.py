"""get_item in pages (issue 39): offset and max_chars on REST and MCP, text_offset / text_total_chars /
next_offset, the same paging for a transcript, walking next_offset gives the whole text back; MCP answers stay
under 64 KB (get_item by default) and 32 KB (a search of 10 passages) on the wire."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.mcp.test_mcp import rpc
from tests.stack import Api, User

GREEK = "Ο φάρος φωτίζει τη θάλασσα κάθε νύχτα και ο φύλακας γράφει στο ημερολόγιο. "


def note(c: Api, text: str, title: str = "Long") -> str:
    r = c.post("/api/v1/ingest", json={"kind": "text", "title": title, "text": text, "auto_transform": False})
    assert r.status_code == 200, r.text
    return str(r.json()["user_item_id"])


def mcp_get(server, token: str, **args: Any) -> tuple[dict[str, Any], int]:  # type: ignore[no-untyped-def]
    r = rpc(server, token, "tools/call", {"name": "get_item", "arguments": args})
    assert r.status_code == 200, r.text
    return r.json(), len(r.content)


def walk_mcp(server, token: str, item_id: str, **args: Any) -> tuple[str, list[int]]:  # type: ignore[no-untyped-def]
    """The whole text read page by page, and the wire size of each answer."""
    out, sizes, offset = [], [], 0
    while True:
        body, size = mcp_get(server, token, item_id=item_id, offset=offset, **args)
        page = body["result"]["structuredContent"]
        assert page["text_offset"] == offset
        out.append(page["text"])
        sizes.append(size)
        if page["next_offset"] is None:
            return "".join(out), sizes
        assert page["next_offset"] == offset + len(page["text"])
        offset = page["next_offset"]


def test_rest_pages_and_whole_text(server, api, user: User) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    text = "\n\n".join((f"Paragraph {n}: the lighthouse keeper wrote line {n} of the log. " * 3).strip()
                       for n in range(560))  # past 100,000 characters: two pages of the most
    item = note(c, text)
    whole = c.get(f"/api/v1/items/{item}").json()
    assert whole["text"] == text and whole["text_offset"] == 0 and whole["next_offset"] is None
    assert whole["text_total_chars"] == len(text) and whole["transcript"] is None
    page = c.get(f"/api/v1/items/{item}", params={"offset": 1000, "max_chars": 500}).json()
    assert page["text"] == text[1000:1500] and page["next_offset"] == 1500 and page["text_total_chars"] == len(text)
    tail = c.get(f"/api/v1/items/{item}", params={"offset": len(text) - 10}).json()
    assert tail["text"] == text[-10:] and tail["next_offset"] is None
    past = c.get(f"/api/v1/items/{item}", params={"offset": len(text) + 5, "max_chars": 10}).json()
    assert past["text"] == "" and past["next_offset"] is None
    pieces, offset = [], 0
    while offset is not None:
        got = c.get(f"/api/v1/items/{item}", params={"offset": offset, "max_chars": 100_000}).json()
        pieces.append(got["text"])
        offset = got["next_offset"]
    assert "".join(pieces) == text and len(pieces) == -(-len(text) // 100_000)
    for params in ({"offset": -1}, {"max_chars": 0}, {"max_chars": 100_001}, {"offset": "x"}):
        r = c.get(f"/api/v1/items/{item}", params=params)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (params, r.text)
        assert next(iter(params)) in r.json()["message"]


def test_mcp_get_item_pages_under_64_kb(server, api, user: User) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    token = user.token()
    ascii_text = "\n\n".join((f"Entry {n}: \"the lamp\" burned; the keeper's log says so. " * 4).strip()
                             for n in range(150))
    greek_text = "\n\n".join((GREEK * 3).strip() for _ in range(120))
    for text in (ascii_text, greek_text):
        item = note(c, text)
        first, size = mcp_get(server, token, item_id=item)
        page = first["result"]["structuredContent"]
        assert size < 64 * 1024 and page["text_offset"] == 0 and page["text_total_chars"] == len(text)
        assert 5_000 < len(page["text"]) <= 20_000 and page["next_offset"] == len(page["text"])
        whole, sizes = walk_mcp(server, token, item)
        assert whole == text and max(sizes) < 64 * 1024
        asked, _ = mcp_get(server, token, item_id=item, offset=7, max_chars=30_000)
        assert asked["result"]["structuredContent"]["text"] == text[7:30_007]  # an explicit size is honoured
    short = note(c, "A short note about a lighthouse.")
    body, _ = mcp_get(server, token, item_id=short)
    assert body["result"]["structuredContent"]["next_offset"] is None
    for args in ({"offset": -1}, {"max_chars": 0}, {"max_chars": 100_001}, {"offset": 1.5}):
        bad, _ = mcp_get(server, token, item_id=short, **args)
        assert bad["error"]["code"] == -32602, (args, bad)


def test_a_transcript_pages_the_same_way(server, api, user: User, admin) -> None:  # type: ignore[no-untyped-def]
    transcript = "\n".join(f"Segment {n}: the keeper describes the lamp, the lens and the fog horn." for n in
                           range(2000))
    content, item = str(uuid.uuid4()), str(uuid.uuid4())
    admin.sql("INSERT INTO contents (id, kind, title, transcript, status, metadata) "
              "VALUES (:c, 'audio', 'Talk', :t, 'ready', '{}')", c=content, t=transcript)
    admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived, status, "
              "transcription_status) VALUES (:i, :u, :c, 'audio', 'Talk', true, false, 'ready', 'done')",
              i=item, u=user.id, c=content)
    c = api(user.token())
    page = c.get(f"/api/v1/items/{item}", params={"offset": 100, "max_chars": 1000}).json()
    assert page["text"] is None and page["transcript"] == transcript[100:1100]
    assert page["transcript_total_chars"] == len(transcript) and page["text_total_chars"] == 0
    assert page["next_offset"] == 1100
    token = user.token()
    pieces, offset = [], 0
    while offset is not None:
        body, size = mcp_get(server, token, item_id=item, offset=offset)
        got = body["result"]["structuredContent"]
        pieces.append(got["transcript"])
        offset = got["next_offset"]
        assert size < 64 * 1024
    assert "".join(pieces) == transcript


@pytest.mark.parametrize("blob", [False, True])
def test_a_search_of_ten_passages_stays_under_32_kb(server, api, user: User, blob: bool) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    if blob:  # chunks of 4,000 characters (one endless word each, as in a pasted data dump)
        for n in range(4):
            note(c, f"lighthouse{n} " + "".join(f"ä{k}x" for k in range(6000)), title="A" * 400)
    else:
        for n in range(6):
            note(c, " ".join(f"The lighthouse keeper's log, entry {n}.{k}: \"wind\" from the north." for k in
                             range(40)), title=f"Log {n} " + "with a rather long title " * 8)
    token = user.token()
    r = rpc(server, token, "tools/call", {"name": "search_knowledge_base",
                                          "arguments": {"query": "lighthouse", "limit": 10}})
    assert r.status_code == 200 and len(r.content) < 32 * 1024, len(r.content)
    results = r.json()["result"]["structuredContent"]["results"]
    assert len(results) == 10
    for hit in results:
        text = c.get(f"/api/v1/items/{hit['item_id']}").json()["text"]
        where = hit["location"]
        assert text[where["char_start"]:where["char_end"]] == hit["text"]
    assert any(hit.get("truncated", False) for hit in results) is blob
