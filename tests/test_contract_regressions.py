"""Regressions found by the contract fuzzers (contract_tests/): each test pins one fixed bug."""

from __future__ import annotations

import uuid

import pytest

from tests.test_rest_foundation import err


@pytest.mark.parametrize("path", ["/api/v1/folders", "/api/v1/items/bulk-delete", "/api/v1/ingest",
                                  "/api/v1/items/{item}/folders"])
@pytest.mark.parametrize("raw", [b"\xff\xfe\x00", b'{"name": "\xc3"}', b"{;\xa0C "])
def test_non_utf8_json_body_is_invalid_body(server, api, user, path, raw) -> None:
    """schemathesis: a body that is not UTF-8 answered 500 instead of 400 invalid_body."""
    c = api(user.token(write=True))
    r = c.post(path.format(item=uuid.uuid4()), content=raw, headers={"content-type": "application/json"})
    if r.status_code == 500:
        print(server.log_path.read_text()[-3000:])
    err(r, 400, "invalid_body")


def test_bulk_delete_rejects_malformed_ids(server, api, user) -> None:
    """schemathesis: `{"ids": [""]}` violates `format: uuid` yet answered 200 with the id under not_found."""
    from tests.stack import make_item

    item = make_item(user)
    c = api(user.token(write=True))
    for bad in ([""], ["not-a-uuid"], [item, "zz"]):
        err(c.post("/api/v1/items/bulk-delete", json={"ids": bad}), 400, "invalid_body")
    assert c.get(f"/api/v1/items/{item}").status_code == 200  # bad input changes nothing


def test_nul_characters_are_invalid_body_not_500(server, api, user) -> None:
    """schemathesis (stateful): a folder name with U+0000 answered 500 (PostgreSQL text cannot hold NUL)."""
    c = api(user.token(write=True))
    err(c.post("/api/v1/folders", json={"name": "a\u0000b"}), 400, "invalid_body")
    err(c.post("/api/v1/ingest", json={"kind": "text", "text": "x\u0000y"}), 400, "invalid_body")
    err(c.post("/api/v1/ingest", json={"kind": "text", "text": "xy", "title": "t\u0000"}), 400, "invalid_body")
    r = c.post("/api/v1/ingest", json={"kind": "url", "url": "http://fuzz.invalid/\u0000"})
    assert r.status_code == 400 and r.json()["error"] in {"invalid_body", "ingest_failed"}, r.text
    err(c.get("/api/v1/search", params={"q": "a\u0000b", "mode": "keyword"}), 400, "invalid_body")
    err(c.get("/api/v1/search", params={"q": "a\u0000b"}), 400, "invalid_body")
    assert c.get("/api/v1/folders").json()["folders"] == []


def test_nul_in_request_path_does_not_lose_activity(server, api, user, admin) -> None:
    """A request path with %00 put a NUL into the activity entry, and PostgreSQL refused the whole batch."""
    import time

    tok = user.token()
    c = api(tok)
    err(c.get("/api/v1/nope%00here"), 404, "not_found")
    assert c.get("/api/v1/folders").status_code == 200
    deadline = time.monotonic() + 15
    methods: list[str] = []
    while time.monotonic() < deadline:
        methods = [r[0] for r in admin.sql("SELECT method FROM activity WHERE user_id = :u", u=user.id)]
        if any(m.startswith("GET /api/v1/folders") for m in methods):
            break
        time.sleep(0.2)
    assert any(m.startswith("GET /api/v1/folders") for m in methods), methods
