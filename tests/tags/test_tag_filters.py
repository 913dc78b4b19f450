"""Search and lists narrowed by tag, on the live server: REST `tag` (repeatable, ANDed, case-insensitive, a tag
finding the tags nested in it and nothing that only starts like it) in every search mode and on GET /items, MCP
`tags`, with the token's scope and a shared folder's tags; hits carry their item's tags; bad filters are 400 (MCP
-32602) naming the parameter."""

from __future__ import annotations

from typing import Any

import httpx

from tests.mcp.test_mcp import call
from tests.sharing.test_sharing_api import share
from tests.stack import Admin, User, new_user
from tests.tags.test_tags_api import err, note, ok

TEXT = "The harbour lighthouse guides the fishing boats home through the fog, {}."


def library(c: httpx.Client, folder: str | None = None) -> dict[str, str]:
    made = {}
    for name, tags in (("acme", ["Work/Acme"]), ("other", ["work/other"]), ("urgent", ["urgent", "work/acme"]),
                       ("plain", []), ("workshop", ["workshop"])):
        extra: dict[str, Any] = {"folder_id": folder} if folder and name != "plain" else {}
        made[name] = note(c, TEXT.format(f"says the {name} note"), title=name, tags=tags, **extra)
    return made


def hits(c: httpx.Client, mode: str, *tags: str, **more: str) -> set[str]:
    body = ok(c.get("/api/v1/search", params={"q": "harbour lighthouse fog", "mode": mode, "limit": 20,
                                              "tag": list(tags), **more}))
    return {h["title"] for h in body["results"]}


def listed(c: httpx.Client, *tags: str) -> set[str]:
    body = ok(c.get("/api/v1/items", params={"tag": list(tags), "per_page": 100}))
    assert body["total"] == len(body["items"])
    return {i["title"] for i in body["items"]}


def test_search_and_lists_by_tag_in_every_mode(api, user: User) -> None:
    c = api(user.token(write=True))
    library(c)
    for mode in ("hybrid", "semantic", "keyword"):
        assert hits(c, mode) == {"acme", "other", "urgent", "plain", "workshop"}, mode
        assert hits(c, mode, "work") == {"acme", "other", "urgent"}, mode  # not `workshop`
        assert hits(c, mode, "WORK/ACME") == {"acme", "urgent"}, mode
        assert hits(c, mode, "work", "urgent") == {"urgent"}, mode
        assert hits(c, mode, "work/acme", "workshop") == set(), mode
        assert hits(c, mode, "nobody-uses-this") == set(), mode
        assert hits(c, mode, "work", kind="text") == {"acme", "other", "urgent"}, mode
    one = ok(c.get("/api/v1/search", params={"q": "harbour lighthouse", "tag": "urgent"}))["results"][0]
    assert one["title"] == "urgent" and one["tags"] == ["urgent", "Work/Acme"]  # the user's first spelling
    assert listed(c, "work") == {"acme", "other", "urgent"} and listed(c, "work", "urgent") == {"urgent"}
    assert listed(c, "Workshop") == {"workshop"} and listed(c) == {"acme", "other", "urgent", "plain", "workshop"}


def test_mcp_search_takes_tags(api, server, user: User) -> None:
    token = user.token(write=True)
    library(api(token))
    answer = call(server, token, "search_knowledge_base", {"query": "harbour lighthouse", "limit": 20,
                                                           "tags": ["work", "urgent"]})["result"]
    assert {h["title"] for h in answer["structuredContent"]["results"]} == {"urgent"}
    assert answer["structuredContent"]["results"][0]["tags"] == ["urgent", "Work/Acme"]
    for bad in (["  "], [], ["x" * 65], "work"):
        refused = call(server, token, "search_knowledge_base", {"query": "harbour", "tags": bad})
        assert refused["error"]["code"] == -32602, refused


def test_a_tag_filter_keeps_to_the_scope_and_finds_a_shared_folders_tags(api, admin: Admin) -> None:
    owner, viewer = new_user(admin), new_user(admin)
    folder = owner.folder("Harbour work")
    o = api(owner.token(write=True, kb_only=False))
    library(o, folder)  # all but `plain` filed into the folder
    scoped = api(owner.token(folders=[folder]))
    assert hits(scoped, "hybrid", "work") == {"acme", "other", "urgent"}
    assert hits(scoped, "keyword") == {"acme", "other", "urgent", "workshop"}  # `plain` is not in the folder
    v = api(viewer.token(write=True, kb_only=False))
    share(o, folder, viewer, v, "viewer")
    note(v, TEXT.format("says the viewer's own note"), title="viewer's", tags=["work"])
    # the viewer narrows by the tags it sees: its own, and the owner's on the shared folder's items
    assert hits(v, "hybrid", "work") == {"acme", "other", "urgent", "viewer's"}
    assert listed(v, "work/acme") == {"acme", "urgent"}


def test_bad_tag_filters_are_refused(api, user: User) -> None:
    c = api(user.token())
    for params in ({"tag": "  "}, {"tag": "x" * 65}, {"tag": [f"t{i}" for i in range(21)]}, {"tag": "a\x01"}):
        message = err(c.get("/api/v1/search", params={"q": "harbour", **params}), 400, "invalid_body")
        assert "tag" in message, message
        err(c.get("/api/v1/items", params=params), 400, "invalid_body")
    err(c.get("/api/v1/items", params={"read": "maybe"}), 400, "invalid_body")
