"""Read state and progress on the live server: PATCH /items/{id} {read, progress} (read_at kept from the first time
it was marked read), the `read` list filter, item.updated naming exactly the fields that changed (signed, valid
against the spec), no event for a change that changes nothing, reads on every surface (MCP above all) leaving the
reading state alone, a shared folder's member refused, bad values refused and nothing changed."""

from __future__ import annotations

import time

from tests.fixtures_feeds import WebhookReceiver
from tests.mcp.test_mcp import call
from tests.sharing.test_sharing_api import share
from tests.stack import Admin, User, new_user
from tests.tags.test_tags_api import err, note, ok
from tests.webhooks.test_webhooks import add_hook, check, of_type


def test_read_and_progress_with_their_filter(api, user: User) -> None:
    c = api(user.token(write=True))
    first, second = note(c, "The first note to read."), note(c, "The second note to read.")
    fresh = ok(c.get(f"/api/v1/items/{first}"))
    assert fresh["read_at"] is None and fresh["progress"] == 0
    half = ok(c.patch(f"/api/v1/items/{first}", json={"progress": 0.5}))
    assert half["progress"] == 0.5 and half["read_at"] is None
    done = ok(c.patch(f"/api/v1/items/{first}", json={"read": True, "progress": 1}))
    assert done["read_at"] is not None and done["progress"] == 1
    time.sleep(0.05)
    again = ok(c.patch(f"/api/v1/items/{first}", json={"read": True}))
    assert again["read_at"] == done["read_at"]  # when it was first marked read
    read = {i["id"] for i in ok(c.get("/api/v1/items", params={"read": "true"}))["items"]}
    unread = {i["id"] for i in ok(c.get("/api/v1/items", params={"read": "false"}))["items"]}
    assert first in read and first not in unread and second in unread and second not in read
    back = ok(c.patch(f"/api/v1/items/{first}", json={"read": False}))
    assert back["read_at"] is None and back["progress"] == 1  # marked unread, the place is kept
    assert ok(c.patch(f"/api/v1/items/{second}", json={"progress": 0.3333333}))["progress"] == 0.3333


def test_bad_reading_values_are_refused_and_change_nothing(api, user: User) -> None:
    c = api(user.token(write=True))
    item = note(c, "A note.")
    ok(c.patch(f"/api/v1/items/{item}", json={"progress": 0.25}))
    for body in ({"progress": 1.5}, {"progress": -0.1}, {"progress": "half"}, {"progress": True}, {"read": "yes"},
                 {"read": None}, {}):
        err(c.patch(f"/api/v1/items/{item}", json=body), 400, "invalid_body")
    got = ok(c.get(f"/api/v1/items/{item}"))
    assert got["progress"] == 0.25 and got["read_at"] is None
    err(api(user.token()).patch(f"/api/v1/items/{item}", json={"read": True}), 403, "capability_denied")


def test_item_updated_names_what_changed(api, user: User) -> None:
    receiver = WebhookReceiver()
    try:
        c = api(user.token(write=True, kb_only=False))
        hook = add_hook(c, receiver.url, ["item.updated"])
        item = note(c, "A note to read.", title="Before")
        ok(c.patch(f"/api/v1/items/{item}", json={"progress": 0.4}))
        ok(c.patch(f"/api/v1/items/{item}", json={"progress": 0.4}))  # the same value: nothing changed, no event
        ok(c.patch(f"/api/v1/items/{item}", json={"read": True, "title": "After"}))
        ok(c.patch(f"/api/v1/items/{item}", json={"read": True}))  # read already: no event
        ok(c.patch(f"/api/v1/items/{item}", json={"archived": True}))
        got = receiver.wait_for(of_type("item.updated", 3))
        bodies = [check(d, hook["secret"])["data"] for d in got]
        assert [b["changed"] for b in bodies] == [["progress"], ["title", "read_at"], ["archived"]]
        assert bodies[0]["progress"] == 0.4 and bodies[0]["read_at"] is None
        assert bodies[1]["title"] == "After" and bodies[1]["read_at"] is not None
        time.sleep(1)
        assert len(receiver.deliveries) == 3
    finally:
        receiver.close()


def test_reads_never_change_the_reading_state(api, server, user: User) -> None:
    token = user.token(write=True)
    c = api(token)
    item = note(c, "Tide pools hold anemones and hermit crabs between the high and low water marks.")
    ok(c.patch(f"/api/v1/items/{item}", json={"progress": 0.4}))
    before = ok(c.get(f"/api/v1/items/{item}"))
    for tool, args in (("get_item", {"item_id": item}), ("get_item", {"item_id": item, "offset": 40}),
                       ("search_knowledge_base", {"query": "tide pools anemones"}), ("list_recent", {})):
        result = call(server, token, tool, args)["result"]
        assert not result.get("isError"), result
    got = call(server, token, "get_item", {"item_id": item})["result"]["structuredContent"]
    assert got["progress"] == 0.4 and got["read_at"] is None
    ok(c.get("/api/v1/search", params={"q": "tide pools"}))
    assert c.get(f"/api/v1/items/{item}/markdown").status_code == 200
    after = ok(c.get(f"/api/v1/items/{item}"))
    assert (after["progress"], after["read_at"], after["updated_at"]) == (0.4, None, before["updated_at"])


def test_a_shared_folders_member_cannot_change_the_owners_reading_state(api, admin: Admin) -> None:
    owner, member = new_user(admin), new_user(admin)
    folder = owner.folder("Shared reading")
    o, m = api(owner.token(write=True, kb_only=False)), api(member.token(write=True, kb_only=False))
    share(o, folder, member, m, "editor")
    item = note(o, "The owner's article.", folder_id=folder)
    for body in ({"read": True}, {"progress": 0.9}):
        err(m.patch(f"/api/v1/items/{item}", json=body), 403, "forbidden_scope")
    got = ok(m.get(f"/api/v1/items/{item}"))
    assert got["read_at"] is None and got["progress"] == 0
    err(m.patch("/api/v1/items/00000000-0000-4000-8000-000000000000", json={"read": True}), 404, "not_found")
