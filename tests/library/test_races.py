"""Races between writes that reference each other's rows: the loser gets a 404 (or the winner's success),
never a 500, and the last-folder revocation holds under concurrent folder deletes.

Each race is played twice: once with a controlled interleaving (another writer holds its delete open in a
transaction while the request runs into it, then commits), and once as concurrent requests many times.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from lev.auth.policy import Scope
from tests.sites import Site
from tests.stack import ROOT, Admin, LiveServer, User, make_item, new_user


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


class Held:
    """A store transaction run on the admin's loop and held open (uncommitted) until `commit()`."""

    def __init__(self, admin: Admin, work: Callable[[Any], Awaitable[Any]]) -> None:
        from lev.store.db import database

        self.admin = admin
        self.ready = threading.Event()
        self.release = threading.Event()

        async def go() -> None:
            async with database().transaction() as s:
                await work(s)
                self.ready.set()
                await asyncio.to_thread(self.release.wait)

        self.future = asyncio.run_coroutine_threadsafe(go(), admin.loop)
        assert self.ready.wait(60), "the held transaction did not start"

    def commit(self) -> None:
        self.release.set()
        self.future.result(60)


def sql(admin: Admin, statement: str, **params: Any) -> Callable[[Any], Awaitable[None]]:
    from sqlalchemy import text

    async def work(s: Any) -> None:
        await s.execute(text(statement), params)

    return work


def run_into(admin: Admin, held: Held, call: Callable[[], httpx.Response]) -> httpx.Response:
    """Send `call` while `held` is open; once it waits on the held rows (or has answered), commit `held`."""
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(call)
        while not fut.done():
            waiting = admin.sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                "AND wait_event_type = 'Lock'")[0][0]
            if waiting:
                break
            threading.Event().wait(0.02)
        held.commit()
        return fut.result(120)


def client(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def test_membership_add_racing_item_delete_is_404(server, admin, user: User) -> None:
    f = user.folder("target")
    item = make_item(user, title="doomed")
    c = client(server, user.token(write=True))
    held = Held(admin, sql(admin, "DELETE FROM user_items WHERE id = :i", i=item))
    r = run_into(admin, held, lambda: c.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [f]}))
    assert r.status_code == 404, r.text
    assert r.json()["error"] == "not_found"
    assert admin.sql("SELECT count(*) FROM item_folders WHERE folder_id = :f", f=f)[0][0] == 0


def test_membership_add_racing_folder_delete_is_404(server, admin, user: User) -> None:
    f = user.folder("vanishing")
    item = make_item(user, title="stays")
    c = client(server, user.token(write=True))
    held = Held(admin, sql(admin, "DELETE FROM folders WHERE id = :f", f=f))
    r = run_into(admin, held, lambda: c.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [f]}))
    assert r.status_code == 404, r.text
    assert r.json() == {"error": "folder_not_found", "message": r.json()["message"], "missing": [f]}
    assert c.get(f"/api/v1/items/{item}").json()["folder_ids"] == []


def test_ingest_into_a_folder_being_deleted_is_404_and_stores_nothing(server, admin, user: User) -> None:
    f = user.folder("only")
    c = client(server, user.token(write=True, folders=[f]))
    held = Held(admin, sql(admin, "DELETE FROM folders WHERE id = :f", f=f))
    r = run_into(admin, held, lambda: c.post("/api/v1/ingest", json={"kind": "text", "text": "a note that races"}))
    assert r.status_code == 404, r.text
    assert r.json()["error"] == "not_found"
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0] == 0


def test_shared_url_ingest_racing_the_last_item_delete(server, admin, user: User, site: Site) -> None:
    """A new item on a shared page while the page's last item (and so its content) is deleted."""
    from lev.store import items as item_store

    url = site.url + "/quantum?race=" + uuid.uuid4().hex
    first = client(server, user.token(write=True)).post("/api/v1/ingest", json={
        "kind": "url", "url": url, "auto_transform": False}).json()
    c = client(server, new_user(admin).token(write=True))

    async def delete_first(s: Any) -> None:
        await item_store.delete_many(s, [uuid.UUID(first["user_item_id"])])

    held = Held(admin, delete_first)
    r = run_into(admin, held, lambda: c.post("/api/v1/ingest", json={"kind": "url", "url": url,
                                                                         "auto_transform": False}))
    assert r.status_code == 200, r.text
    got = c.get(f"/api/v1/items/{r.json()['user_item_id']}")
    assert got.status_code == 200 and got.json()["status"] == "ready"
    assert r.json()["content_id"] != first["content_id"]  # the old content went; a fresh one was fetched


def test_item_delete_racing_a_new_item_on_the_same_content_keeps_the_content(server, admin, user: User,
                                                                             site: Site) -> None:
    """The other order: a user item is added to a shared content while its last other item is deleted."""
    url = site.url + "/volcano?race=" + uuid.uuid4().hex
    c = client(server, user.token(write=True))
    first = c.post("/api/v1/ingest", json={"kind": "url", "url": url, "auto_transform": False}).json()
    content = first["content_id"]
    second_id = str(uuid.uuid4())
    held = Held(admin, sql(admin, "INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived, "
                                  "status, transcription_status, auto_transform) VALUES (:i, :u, :c, 'url', 't', "
                                  "true, false, 'ready', 'not_required', false)",
                           i=second_id, u=user.id, c=content))
    r = run_into(admin, held, lambda: c.delete(f"/api/v1/items/{first['user_item_id']}"))
    assert r.status_code == 200, r.text
    assert admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=content)[0][0] == 1
    assert c.get(f"/api/v1/items/{second_id}").json()["status"] == "ready"


def test_token_mint_with_a_folder_being_deleted_says_folder_not_found(server, admin, user: User) -> None:
    f = user.folder("minted")
    held = Held(admin, sql(admin, "DELETE FROM folders WHERE id = :f", f=f))
    env = {**server.env}

    def mint() -> httpx.Response:
        proc = subprocess.run([sys.executable, "-m", "lev.cli", "token", "create", "--user", user.email,
                               "--name", "racer", "--folder", f], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        return httpx.Response(proc.returncode, text=proc.stdout + proc.stderr)

    out = run_into(admin, held, mint)
    assert out.status_code == 2, out.text
    assert "folder_not_found" in out.text and "Traceback" not in out.text
    assert admin.sql("SELECT count(*) FROM tokens WHERE user_id = :u AND name = 'racer'", u=user.id)[0][0] == 0


def test_revocation_holds_when_two_folder_deletes_interleave(server, admin, user: User) -> None:
    from lev.store import folders as folder_store

    a, b = user.folder("a"), user.folder("b")
    scoped = user.token(folders=[a, b])
    whole = client(server, user.token(write=True))

    async def delete_a(s: Any) -> None:
        await folder_store.delete_folder(s, Scope(user.id, None), uuid.UUID(a), False)

    held = Held(admin, delete_a)
    r = run_into(admin, held, lambda: whole.delete(f"/api/v1/folders/{b}"))
    assert r.status_code == 200, r.text
    assert client(server, scoped).get("/api/v1/folders").status_code == 401


def test_concurrent_deletes_of_a_two_folder_tokens_folders_always_revoke_it(server, admin, user: User) -> None:
    whole = user.token(write=True)
    survivors = 0
    with ThreadPoolExecutor(2) as pool:
        for _ in range(20):
            a, b = user.folder(f"a{uuid.uuid4().hex[:6]}"), user.folder(f"b{uuid.uuid4().hex[:6]}")
            scoped = user.token(folders=[a, b])
            barrier = threading.Barrier(2)

            def delete(fid: str, barrier: threading.Barrier = barrier) -> int:
                with client(server, whole) as c:
                    barrier.wait()
                    return c.delete(f"/api/v1/folders/{fid}").status_code

            assert sorted(pool.map(delete, [a, b])) == [200, 200]
            if client(server, scoped).get("/api/v1/folders").status_code != 401:
                survivors += 1
    assert survivors == 0


def test_membership_writes_racing_deletes_never_answer_500(server, admin, user: User) -> None:
    whole = user.token(write=True)
    statuses: Counter[int] = Counter()

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> int:
        with client(server, whole) as c:
            return c.request(method, path, json=body).status_code

    with ThreadPoolExecutor(6) as pool:
        for _ in range(12):
            f, g = user.folder(f"f{uuid.uuid4().hex[:6]}"), user.folder(f"g{uuid.uuid4().hex[:6]}")
            item = make_item(user, folders=[g], title="raced")
            calls = [
                ("POST", f"/api/v1/items/{item}/folders", {"folder_ids": [f, g]}),
                ("POST", f"/api/v1/items/{item}/folders", {"folder_ids": [f]}),
                ("DELETE", f"/api/v1/items/{item}", None),
                ("DELETE", f"/api/v1/folders/{f}?cascade_items=true", None),
                ("DELETE", f"/api/v1/items/{item}/folders/{g}", None),
                ("DELETE", f"/api/v1/folders/{g}", None),
            ]
            statuses.update(pool.map(lambda a: call(*a), calls))
    assert statuses[500] == 0, statuses
    assert set(statuses) <= {200, 404}, statuses


# ---------------------------------------------------------------------------------------------- lock order
# Writers take row locks in one order (store/contents.py `lock_with_items`): folders, user items, contents, and
# the BM25 statistics row (the chunks trigger) last. Before that order, the two interleavings below deadlocked:
# PostgreSQL aborted one transaction after a second, and the request answered 503 unavailable.


def lock_waiters(admin: Admin) -> int:
    return int(admin.sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND wait_event_type = 'Lock'")[0][0])


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not: {what}, within {timeout} s"
        time.sleep(0.02)


def test_cascading_folder_delete_racing_an_item_delete_never_deadlocks(server, admin, user: User) -> None:
    """The folder delete removes its only-here item (contents, statistics row) and then waits for the tokens
    scoped to the folder (held here); meanwhile an item in that folder and another is deleted. The old order
    held the statistics row while waiting, so the two ended in a deadlock."""
    f, g = user.folder("dying"), user.folder("stays")
    user.token(folders=[f, g], name="held-scope")
    token = user.token(write=True)
    whole = client(server, token)
    only_here = whole.post("/api/v1/ingest", json={"kind": "text", "text": "only in the dying folder",
                                                   "folder_id": f, "auto_transform": False}).json()["user_item_id"]
    both = whole.post("/api/v1/ingest", json={"kind": "text", "text": "in two folders", "folder_id": f,
                                              "auto_transform": False}).json()["user_item_id"]
    assert whole.post(f"/api/v1/items/{both}/folders", json={"folder_ids": [g]}).status_code == 200
    held = Held(admin, sql(admin, "SELECT t.id FROM tokens t WHERE t.user_id = :u AND t.name = 'held-scope' "
                                  "FOR UPDATE", u=user.id))
    with ThreadPoolExecutor(2) as pool:
        folder_delete = pool.submit(whole.delete, f"/api/v1/folders/{f}", params={"cascade_items": "true"})
        until(lambda: lock_waiters(admin) >= 1 or folder_delete.done(), "the folder delete waits for the token")
        item_delete = pool.submit(client(server, token).delete, f"/api/v1/items/{both}")
        until(lambda: lock_waiters(admin) >= 2 or item_delete.done(), "the item delete answers or waits")
        held.commit()
        answers = [folder_delete.result(120), item_delete.result(120)]
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    assert answers[0].json()["items_deleted"] == 1
    for gone in (only_here, both):
        assert whole.get(f"/api/v1/items/{gone}").status_code == 404


def test_a_job_finishing_a_content_racing_its_item_delete_never_deadlocks(server, admin, user: User) -> None:
    """A job locks the content it finishes and then writes its items; an item delete locks the item and then its
    content. The job now locks the items first, so the delete waits for it instead of deadlocking with it."""
    from lev.ingest.plan import Chunks
    from lev.ingest.save import index_content
    from lev.store import contents as content_store
    from lev.store import lifecycle

    item = make_item(user, title="finishing")
    content = admin.sql("SELECT content_id FROM user_items WHERE id = :i", i=item)[0][0]
    admin.sql("UPDATE contents SET status = 'processing' WHERE id = :c", c=content)
    admin.sql("UPDATE user_items SET status = 'processing' WHERE id = :i", i=item)
    locked, finish, outcome = threading.Event(), threading.Event(), {}

    async def job() -> None:
        from lev.store.db import database

        try:
            async with database().transaction() as s:
                assert (await content_store.lock_with_items(s, content) or {}).get("status") == "processing"
                locked.set()
                await asyncio.to_thread(finish.wait)
                vector = [1.0] + [0.0] * 383
                ready = lifecycle.advance(lifecycle.of_content("text", "processing"), lifecycle.Event.FINISHED)
                await index_content(s, content, "finishing", Chunks(["the finished text"], [vector]), ready)
            outcome["job"] = "committed"
        except Exception as exc:
            outcome["job"] = type(exc).__name__

    future = asyncio.run_coroutine_threadsafe(job(), admin.loop)
    assert locked.wait(60)
    c = client(server, user.token(write=True))
    with ThreadPoolExecutor(1) as pool:
        deleting = pool.submit(c.delete, f"/api/v1/items/{item}")
        until(lambda: lock_waiters(admin) >= 1, "the item delete waits for the job")
        finish.set()
        future.result(120)
        answer = deleting.result(120)
    assert outcome["job"] == "committed", outcome
    assert answer.status_code == 200, answer.text
    assert admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=content)[0][0] == 0


def test_password_change_racing_the_activity_writer_never_deadlocks(server, admin) -> None:  # type: ignore[no-untyped-def]
    """The activity writer moves last_used_at in token id order; a password change revoked the user's tokens in
    table order, so each could hold a row the other waited for (a deadlock, answered 503)."""
    from sqlalchemy import text

    from lev.store.db import database

    web = httpx.Client(base_url=server.url, timeout=120)
    email = f"race{uuid.uuid4().hex[:8]}@example.com"
    r = web.post("/api/account/signup", json={"email": email, "password": "a long enough password"})
    csrf = {"X-CSRF-Token": r.json()["csrf_token"]}
    admin.sql("UPDATE users SET tier = 'pro' WHERE email = :e", e=email)
    ids: list[str] = []
    while len(ids) < 2 or uuid.UUID(ids[0]) < uuid.UUID(ids[-1]):  # the first in the table is not the first by id
        ids.append(web.post("/api/account/tokens", json={"name": f"t{len(ids)}"}, headers=csrf).json()["id"])
    first_in_table, first_by_id = ids[0], ids[-1]
    locked, go_on = threading.Event(), threading.Event()

    async def activity_writer() -> None:  # what touch_last_used does: rows in id order, in one transaction
        async with database().transaction() as s:
            await s.execute(text("UPDATE tokens SET last_used_at = now() WHERE id = :t"), {"t": first_by_id})
            locked.set()
            await asyncio.to_thread(go_on.wait)
            await s.execute(text("UPDATE tokens SET last_used_at = now() WHERE id = :t"), {"t": first_in_table})

    writer = asyncio.run_coroutine_threadsafe(activity_writer(), admin.loop)
    assert locked.wait(60)
    with ThreadPoolExecutor(1) as pool:
        change = pool.submit(web.post, "/api/account/password", headers=csrf,
                             json={"current_password": "a long enough password", "new_password": "another passphrase"})
        until(lambda: lock_waiters(admin) >= 1 or change.done(), "the password change waits for a token row")
        go_on.set()
        writer.result(60)
        r = change.result(120)
    assert r.status_code == 200 and r.json()["revoked_tokens"] == len(ids) and r.json()["ended_sessions"] >= 1, r.text
