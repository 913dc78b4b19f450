"""Every JSON body sent without a Content-Type is read as JSON (issue 32): the account API answers a 4xx with the
documented `{error, message}` like /api/v1 does (sign-up and sign-in answered 500: the handler got bytes)."""

from __future__ import annotations

import uuid

import httpx

from lev.core.contract import operations
from tests.stack import User


def test_a_json_body_without_content_type_is_read_as_json_on_every_operation(server, user: User) -> None:
    email = f"c{uuid.uuid4().hex[:10]}@example.com"
    bare = httpx.Client(base_url=server.url, timeout=60)
    r = bare.post("/api/account/signup", content=f'{{"email": "{email}", "password": "a long enough password"}}')
    assert r.status_code == 201 and r.json()["email"] == email, r.text
    csrf = r.json()["csrf_token"]
    r = httpx.post(f"{server.url}/api/account/login", content=f'{{"email": "{email}", "password": "wrong password"}}')
    assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", r.text
    r = bare.post("/api/account/password", content='{"current_password": "a long enough password", "new_password": 1}',
                  headers={"X-CSRF-Token": csrf})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text

    bearer = httpx.Client(base_url=server.url, timeout=60,
                          headers={"Authorization": f"Bearer {user.token(write=True)}"})
    seen = 0
    for op in operations().values():
        body = op["operation"].get("requestBody", {}).get("content", {})
        if "application/json" not in body:
            continue
        path = op["path"].replace("{id}", str(uuid.uuid4())).replace("{folderId}", str(uuid.uuid4()))
        for client in (bare, bearer):
            headers = {"X-CSRF-Token": csrf} if client is bare else {}
            r = client.request(op["method"], path, content=b'{"unexpected": true}', headers=headers)
            assert 400 <= r.status_code < 500, (op["method"], path, r.status_code, r.text[:300])
            assert r.json()["error"] and "message" in r.json(), (path, r.text[:300])
            seen += 1
    assert seen >= 20
