"""Issue 52 item 2: every cap the server enforces on a request field that a schema can state is in openapi.yaml
(and mcp_tools.json for the tools), equal to the code's own constant, and the live server accepts the cap and
refuses one past it as the schema refuses (400 invalid_body; an upload's size 413 file_too_large with maxBytes)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lev.auth import passwords, policy
from lev.core import sourcepath
from lev.core.contract import HTTP_URL, INVITE_EMAIL, load_spec, mcp_tools
from lev.feeds import service as feeds
from lev.highlights import service as highlights
from lev.imports import importfile
from lev.ingest import media, request
from lev.library import reads
from lev.sharing import service as sharing
from lev.webhooks import service as webhooks
from tests.stack import User, make_item


def schema(name: str) -> dict[str, Any]:
    return dict(load_spec()["components"]["schemas"][name])


def prop(name: str, field: str) -> dict[str, Any]:
    return dict(schema(name)["properties"][field])


def param(path: str, method: str, name: str) -> dict[str, Any]:
    op = load_spec()["paths"][path][method]
    found = [p for p in op.get("parameters", []) if p.get("name") == name]
    return dict(found[0]["schema"])


def tool_arg(tool: str, arg: str) -> dict[str, Any]:
    return dict(next(t for t in mcp_tools()["tools"] if t["name"] == tool)["inputSchema"]["properties"][arg])


# (where in the contract, the schema keyword, what the code enforces)
CAPS = [
    (prop("IngestText", "text"), "maxLength", request.MAX_TEXT_CHARS),
    (tool_arg("add_to_knowledge", "text"), "maxLength", request.MAX_TEXT_CHARS),
    (prop("IngestUrl", "url"), "maxLength", request.MAX_URL_CHARS),
    (prop("IngestText", "source_url"), "maxLength", request.MAX_URL_CHARS),
    (prop("IngestPage", "url"), "maxLength", request.MAX_URL_CHARS),
    (tool_arg("add_to_knowledge", "url"), "maxLength", request.MAX_URL_CHARS),
    (prop("IngestPage", "html"), "maxLength", request.MAX_HTML_BYTES),  # characters: never more than the bytes
    (schema("UploadSize"), "maximum", media.MAX_UPLOAD_BYTES),
    (prop("FeedCreate", "url"), "maxLength", feeds.MAX_URL_CHARS),
    (prop("WebhookCreate", "url"), "maxLength", webhooks.MAX_URL_CHARS),
    (prop("FolderCreate", "name"), "maxLength", policy.FOLDER_NAME_MAX_CHARS),
    (prop("FolderUpdate", "name"), "maxLength", policy.FOLDER_NAME_MAX_CHARS),
    (prop("HighlightCreate", "note"), "maxLength", highlights.MAX_NOTE),
    (prop("HighlightUpdate", "note"), "maxLength", highlights.MAX_NOTE),
    (prop("SignUp", "password"), "minLength", passwords.MIN_CHARS),
    (prop("SignUp", "password"), "maxLength", passwords.MAX_CHARS),
    (prop("PasswordChange", "new_password"), "minLength", passwords.MIN_CHARS),
    (prop("PasswordChange", "new_password"), "maxLength", passwords.MAX_CHARS),
    (prop("InvitationCreate", "email"), "maxLength", sharing.MAX_EMAIL_CHARS),
    (param("/api/v1/items/{id}", "get", "max_chars"), "maximum", reads.MAX_PAGE_CHARS),
    (tool_arg("get_item", "max_chars"), "maximum", reads.MAX_PAGE_CHARS),
    (param("/api/v1/search", "get", "limit"), "maximum", reads.MAX_LIMIT),
    (param("/api/v1/items/{id}/similar", "get", "limit"), "maximum", reads.MAX_LIMIT),
    (tool_arg("search_knowledge_base", "limit"), "maximum", reads.MAX_LIMIT),
    *[(prop(name, "title"), "maxLength", importfile.MAX_TITLE_CHARS)
      for name in ("IngestUrl", "IngestText", "IngestPage", "ItemUpdate", "FeedCreate", "FeedUpdate")],
    (tool_arg("add_to_knowledge", "title"), "maxLength", importfile.MAX_TITLE_CHARS),
    *[(prop(name, field), "pattern", HTTP_URL) for name, field in (
        ("IngestUrl", "url"), ("IngestPage", "url"), ("IngestText", "source_url"), ("FeedCreate", "url"),
        ("WebhookCreate", "url"))],
    (prop("InvitationCreate", "email"), "pattern", INVITE_EMAIL),
    (prop("FinalizeRequest", "source_path"), "maxLength", sourcepath.MAX_CHARS),
    (prop("FinalizeRequest", "source_path"), "pattern", sourcepath.PATTERN),
    (param("/api/v1/source-files", "get", "limit"), "maximum", reads.MAX_SOURCE_FILES),
    (param("/api/v1/source-files", "get", "prefix"), "maxLength", sourcepath.MAX_CHARS),
    (param("/api/v1/source-files", "get", "after"), "maxLength", sourcepath.MAX_CHARS),
]


@pytest.mark.parametrize(("where", "keyword", "enforced"), CAPS)
def test_the_schema_states_the_cap_the_code_enforces(where: dict[str, Any], keyword: str, enforced: Any) -> None:
    assert where.get(keyword) == enforced, (where, keyword, enforced)


def test_the_upload_cap_is_one_for_every_media_class() -> None:
    """One cap for every MIME type the allowlist holds: the schema's one maximum is exact for each class."""
    sizes = schema("UploadSize")
    assert "oneOf" not in sizes and "anyOf" not in sizes and sizes["maximum"] == media.MAX_UPLOAD_BYTES
    for mime in schema("UploadMime")["enum"]:
        media.check_signing(mime, media.MAX_UPLOAD_BYTES)
        with pytest.raises(Exception) as refused:
            media.check_signing(mime, media.MAX_UPLOAD_BYTES + 1)
        assert getattr(refused.value, "code", None) == "file_too_large"


def _refused(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", (r.status_code, r.text[:300])
    return dict(r.json())


def test_the_server_takes_each_cap_and_refuses_one_past_it(server, user: User) -> None:
    c = httpx.Client(base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {user.token(write=True)}"})
    name = policy.FOLDER_NAME_MAX_CHARS
    assert c.post("/api/v1/folders", json={"name": "f" * name}).status_code == 201
    _refused(c.post("/api/v1/folders", json={"name": "g" * (name + 1)}))
    item = make_item(user)
    title = importfile.MAX_TITLE_CHARS
    assert c.patch(f"/api/v1/items/{item}", json={"title": "t" * title}).status_code == 200
    _refused(c.patch(f"/api/v1/items/{item}", json={"title": "t" * (title + 1)}))
    upload = {"mime": "video/mp4", "filename": "a.mp4"}
    assert c.post("/api/v1/uploads/signed-url", json={**upload, "size": media.MAX_UPLOAD_BYTES}).status_code == 200
    over = c.post("/api/v1/uploads/signed-url", json={**upload, "size": media.MAX_UPLOAD_BYTES + 1})
    assert over.status_code == 413 and over.json()["error"] == "file_too_large"  # the interface spec's code
    assert over.json()["maxBytes"] == media.MAX_UPLOAD_BYTES
    folder = c.post("/api/v1/folders", json={"name": "Shared caps"}).json()["id"]
    local = "a" * (sharing.MAX_EMAIL_CHARS - len("@example.com"))
    invite = f"/api/v1/folders/{folder}/invitations"
    assert c.post(invite, json={"email": f"{local}@example.com", "role": "viewer"}).status_code == 201
    _refused(c.post(invite, json={"email": f"a{local}@example.com", "role": "viewer"}))
    for not_one in ("name@example", "two@@example.com", "white space@example.com", "ctl\x01@example.com"):
        _refused(c.post(invite, json={"email": not_one, "role": "viewer"}))
    page = {"kind": "page", "html": "<p>A page.</p>"}
    for not_http in ("0", "ftp://example.com/x", "http://"):
        _refused(c.post("/api/v1/ingest", json={**page, "url": not_http}))
        _refused(c.post("/api/v1/ingest", json={"kind": "text", "text": "a note", "source_url": not_http}))
    url = "https://example.com/" + "p" * (request.MAX_URL_CHARS - len("https://example.com/"))
    assert c.post("/api/v1/ingest", json={"kind": "text", "text": "a note", "source_url": url}).status_code in (200,
                                                                                                              201)
    _refused(c.post("/api/v1/ingest", json={"kind": "text", "text": "a note", "source_url": url + "p"}))
