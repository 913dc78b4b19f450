"""`lev backup` / `lev restore` round trip: a library with text, a web page, a PDF, an image, audio and video,
folders, tokens (one revoked) and activity, restored into an empty database and data dir, answers the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tests import fixtures_media as fm
from tests.ingest.test_uploads import search_ids, upload, wait_item
from tests.sites import Site
from tests.stack import ROOT, LiveServer


def lev(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev.cli", *args], env={**os.environ, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def snapshot(c: Any, queries: list[str]) -> dict[str, Any]:
    """Everything a client can read about the library, in a comparable form."""
    items = c.get("/api/v1/items", params={"per_page": 100}).json()
    detail = {i["id"]: c.get(f"/api/v1/items/{i['id']}").json() for i in items["items"]}
    # a hit in stored media links to the server it came from (its url holds the base URL): compare the rest
    base = str(c.client.base_url).rstrip("/")
    searches = {f"{mode}:{q}": json.loads(c.get("/api/v1/search", params={"q": q, "mode": mode, "limit": 10})
                                          .text.replace(base, "{base}"))
                for q in queries for mode in ("hybrid", "keyword", "semantic")}
    folders = c.get("/api/v1/folders").json()
    return {"items": items, "detail": detail, "searches": searches, "folders": folders}


def all_activity(c: Any) -> list[dict[str, Any]]:
    """Every activity entry the token can read, all pages (the restored server adds entries of its own)."""
    entries: list[dict[str, Any]] = []
    for page in range(1, 100):
        body = c.get("/api/v1/activity", params={"per_page": 100, "page": page}).json()
        entries += body["entries"]
        if len(body["entries"]) < 100:
            break
    return entries


def test_backup_and_restore_round_trip(server: LiveServer, api, user, admin, data_dir: Path,  # type: ignore[no-untyped-def]
                                       transcribe_stub, tmp_path: Path) -> None:
    token = user.token(write=True, kb_only=False)
    revoked = user.token(name="to-revoke")
    c = api(token)
    folder = c.post("/api/v1/folders", json={"name": "Backups"}).json()["id"]
    tag = uuid.uuid4().hex[:6]
    ids = [c.post("/api/v1/ingest", json={"kind": "text", "title": f"Note {tag}",
                                          "text": f"The lighthouse {tag} keeper logs the tides at dawn."}).json()]
    site = Site()
    try:
        ids.append(c.post("/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/volcano"}).json())
    finally:
        site.close()
    pdf = fm.make_text_pdf(tmp_path / "report.pdf", [f"Quarterly report {tag}: glaciers retreat each summer."])
    ids.append(upload(c, pdf, "application/pdf")[1].json())
    png = fm.make_text_png(tmp_path / "sign.png", [f"SIGN {tag}", "MIND THE GAP"])
    ids.append(upload(c, png, "image/png")[1].json())
    wav_name, mp4_name = f"talk-{tag}.wav", f"clip-{tag}.mp4"
    transcribe_stub.text(wav_name, f"A talk {tag} about ferries crossing the sound in winter.")
    transcribe_stub.text(mp4_name, f"A clip {tag} showing orchards in bloom.")
    ids.append(upload(c, fm.make_wav(tmp_path / wav_name, seconds=3.0), "audio/wav")[1].json())
    ids.append(upload(c, fm.make_mp4(tmp_path / mp4_name, seconds=1.0), "video/mp4")[1].json())
    item_ids = [r["user_item_id"] for r in ids]
    for item_id in item_ids:
        assert wait_item(c, item_id, lambda i: i["status"] != "processing")["status"] == "ready"
    assert c.post(f"/api/v1/items/{item_ids[0]}/folders", json={"folder_ids": [folder]}).status_code == 200
    admin.sql("UPDATE tokens SET revoked_at = now() WHERE name = 'to-revoke' AND user_id = :u", u=user.id)
    queries = [f"lighthouse {tag}", "volcano magma", f"glaciers {tag}", "ferries winter", "orchards bloom"]
    before = snapshot(c, queries)
    for _ in range(60):  # transforms (outputs) land shortly after an item is ready
        time.sleep(0.5)
        now = snapshot(c, queries)
        if now == before:
            break
        before = now
    assert before["items"]["total"] == 6
    assert item_ids[2] in search_ids(c, f"glaciers {tag}")

    # entries already listed before the backup starts are committed, so the dump must hold every one of them
    activity_committed = all_activity(c)
    backup_dir = tmp_path / "backup"
    done = lev("backup", str(backup_dir), env={"LEV_DATA_DIR": str(data_dir)})
    assert done.returncode == 0, done.stderr
    assert snapshot(c, queries) == before
    manifest = json.loads((backup_dir / "manifest.json").read_text())
    assert manifest["counts"]["user_items"] >= 6 and manifest["counts"]["tokens"] >= 2
    assert len(manifest["objects"]) >= 4 and manifest["missing_objects"] == []
    assert lev("backup", str(backup_dir), env={"LEV_DATA_DIR": str(data_dir)}).returncode != 0  # never overwrites

    # restore into an empty database (same PostgreSQL server) and an empty data dir
    from lev.embedded import resolve_urls

    base, _ = resolve_urls(None, None, data_dir)
    plain = base.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lev_restored")
        conn.execute("CREATE DATABASE lev_restored")
    new_dir = tmp_path / "restored"
    new_dir.mkdir()
    env = {"LEV_DATA_DIR": str(new_dir), "LEV_DATABASE_URL": base.replace("/lev?", "/lev_restored?", 1)}
    done = lev("restore", str(backup_dir), env=env)
    assert done.returncode == 0, done.stderr
    again = lev("restore", str(backup_dir), env=env)
    assert again.returncode != 0 and "already holds a library" in again.stderr
    from lev.embedded import redis_socket_path
    assert not redis_socket_path(new_dir).exists()  # backup and restore start no Redis (one was left running)
    for obj in manifest["objects"]:
        assert (new_dir / "objects" / obj["path"]).read_bytes() == (backup_dir / "objects" / obj["path"]).read_bytes()

    restored = LiveServer(new_dir, {**env, "LEV_RATE_LIMITS": "off", "LEV_TRANSCRIBE_URL": transcribe_stub.url},
                          log_name="restored").start()
    try:
        c2 = api(token)
        c2.client.base_url = restored.url
        after = snapshot(c2, queries)
        assert after == before
        r = c2.get("/api/v1/items", headers={"Authorization": f"Bearer {revoked}"})
        assert r.status_code == 401  # still revoked
        restored_entries = {e["id"]: e for e in all_activity(c2)}
        backed_up = activity_committed
        assert len(backed_up) > 10 and all(restored_entries.get(e["id"]) == e for e in backed_up)
        # the restored library keeps working: an upload's object is readable by a new job
        c2.post(f"/api/v1/items/{item_ids[2]}/folders", json={"folder_ids": [folder]}).raise_for_status()
    finally:
        restored.stop()
