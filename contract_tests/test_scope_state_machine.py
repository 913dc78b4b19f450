"""A hypothesis state machine over users, folders, items, memberships and tokens (capabilities, folder scope,
kb_only, revocation, folder deletion with and without cascade) that drives the live service over HTTP.

After every step, for every token, what it can list (GET /items), get (GET /items/{id}), search (keyword search
for each item's unique word) and list_recent (MCP) equals exactly what the reference model allows; every
refused call carries the documented error."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from contract_tests.conftest import FUZZ_EXAMPLES, count_case, examples
from tests.stack import Admin, User, new_user


@dataclass
class MItem:
    id: str
    user: int
    word: str
    in_kb: bool
    folders: set[str] = field(default_factory=set)


@dataclass
class MToken:
    secret: str
    id: uuid.UUID
    user: int
    write: bool
    folders: set[str] | None  # None = whole library
    kb_only: bool
    revoked: bool = False

    def sees(self, item: MItem) -> bool:
        if item.user != self.user:
            return False
        if self.folders is not None and not (item.folders & self.folders):
            return False
        return not (self.kb_only and not item.in_kb)


def _err(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, (status, code, r.status_code, r.text)
    assert r.json()["error"] == code, r.text


class ScopeMachine(RuleBasedStateMachine):
    """Reference model vs the live service. Class attributes `base` and `admin` are set by the test."""

    base: str = ""
    admin: Admin | None = None

    def __init__(self) -> None:
        super().__init__()
        self.http = httpx.Client(base_url=self.base, timeout=120)
        self.users: list[User] = []
        self.folders: dict[str, int] = {}  # folder id -> user index
        self.items: dict[str, MItem] = {}
        self.gone: list[str] = []  # deleted item ids: must be 404 for everyone
        self.tokens: list[MToken] = []

    def teardown(self) -> None:
        self.http.close()

    # --- plumbing ----------------------------------------------------------------------------------------

    def req(self, tok: MToken, method: str, path: str, **kw: Any) -> httpx.Response:
        count_case("state machine requests")
        return self.http.request(method, f"/api/v1{path}", headers={"Authorization": f"Bearer {tok.secret}"}, **kw)

    def mcp(self, tok: MToken, name: str, arguments: dict[str, Any]) -> httpx.Response:
        count_case("state machine requests")
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        return self.http.post("/api/mcp", content=json.dumps(msg), headers={
            "Authorization": f"Bearer {tok.secret}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})

    def mint(self, user: int, *, write: bool, folders: list[str] | None, kb_only: bool) -> MToken:
        from lev.auth.policy import mint
        from lev.limits.tiers import Tiers
        from lev.store import users

        email = self.users[user].email

        async def go(s: Any) -> tuple[str, uuid.UUID]:
            row = await users.by_email(s, email)
            return await mint(s, row, "sm", write=write, folder_ids=[uuid.UUID(f) for f in folders or []],
                                     kb_only=kb_only, expires_in_days=30, write_cap=0,
                                     tiers=Tiers({"free": 0, "pro": -1}, {}))

        assert self.admin is not None
        secret, token_id = self.admin.run(go)
        tok = MToken(secret, token_id, user, write, set(folders) if folders else None, kb_only)
        self.tokens.append(tok)
        return tok

    def live(self) -> list[MToken]:
        return [t for t in self.tokens if not t.revoked]

    def owner(self, user: int) -> MToken:
        """The user's whole-library write token (never revoked)."""
        return next(t for t in self.tokens if t.user == user and t.folders is None and t.write and not t.kb_only)

    # --- set-up and rules --------------------------------------------------------------------------------

    @initialize()
    def two_users(self) -> None:
        assert self.admin is not None
        for i in range(2):
            self.users.append(new_user(self.admin))
            self.mint(i, write=True, folders=None, kb_only=False)

    @rule(user=st.integers(0, 1))
    def create_folder(self, user: int) -> None:
        r = self.req(self.owner(user), "POST", "/folders", json={"name": f"f-{uuid.uuid4().hex[:8]}"})
        assert r.status_code == 201, r.text
        self.folders[r.json()["id"]] = user

    @rule(data=st.data(), user=st.integers(0, 1), write=st.booleans(), kb_only=st.booleans())
    def mint_token(self, data: st.DataObject, user: int, write: bool, kb_only: bool) -> None:
        own = sorted(f for f, u in self.folders.items() if u == user)
        chosen = data.draw(st.lists(st.sampled_from(own), unique=True, max_size=3)) if own else []
        self.mint(user, write=write, folders=chosen or None, kb_only=kb_only)

    @precondition(lambda self: any(t.folders is not None or not t.write or t.kb_only for t in self.live()))
    @rule(data=st.data())
    def revoke_token(self, data: st.DataObject) -> None:
        candidates = [t for t in self.live() if t is not self.owner(t.user)]
        tok = data.draw(st.sampled_from(candidates))
        assert self.admin is not None
        # as `lev token revoke` does: the revocation, then a new auth epoch, so no process serves it from its
        # principal cache (a bare store call would be seen only when the cache entry ends)
        assert self.admin.sql("UPDATE tokens SET revoked_at = now() WHERE id = :t AND revoked_at IS NULL "
                              "RETURNING id", t=tok.id)
        tok.revoked = True

    @rule(data=st.data(), in_kb=st.booleans())
    def ingest(self, data: st.DataObject, in_kb: bool) -> None:
        tok = data.draw(st.sampled_from(self.live()))
        word = f"zq{uuid.uuid4().hex[:12]}"
        r = self.req(tok, "POST", "/ingest", json={"kind": "text", "text": f"A note about {word} and more.",
                                                    "in_kb": in_kb, "auto_transform": False})
        if not tok.write:
            _err(r, 403, "capability_denied")
            return
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "ready"
        single = next(iter(tok.folders)) if tok.folders is not None and len(tok.folders) == 1 else None
        assert body["folder_id"] == single, (body, tok.folders)
        self.items[body["user_item_id"]] = MItem(body["user_item_id"], tok.user, word, in_kb,
                                                 {single} if single else set())

    @precondition(lambda self: bool(self.items) and bool(self.folders))
    @rule(data=st.data())
    def add_membership(self, data: st.DataObject) -> None:
        tok = data.draw(st.sampled_from(self.live()))
        item = self.items[data.draw(st.sampled_from(sorted(self.items)))]
        targets = data.draw(st.lists(st.sampled_from(sorted(self.folders)), min_size=1, max_size=3, unique=True))
        r = self.req(tok, "POST", f"/items/{item.id}/folders", json={"folder_ids": targets})
        if not tok.write:
            return _err(r, 403, "capability_denied")
        if not tok.sees(item):
            return _err(r, 404, "not_found")
        missing = [f for f in targets if self.folders[f] != tok.user]
        if missing:
            _err(r, 404, "folder_not_found")
            assert sorted(r.json()["missing"]) == sorted(missing)
            return
        if tok.folders is not None and len(tok.folders) == 1:
            return _err(r, 403, "forbidden_scope")
        outside = [f for f in targets if tok.folders is not None and f not in tok.folders]
        if outside:
            _err(r, 403, "forbidden_scope")
            assert sorted(r.json()["out_of_scope"]) == sorted(outside)
            return
        assert r.status_code == 200, r.text
        item.folders |= set(targets)
        visible = item.folders if tok.folders is None else item.folders & tok.folders
        assert sorted(r.json()["folder_ids"]) == sorted(visible)

    @precondition(lambda self: bool(self.items) and bool(self.folders))
    @rule(data=st.data())
    def remove_membership(self, data: st.DataObject) -> None:
        tok = data.draw(st.sampled_from(self.live()))
        item = self.items[data.draw(st.sampled_from(sorted(self.items)))]
        pool = sorted(item.folders) or sorted(self.folders)
        folder = data.draw(st.sampled_from(pool))
        r = self.req(tok, "DELETE", f"/items/{item.id}/folders/{folder}")
        if not tok.write:
            return _err(r, 403, "capability_denied")
        if (tok.folders is not None and folder not in tok.folders) or not tok.sees(item) \
                or folder not in item.folders:
            return _err(r, 404, "not_found")
        assert r.status_code == 200, r.text
        item.folders.discard(folder)

    @precondition(lambda self: bool(self.items))
    @rule(data=st.data())
    def delete_item(self, data: st.DataObject) -> None:
        tok = data.draw(st.sampled_from(self.live()))
        item = self.items[data.draw(st.sampled_from(sorted(self.items)))]
        r = self.req(tok, "DELETE", f"/items/{item.id}")
        if not tok.write:
            return _err(r, 403, "capability_denied")
        if not tok.sees(item):
            return _err(r, 404, "not_found")
        assert r.status_code == 200 and r.json() == {"id": item.id, "deleted": True}, r.text
        del self.items[item.id]
        self.gone.append(item.id)

    @precondition(lambda self: bool(self.folders))
    @rule(data=st.data(), cascade=st.booleans())
    def delete_folder(self, data: st.DataObject, cascade: bool) -> None:
        tok = data.draw(st.sampled_from(self.live()))
        folder = data.draw(st.sampled_from(sorted(self.folders)))
        r = self.req(tok, "DELETE", f"/folders/{folder}", params={"cascade_items": str(cascade).lower()})
        if not tok.write:
            return _err(r, 403, "capability_denied")
        if tok.folders is not None:
            return _err(r, 403, "forbidden_scope")
        if self.folders[folder] != tok.user:
            return _err(r, 404, "not_found")
        assert r.status_code == 200, r.text
        doomed = [i for i in self.items.values() if cascade and i.folders == {folder}]
        assert r.json() == {"id": folder, "deleted": True, "items_deleted": len(doomed)}
        for i in doomed:
            del self.items[i.id]
            self.gone.append(i.id)
        for i in self.items.values():
            i.folders.discard(folder)
        del self.folders[folder]
        for t in self.tokens:
            if t.folders is not None and folder in t.folders:
                t.folders.discard(folder)
                if not t.folders:
                    t.revoked = True  # deleting a scoped token's last in-scope folder revokes it

    # --- the invariant -----------------------------------------------------------------------------------

    @invariant()
    def every_token_sees_exactly_its_scope(self) -> None:
        if not self.users:
            return
        for tok in self.tokens:
            if tok.revoked:
                _err(self.req(tok, "GET", "/items"), 401, "invalid_token")
                r = self.mcp(tok, "list_recent", {})
                assert r.status_code == 401 and r.json()["error"]["code"] == -32600, r.text
                continue
            expected = {i.id for i in self.items.values() if tok.sees(i)}
            r = self.req(tok, "GET", "/items", params={"per_page": 100})
            assert r.status_code == 200, r.text
            assert {i["id"] for i in r.json()["items"]} == expected
            assert r.json()["total"] == len(expected)
            folders = {f["id"] for f in self.req(tok, "GET", "/folders").json()["folders"]}
            assert folders == {f for f, u in self.folders.items() if u == tok.user
                               and (tok.folders is None or f in tok.folders)}
            recent = self.mcp(tok, "list_recent", {"limit": 100}).json()
            assert {i["id"] for i in recent["result"]["structuredContent"]["items"]} == expected, recent
            for item in self.items.values():
                got = self.req(tok, "GET", f"/items/{item.id}")
                if item.id in expected:
                    assert got.status_code == 200 and got.json()["id"] == item.id, got.text
                else:
                    _err(got, 404, "not_found")
                found = self.req(tok, "GET", "/search", params={"q": item.word, "mode": "keyword"})
                assert found.status_code == 200, found.text
                hits = {h["item_id"] for h in found.json()["results"]}
                assert hits == ({item.id} if item.id in expected and item.in_kb else set()), (item, tok, hits)
            for gone in self.gone[-3:]:
                _err(self.req(tok, "GET", f"/items/{gone}"), 404, "not_found")


def test_scope_state_machine(server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    ScopeMachine.base = server.url
    ScopeMachine.admin = admin
    ScopeMachine.TestCase.settings = settings(
        max_examples=examples(0.25, floor=3, cap=150), stateful_step_count=min(25, max(8, FUZZ_EXAMPLES // 4)),
        deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
    )
    ScopeMachine.TestCase().runTest()
