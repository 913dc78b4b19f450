"""Every kind of validation error is said in words in REST `message` (issue 51): the field or parameter named,
what it must be, and never the value sent (a password, a secret); the web's forms show the same words."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.api.test_rest_foundation import err

SECRET = "Zq7#pw"  # a short password: refused, never quoted back


def test_each_kind_of_body_error_is_said_in_words(server, api, user) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    cases = [
        ("too short", lambda: httpx.post(f"{server.url}/api/account/signup",
                                         json={"email": f"{uuid.uuid4().hex}@example.com", "password": SECRET}),
         "Password must be at least 8 characters long."),
        ("too long", lambda: c.post("/api/v1/folders", json={"name": "x" * 201}),
         "Name must be at most 200 characters long (it has 201)."),
        ("pattern", lambda: c.post("/api/v1/feeds", json={"url": "ftp://example.org/feed",
                                                          "folder_id": str(uuid.uuid4())}),
         "URL must be an http or https URL"),
        ("type", lambda: c.post("/api/v1/folders", json={"name": 7}), "Name must be text (a JSON string)."),
        ("required", lambda: c.post("/api/v1/folders", json={}), "Name is required."),
        ("additionalProperties", lambda: c.post("/api/v1/folders", json={"name": "A", "colour": "red"}),
         "Unknown field: colour; this operation does not take it"),
        ("format", lambda: c.post("/api/v1/items/bulk-delete", json={"ids": ["zz"]}), "IDs (ids[0]) must be an id"),
        ("minItems", lambda: c.post("/api/v1/items/bulk-delete", json={"ids": []}), "IDs must not be empty"),
    ]
    for kind, send, words in cases:
        body = err(send(), 400, "invalid_body")
        assert body["message"].startswith(words), (kind, body)
        assert SECRET not in body["message"] and "'" not in body["message"][:40], (kind, body)


def test_each_kind_of_parameter_error_is_said_in_words(server, api, user) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token())
    items = "/api/v1/items"
    cases = [
        ("enum", lambda: c.get("/api/v1/search", params={"q": "boats", "mode": "psychic"}),
         "The mode parameter must be one of: hybrid, semantic, keyword."),
        ("type", lambda: c.get(items, params={"per_page": "x"}), "The per_page parameter must be a whole number."),
        ("minimum", lambda: c.get(items, params={"per_page": 0}), "The per_page parameter must be at least 1."),
        ("maximum", lambda: c.get(items, params={"per_page": 10**6}), "The per_page parameter must be at most 100."),
        ("required", lambda: c.get("/api/v1/search"), "The q parameter is required."),
        ("extra", lambda: c.get("/api/v1/folders", params={"colour": "red"}),
         "Unknown query parameter: colour; this operation does not take it."),
        ("pattern", lambda: c.get("/api/v1/search", params={"q": "   "}), "The q parameter needs a character that is"),
        ("too long", lambda: c.get("/api/v1/search", params={"q": "b" * 2001}),
         "The q parameter must be at most 2000 characters long (it has 2001)."),
    ]
    for kind, send, words in cases:
        body = err(send(), 400, "invalid_body")
        assert body["message"].startswith(words), (kind, body)


@pytest.mark.parametrize("field", ["current_password", "new_password"])
def test_a_password_change_never_quotes_either_password(server, field) -> None:  # type: ignore[no-untyped-def]
    c = httpx.Client(base_url=server.url, timeout=60)
    email = f"{uuid.uuid4().hex}@example.com"
    r = c.post("/api/account/signup", json={"email": email, "password": "a long enough password"})
    assert r.status_code == 201, r.text
    body = {"current_password": "a long enough password", "new_password": "another long one", field: SECRET * 200}
    r = c.post("/api/account/password", json=body, headers={"X-CSRF-Token": r.json()["csrf_token"]})
    message = err(r, 400, "invalid_body")["message"]
    assert SECRET not in message and message.startswith(field.replace("_", " ").capitalize()), message
