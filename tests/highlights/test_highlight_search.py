"""Search finds highlights and their notes in all three modes, over REST and MCP (no new argument): a highlighted
passage ranks above the same words in the item's body, a note's words find their highlight, a highlight result
carries `highlight_id`, `item_id` and a `location` that slices the item's text to the result's text; another
user's highlights, items out of scope and items out of the knowledge base are never found; the merge itself."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lev.core.contract import mcp_tools
from lev.highlights.found import merge
from tests.highlights.test_highlights_api import add_text, item_text
from tests.mcp.test_mcp import call
from tests.stack import Admin, User, new_user

BODY = ("Rock pools at the edge of the sea hold small worlds of their own.\n"
        "The ochre sea star eats mussels at low tide, prying their shells apart for hours.\n"
        "Barnacles glue themselves head first to the rock and kick food into their mouths with their legs.\n"
        "Hermit crabs trade up to larger shells as they grow, queueing by size at an empty one.")
MODES = ("hybrid", "semantic", "keyword")


def search(c: Any, q: str, mode: str, **params: Any) -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, "mode": mode, **params})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


@pytest.mark.parametrize("mode", MODES)
def test_a_highlight_ranks_above_the_same_words_in_the_body_and_its_note_is_found(api, user: User,
                                                                                 mode: str) -> None:
    c = api(user.token(write=True))
    item = add_text(c, BODY, "Rock pools")
    h = c.post(f"/api/v1/items/{item}/highlights",
               json={"text": "ochre sea star eats mussels", "note": "Pisaster: a keystone predator."}).json()
    text = item_text(c, item)

    hits = search(c, "ochre sea star eats mussels", mode)
    assert hits[0].get("highlight_id") == h["id"], hits  # the marked passage first
    top = hits[0]
    assert (top["item_id"], top["text"], top["note"]) == (item, "ochre sea star eats mussels",
                                                          "Pisaster: a keystone predator.")
    loc = top["location"]
    assert text[loc["char_start"]:loc["char_end"]] == top["text"]
    body = [i for i, x in enumerate(hits) if x["item_id"] == item and "highlight_id" not in x]
    assert body and body[0] > 0 and hits[body[0]]["score"] <= top["score"]  # the same words in the body rank below

    note_hits = search(c, "keystone predator Pisaster", mode)
    assert note_hits[0].get("highlight_id") == h["id"] and note_hits[0]["note"].startswith("Pisaster"), note_hits


def test_search_over_mcp_finds_a_note_without_a_new_argument(api, user: User, server) -> None:  # type: ignore[no-untyped-def]
    token = user.token(write=True)
    c = api(token)
    item = add_text(c, BODY, "Rock pools")
    h = c.post(f"/api/v1/items/{item}/highlights",
               json={"text": "queueing by size at an empty one", "note": "Vacancy chains, like flats in a city."}
               ).json()
    tool = next(t for t in mcp_tools()["tools"] if t["name"] == "search_knowledge_base")
    assert set(tool["inputSchema"]["properties"]) >= {"query", "mode", "limit"}
    for mode in MODES:
        result = call(server, token, "search_knowledge_base", {"query": "vacancy chains flats city", "mode": mode})
        content = result["result"]["structuredContent"]
        Draft202012Validator(tool["outputSchema"]).validate(content)
        top = content["results"][0]
        assert (top["highlight_id"], top["item_id"], top["note"]) == (h["id"], item,
                                                                      "Vacancy chains, like flats in a city.")
        assert item_text(c, item)[top["location"]["char_start"]:top["location"]["char_end"]] == top["text"]


def test_another_users_highlights_scope_and_kb_only_are_respected(api, user: User, admin: Admin) -> None:
    c = api(user.token(write=True, kb_only=False))
    inside, outside = user.folder("Tide"), user.folder("Elsewhere")
    seen = add_text(c, BODY, "Rock pools", folder_id=inside)
    hidden = add_text(c, "Limpets return to the same scar on the rock after every tide.", "Limpets",
                      folder_id=outside)
    out_of_kb = add_text(c, "Periwinkles graze algae off the rocks slowly.", "Periwinkles", in_kb=False)
    c.post(f"/api/v1/items/{seen}/highlights", json={"text": "Barnacles glue themselves", "note": "zzyzx cement"})
    c.post(f"/api/v1/items/{hidden}/highlights", json={"text": "same scar", "note": "zzyzx homing"})
    c.post(f"/api/v1/items/{out_of_kb}/highlights", json={"text": "graze algae", "note": "zzyzx grazing"})
    other = new_user(admin)
    theirs = api(other.token(write=True))
    own = add_text(theirs, BODY, "Their rock pools")
    theirs.post(f"/api/v1/items/{own}/highlights", json={"text": "Hermit crabs", "note": "zzyzx their note"})

    for mode in MODES:
        mine = {x["note"] for x in search(c, "zzyzx", mode, limit=50) if x.get("highlight_id")}
        assert "zzyzx their note" not in mine and "zzyzx grazing" not in mine  # never another's; never out of KB
        if mode == "keyword":
            assert mine == {"zzyzx cement", "zzyzx homing"}
    scoped = api(user.token(folders=[inside]))
    assert {x["note"] for x in search(scoped, "zzyzx", "keyword") if x.get("highlight_id")} == {"zzyzx cement"}
    in_folder = search(c, "zzyzx", "keyword", folder_id=outside)
    assert {x["note"] for x in in_folder if x.get("highlight_id")} == {"zzyzx homing"}
    assert {x["note"] for x in search(theirs, "zzyzx", "keyword") if x.get("highlight_id")} == {"zzyzx their note"}


def test_the_merge_keeps_the_best_limit_and_puts_a_highlight_first_on_a_tie() -> None:
    chunk = {"chunk_id": "c1", "item_id": "i", "title": "t", "url": None, "text": "body words", "score": 2.0,
             "similarity": None, "keyword_rank": 2.0}
    row = {"id": "h1", "item_id": "i", "chunk_id": "c1", "title": "t", "url": None, "text": "words", "note": None,
           "char_start": 5, "char_end": 10, "cos": None, "bm25": 2.0 / 1.15, "kind": "text", "stored_media": False,
           "created_at": dt.datetime(2026, 11, 27, tzinfo=dt.UTC), "outline": None, "content_id": "ct",
           "start_sec": None, "end_sec": None}
    merged = merge([chunk], [row], "keyword", 10, 0.6)
    assert [x.get("highlight_id") for x in merged] == ["h1", None]  # equal scores: the highlight first
    assert merge([chunk], [row], "keyword", 1, 0.6)[0]["highlight_id"] == "h1"
    assert merge([chunk], [{**row, "bm25": 0}], "keyword", 10, 0.6) == [chunk]  # no word of the query: left out
