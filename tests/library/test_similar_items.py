"""GET /api/v1/items/{id}/similar: nearest items by chunk similarity, under search's scope and kb_only rules."""

from __future__ import annotations

import uuid

import httpx

from tests.stack import new_user

BIRDS = "Grey herons wade in shallow wetlands, stalking fish and frogs with their long sharp bills."
BIRDS_2 = "Egrets and herons are wading birds of marshes; they hunt fish in shallow water at dawn."
DATABASES = "PostgreSQL uses write-ahead logging and MVCC so concurrent transactions never block readers."
COOKING = "Knead the bread dough for ten minutes, let it rise for an hour, then bake it at 220 degrees."


def err(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"] == code


def ingest(c: httpx.Client, text: str, **extra: object) -> str:
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": text, "auto_transform": False, **extra})
    assert r.status_code == 200, r.text
    return str(r.json()["user_item_id"])


def file_into(c: httpx.Client, item: str, folder: str) -> None:
    assert c.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [folder]}).status_code == 200


def test_similar_items_rank_by_content_and_skip_duplicates(server, api, user, admin) -> None:
    w = api(user.token(write=True, kb_only=False))
    birds = ingest(w, BIRDS, title="Herons")
    birds2 = ingest(w, BIRDS_2, title="Wading birds")
    db = ingest(w, DATABASES, title="Postgres")
    cook = ingest(w, COOKING, title="Bread")
    pasted_again = ingest(w, BIRDS, title="Herons again")  # same text, its own content record: a duplicate
    # another item of the very same content (what a second save of one URL is)
    same_content = str(uuid.uuid4())
    admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived, status) "
              "SELECT :id, user_id, content_id, kind, 'Herons copy', true, false, 'ready' FROM user_items "
              "WHERE id = :src", id=same_content, src=birds)

    r = w.get(f"/api/v1/items/{birds}/similar")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["item_id"] == birds
    ids = [h["item_id"] for h in body["results"]]
    assert ids[0] == birds2, body
    assert set(ids) == {birds2, db, cook}
    assert birds not in ids and pasted_again not in ids and same_content not in ids
    sims = [h["similarity"] for h in body["results"]]
    assert sims == sorted(sims, reverse=True) and -1 <= sims[-1] <= sims[0] <= 1
    assert body["results"][0] == {"item_id": birds2, "title": "Wading birds", "url": None, "kind": "text",
                                  "similarity": sims[0]}
    assert [h["item_id"] for h in w.get(f"/api/v1/items/{birds}/similar", params={"limit": 1}).json()["results"]] \
        == [birds2]

    # like search, items kept out of the knowledge base are never suggested
    admin.sql("UPDATE user_items SET in_kb = false WHERE id = :i", i=birds2)
    assert birds2 not in [h["item_id"] for h in w.get(f"/api/v1/items/{birds}/similar").json()["results"]]


def test_similar_items_respect_scope(server, api, user, admin) -> None:
    w = api(user.token(write=True))
    inside, outside = user.folder("Inside"), user.folder("Outside")
    a, b, c = ingest(w, BIRDS), ingest(w, BIRDS_2), ingest(w, DATABASES)
    file_into(w, a, inside)
    file_into(w, c, inside)
    file_into(w, b, outside)
    scoped = api(user.token(folders=[inside]))
    r = scoped.get(f"/api/v1/items/{a}/similar")
    assert r.status_code == 200, r.text
    assert [h["item_id"] for h in r.json()["results"]] == [c]  # the nearer heron item is out of scope
    # an item outside the scope, another user's item and an unknown id are the same 404
    err(scoped.get(f"/api/v1/items/{b}/similar"), 404, "not_found")
    stranger = api(new_user(admin).token())
    err(stranger.get(f"/api/v1/items/{a}/similar"), 404, "not_found")
    err(scoped.get(f"/api/v1/items/{uuid.uuid4()}/similar"), 404, "not_found")
    # a kb_only token cannot start from an item kept out of the knowledge base
    hidden = ingest(w, COOKING, in_kb=False)
    err(api(user.token()).get(f"/api/v1/items/{hidden}/similar"), 404, "not_found")
    assert api(user.token(kb_only=False)).get(f"/api/v1/items/{hidden}/similar").status_code == 200


def test_similar_items_bad_input(server, api, user) -> None:
    c = api(user.token())
    item = str(uuid.uuid4())
    err(c.get("/api/v1/items/not-a-uuid/similar"), 400, "invalid_id")
    for bad in ("0", "51", "ten"):
        err(c.get(f"/api/v1/items/{item}/similar", params={"limit": bad}), 400, "invalid_body")
    err(api(None).get(f"/api/v1/items/{item}/similar"), 401, "missing_bearer_token")
    err(c.post(f"/api/v1/items/{item}/similar"), 405, "method_not_allowed")
