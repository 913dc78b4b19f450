"""The reconciler finds acknowledged work whose job is gone: here a ready item's transform, queued when the item
became ready and lost with Redis's data since (it never ran: `transformed_at` is null)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from lev.store import contents as content_store
from lev.tasks import housekeeping
from tests.stack import Admin

TEXT = ("Lighthouse keepers logged the weather every four hours. The logbooks recorded wind, visibility and the "
        "state of the sea. Historians now read them to reconstruct old storms along the coast. ") * 4


def outputs(c: Any, item_id: str) -> list[dict[str, Any]]:
    r = c.get(f"/api/v1/items/{item_id}")
    assert r.status_code == 200, r.text
    return list(r.json()["outputs"])


def wait_outputs(c: Any, item_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 300
    while not (found := outputs(c, item_id)):
        assert time.monotonic() < deadline, "no outputs"
        time.sleep(0.3)
    return found


def untransformed(admin: Admin) -> list[str]:
    settled = datetime.now(UTC) - timedelta(seconds=housekeeping.RECONCILE_GRACE_SEC)
    ids = admin.run(lambda s: content_store.untransformed(s, settled, settled - housekeeping.TRANSFORM_WINDOW))
    return [str(i) for i in ids]


def test_a_ready_items_lost_transform_is_queued_again_within_a_day(api, user, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    r = c.post("/api/v1/ingest", json={"kind": "text", "title": "Keepers' logs", "text": TEXT, "auto_transform": True})
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    item = r.json()["user_item_id"]
    kinds = sorted(o["kind"] for o in wait_outputs(c, item))
    assert item not in untransformed(admin)  # transformed: nothing to do

    # as if Redis lost the queued transform: it never ran, the item saved a minute ago
    admin.sql("DELETE FROM outputs WHERE item_id = :i", i=item)
    admin.sql("UPDATE user_items SET created_at = now() - interval '1 minute', transformed_at = NULL WHERE id = :i",
              i=item)
    assert item in untransformed(admin)
    assert admin.run_coro(housekeeping.reconcile_unfinished(admin.job_ctx())) >= 1
    assert sorted(o["kind"] for o in wait_outputs(c, item)) == kinds  # the server's worker ran it, once
    assert item not in untransformed(admin)

    # an item saved more than a day ago is left alone (a transform failing for good is not tried forever), and so
    # is one that did not ask for transforms
    admin.sql("DELETE FROM outputs WHERE item_id = :i", i=item)
    admin.sql("UPDATE user_items SET created_at = now() - interval '2 days', transformed_at = NULL WHERE id = :i",
              i=item)
    assert item not in untransformed(admin)
    admin.sql("UPDATE user_items SET created_at = now() - interval '1 minute', auto_transform = false WHERE id = :i",
              i=item)
    assert item not in untransformed(admin)


def test_a_transform_that_produced_nothing_is_not_queued_again(api, user, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    """A text too short for a summary gets no outputs; its transform ran all the same, so the reconciler does not
    run it again every minute (nor log that it did)."""
    c = api(user.token(write=True))
    r = c.post("/api/v1/ingest", json={"kind": "text", "title": "Scrap", "text": "Hm.", "auto_transform": True})
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    item = r.json()["user_item_id"]
    deadline = time.monotonic() + 300
    while not admin.sql("SELECT transformed_at FROM user_items WHERE id = :i", i=item)[0][0]:
        assert time.monotonic() < deadline, "the transform did not run"
        time.sleep(0.3)
    assert outputs(c, item) == []
    admin.sql("UPDATE user_items SET created_at = now() - interval '1 minute' WHERE id = :i", i=item)
    assert item not in untransformed(admin)


def test_a_recapture_makes_the_items_transform_due_again(api, user, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    """A re-capture drops the outputs of the old text: the item's transform has not run on the new one."""
    from lev.store import captures

    c = api(user.token(write=True))
    item = c.post("/api/v1/ingest", json={"kind": "text", "text": TEXT, "auto_transform": False}).json()
    admin.sql("UPDATE user_items SET transformed_at = now() WHERE id = :i", i=item["user_item_id"])
    content = admin.sql("SELECT content_id FROM user_items WHERE id = :i", i=item["user_item_id"])[0][0]
    admin.run(lambda s: captures.repoint_item(s, uuid.UUID(item["user_item_id"]), content))
    assert admin.sql("SELECT transformed_at FROM user_items WHERE id = :i", i=item["user_item_id"])[0][0] is None
