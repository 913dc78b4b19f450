"""The upload handshake over HTTP against the live server: signed URL, PUT, finalize-document, errors, cleanup."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from PIL import Image

from lev.tasks import housekeeping
from tests import fixtures_media as fm


def sign(c: Any, mime: str, size: int, filename: str) -> httpx.Response:
    return c.post("/api/v1/uploads/signed-url", json={"mime": mime, "size": size, "filename": filename})


def put(signed: dict[str, Any], data: bytes, content_type: str | None = None) -> httpx.Response:
    """The byte upload: no bearer header, only the signed URL."""
    mime = content_type or signed["headers"]["Content-Type"]
    return httpx.put(signed["signed_url"], content=data, headers={"Content-Type": mime}, timeout=60)


def finalize(c: Any, signed: dict[str, Any], mime: str, size: int, filename: str, **extra: Any) -> httpx.Response:
    return c.post(f"/api/v1/uploads/{signed['finalize_endpoint']}",
                  json={"path": signed["path"], "mime": mime, "size": size, "filename": filename, **extra})


def upload(c: Any, path: Path, mime: str, filename: str | None = None, **extra: Any) -> tuple[dict[str, Any],
                                                                                                httpx.Response]:
    """The whole handshake for one file; returns the signed-URL answer and the finalize response."""
    data = fm.file_bytes(path)
    name = filename or path.name
    r = sign(c, mime, len(data), name)
    assert r.status_code == 200, r.text
    signed = r.json()
    r = put(signed, data)
    assert r.status_code == 200, r.text
    assert r.json() == {"path": signed["path"], "size": len(data)}
    return signed, finalize(c, signed, mime, len(data), name, **extra)


def wait_item(c: Any, item_id: str, done: Any, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        item = c.get(f"/api/v1/items/{item_id}").json()
        if done(item) or time.monotonic() > deadline:
            return item
        time.sleep(0.2)


def object_file(data_dir: Path, path: str) -> Path:
    return data_dir / "objects" / path


def search_ids(c: Any, q: str, mode: str = "hybrid") -> list[str]:
    r = c.get("/api/v1/search", params={"q": q, "mode": mode, "limit": 10})
    assert r.status_code == 200, r.text
    return [hit["item_id"] for hit in r.json()["results"]]




@pytest.fixture
def local_jobs(data_dir: Path) -> None:
    """Let this process run job functions against the session's stack (same data dir, fresh settings)."""
    from lev.core.settings import get_settings
    from lev.runtime import get_object_store

    get_settings.cache_clear()
    get_object_store.cache_clear()


def test_signed_url_answer_and_errors(server, api, user) -> None:
    c = api(user.token(write=True))
    r = sign(c, "application/pdf", 1234, "Report (final).pdf")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["finalize_endpoint"] == "finalize-document" and body["method"] == "PUT"
    assert body["path"].startswith(f"uploads/{user.id}/") and body["path"].endswith("/Report_final_.pdf")
    assert body["signed_url"].startswith(server.url + "/api/v1/uploads/put/" + body["path"] + "?")
    assert sign(c, "audio/wav", 10, "a.wav").json()["finalize_endpoint"] == "finalize"
    assert sign(c, "video/mp4", 10, "a.mp4").json()["finalize_endpoint"] == "finalize"

    r = sign(c, "application/pdf", 52428801, "big.pdf")
    assert r.status_code == 413 and r.json()["error"] == "file_too_large" and r.json()["maxBytes"] == 52428800
    assert sign(c, "application/pdf", 52428800, "max.pdf").status_code == 200
    for mime in ("application/x-msdownload", "application/x-sh", "application/zip"):
        r = sign(c, mime, 100, "x.bin")
        assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type", mime
    for bad in ({"mime": "application/pdf", "size": 0, "filename": "a.pdf"}, {"mime": "application/pdf"},
                {"mime": "application/pdf", "size": 5, "filename": ""},
                {"mime": "application/pdf", "size": 5, "filename": "a", "extra": 1},
                {"mime": "application/pdf", "size": 5, "filename": "a\u0000b.pdf"}):
        r = c.post("/api/v1/uploads/signed-url", json=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (bad, r.text)
    r = sign(api(user.token()), "application/pdf", 10, "a.pdf")
    assert r.status_code == 403 and r.json()["error"] == "capability_denied"
    assert sign(api(None), "application/pdf", 10, "a.pdf").status_code == 401


def test_pdf_and_png_through_the_handshake_are_searchable(server, api, user, tmp_path) -> None:
    c = api(user.token(write=True))
    pdf = fm.make_text_pdf(tmp_path / "almanac.pdf", [
        "The lighthouse almanac lists the flashing pattern of every beacon along the granite coast.",
        "Keepers trimmed the wicks at dusk and recorded barometric pressure in a leather logbook.",
        "Fog signals used compressed air horns that could be heard twelve nautical miles away.",
    ], title="Lighthouse Almanac")
    signed, r = upload(c, pdf, "application/pdf", auto_transform=False)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "ready" and res["folder_id"] is None
    assert set(res) == {"status", "content_id", "user_item_id", "folder_id"}
    item = c.get(f"/api/v1/items/{res['user_item_id']}").json()
    assert item["kind"] == "pdf" and item["status"] == "ready" and item["title"] == "Lighthouse Almanac"
    assert item["metadata"]["page_count"] == 3 and item["metadata"]["mime"] == "application/pdf"
    assert "barometric pressure" in item["text"]
    assert res["user_item_id"] in search_ids(c, "keepers trimmed wicks logbook")
    assert res["user_item_id"] in search_ids(c, "compressed air fog horns", mode="keyword")

    png = fm.make_text_png(tmp_path / "sign.png", ["Harbour closed during storms", "Ferry departs at noon"])
    _, r = upload(c, png, "image/png", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    img_id = r.json()["user_item_id"]
    item = c.get(f"/api/v1/items/{img_id}").json()
    assert item["kind"] == "image" and item["metadata"]["width"] == 1000 and item["metadata"]["height"] > 100
    assert "ferry" in item["text"].lower()
    assert img_id in search_ids(c, "ferry departs noon")


def test_put_checks_signature_type_and_size(server, api, user, data_dir) -> None:
    c = api(user.token(write=True))
    data = b"%PDF-1.4\n" + b"x" * 91
    signed = sign(c, "application/pdf", len(data), "a.pdf").json()
    url = signed["signed_url"]
    parts = urlsplit(url)
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}

    def with_query(**changes: str) -> str:
        return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode({**q, **changes})}"

    for bad in (with_query(sig="0" * 64), with_query(size=str(len(data) + 5)), with_query(mime="image/png"),
                with_query(expires=str(int(q["expires"]) + 60)), with_query(expires="1")):
        mime = "image/png" if "image%2Fpng" in bad else "application/pdf"
        r = httpx.put(bad, content=data, headers={"Content-Type": mime})
        assert r.status_code == 403 and r.json()["error"] == "invalid_signature", (bad, r.text)
    r = httpx.put(url.split("?")[0], content=data, headers={"Content-Type": "application/pdf"})
    assert r.status_code == 403 and r.json()["error"] == "invalid_signature"
    r = put(signed, data, content_type="image/png")
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"
    r = put(signed, data + b"more")
    assert r.status_code == 413 and r.json()["error"] == "file_too_large" and r.json()["maxBytes"] == len(data)

    def chunked():  # no Content-Length: the streaming cap must stop it
        yield data
        yield b"overflow"

    r = httpx.put(url, content=chunked(), headers={"Content-Type": "application/pdf"})
    assert r.status_code == 413 and r.json()["error"] == "file_too_large"
    assert not object_file(data_dir, signed["path"]).exists()
    r = put(signed, data)
    assert r.status_code == 200 and object_file(data_dir, signed["path"]).read_bytes() == data


def test_finalize_errors_change_nothing(server, api, user, admin, data_dir, tmp_path) -> None:
    from tests.stack import new_user

    c = api(user.token(write=True))
    count = "SELECT count(*) FROM user_items WHERE user_id = :u"
    before = admin.sql(count, u=user.id)[0][0]

    # an executable declared as a PNG: the PUT accepts the bytes, finalize sniffs them and discards them
    exe = fm.file_bytes(fm.make_exe(tmp_path / "evil.exe"))
    signed = sign(c, "image/png", len(exe), "cat.png").json()
    assert put(signed, exe).status_code == 200
    r = finalize(c, signed, "image/png", len(exe), "cat.png")
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type", r.text
    assert not object_file(data_dir, signed["path"]).exists()
    assert admin.sql("SELECT count(*) FROM uploads WHERE path = :p", p=signed["path"])[0][0] == 0

    # fewer bytes than declared
    pdf = fm.file_bytes(fm.make_text_pdf(tmp_path / "s.pdf", ["short document about otters"]))
    signed = sign(c, "application/pdf", len(pdf) + 10, "s.pdf").json()
    assert put(signed, pdf).status_code == 200
    r = finalize(c, signed, "application/pdf", len(pdf) + 10, "s.pdf")
    assert r.status_code == 422 and r.json()["error"] == "size_mismatch", r.text
    r = finalize(c, signed, "application/pdf", len(pdf), "s.pdf")
    assert r.status_code == 422 and r.json()["error"] == "size_mismatch", r.text

    # signed but never uploaded; a path issued to someone else; a path never issued
    signed = sign(c, "application/pdf", len(pdf), "never.pdf").json()
    r = finalize(c, signed, "application/pdf", len(pdf), "never.pdf")
    assert r.status_code == 422 and r.json()["error"] == "object_missing"
    other = api(new_user(admin).token(write=True))
    theirs = sign(other, "application/pdf", len(pdf), "theirs.pdf").json()
    assert put(theirs, pdf).status_code == 200
    r = finalize(c, theirs, "application/pdf", len(pdf), "theirs.pdf")
    assert r.status_code == 422 and r.json()["error"] == "object_missing"
    fake = {"path": f"uploads/{user.id}/{uuid.uuid4().hex}/x.pdf", "finalize_endpoint": "finalize-document"}
    r = finalize(c, fake, "application/pdf", len(pdf), "x.pdf")
    assert r.status_code == 422 and r.json()["error"] == "object_missing"
    r = finalize(c, {**fake, "path": "../../etc/passwd"}, "application/pdf", 5, "x.pdf")
    assert r.status_code in (400, 422)

    # the wrong finalize endpoint says which one to call
    good = sign(c, "application/pdf", len(pdf), "good.pdf").json()
    assert put(good, pdf).status_code == 200
    r = finalize(c, {**good, "finalize_endpoint": "finalize"}, "application/pdf", len(pdf), "good.pdf")
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    assert "/api/v1/uploads/finalize-document" in r.json()["message"]
    r = finalize(c, good, "image/png", len(pdf), "good.pdf")
    assert r.status_code == 422 and r.json()["error"] == "mime_mismatch"  # not the MIME it was signed for
    assert "image/png differs from the application/pdf" in r.json()["message"]
    r = finalize(c, good, "application/pdf", 52428801, "good.pdf")
    assert r.status_code == 413 and r.json()["error"] == "file_too_large" and r.json()["maxBytes"] == 52428800
    r = finalize(c, good, "application/pdf", len(pdf), "good.pdf", title="nul\u0000title")
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    r = finalize(api(user.token()), good, "application/pdf", len(pdf), "good.pdf")
    assert r.status_code == 403 and r.json()["error"] == "capability_denied"

    # a corrupt PDF: 422 and nothing kept
    bad = fm.file_bytes(fm.make_corrupt_pdf(tmp_path / "corrupt.pdf"))
    signed = sign(c, "application/pdf", len(bad), "corrupt.pdf").json()
    assert put(signed, bad).status_code == 200
    # (other test files' jobs may add items to this shared server meanwhile: count what this refusal could leave)
    def left() -> tuple[int, int]:
        orphans = admin.sql("SELECT count(*) FROM contents c WHERE NOT EXISTS "
                            "(SELECT 1 FROM user_items i WHERE i.content_id = c.id)")[0][0]
        return orphans, admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0]

    kept = left()
    r = finalize(c, signed, "application/pdf", len(bad), "corrupt.pdf")
    assert r.status_code == 422 and r.json()["error"] == "extraction_failed", r.text
    assert not object_file(data_dir, signed["path"]).exists()
    assert admin.sql("SELECT count(*) FROM contents WHERE object_path = :p", p=signed["path"])[0][0] == 0
    assert left() == kept

    # a decompression bomb is refused
    bomb = fm.make_bomb_png(tmp_path / "bomb.png")
    _, r = upload(c, bomb, "image/png")
    assert r.status_code == 422 and r.json()["error"] == "extraction_failed", r.text

    assert admin.sql(count, u=user.id)[0][0] == before
    # the good upload still finalizes
    r = finalize(c, good, "application/pdf", len(pdf), "good.pdf", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text


def test_finalize_is_idempotent_and_auto_files(server, api, user, admin, tmp_path) -> None:
    folder = user.folder("Scans")
    c = api(user.token(write=True, folders=[folder]))
    pdf = fm.make_text_pdf(tmp_path / "menu.pdf", ["Seaside cafe menu: chowder, crab cakes and lemon tart."])
    signed, r = upload(c, pdf, "application/pdf", auto_transform=False)
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["folder_id"] == folder and first["status"] == "ready"
    size = pdf.stat().st_size
    for _ in range(2):
        again = finalize(c, signed, "application/pdf", size, "menu.pdf")
        assert again.status_code == 200 and again.json() == first
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0] == 1
    assert admin.sql("SELECT item_id FROM uploads WHERE path = :p", p=signed["path"])[0][0] == \
        uuid.UUID(first["user_item_id"])
    # the signed URL no longer accepts bytes once finalized
    r = put(signed, b"%PDF-1.4 overwritten")
    assert r.status_code == 403 and r.json()["error"] == "invalid_signature"


def test_scanned_pdf_is_finished_by_the_worker(server, api, user, tmp_path) -> None:
    c = api(user.token(write=True))
    pages = []
    for words in (["Quarterly tide report"], ["Spring tides flood the marsh"], ["Neap tides expose mudflats"]):
        page = Image.new("RGB", (1275, 1650), "white")
        page.paste(fm.text_image(words, size=44, width=1100), (80, 120))
        pages.append(page)
    path = tmp_path / "scan.pdf"
    pages[0].save(path, format="PDF", resolution=150.0, save_all=True, append_images=pages[1:])
    _, r = upload(c, path, "application/pdf", auto_transform=False)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "processing"
    item = wait_item(c, res["user_item_id"], lambda i: i["status"] != "processing", timeout=120)
    assert item["status"] == "ready", item.get("error")
    assert item["metadata"]["ocr_pages"] == 3 and "mudflats" in item["text"].lower()
    assert res["user_item_id"] in search_ids(c, "neap tides mudflats")


def test_delete_drains_the_object(server, api, user, admin, data_dir, tmp_path, local_jobs) -> None:
    c = api(user.token(write=True))
    pdf = fm.make_text_pdf(tmp_path / "gone.pdf", ["A document that will be deleted shortly after upload."])
    signed, r = upload(c, pdf, "application/pdf", auto_transform=False)
    assert r.status_code == 200
    obj = object_file(data_dir, signed["path"])
    assert obj.exists()
    assert c.delete(f"/api/v1/items/{r.json()['user_item_id']}").status_code == 200
    queued = "SELECT count(*) FROM object_deletions WHERE path = :p"
    # removed later, by the drain (the server's own cron may already have run it)
    assert admin.sql(queued, p=signed["path"])[0][0] == 1 or not obj.exists()
    admin.run_coro(housekeeping.drain_object_deletions(admin.job_ctx()))
    assert not obj.exists() and admin.sql(queued, p=signed["path"])[0][0] == 0
    r = finalize(c, signed, "application/pdf", pdf.stat().st_size, "gone.pdf")
    assert r.status_code == 422 and r.json()["error"] == "object_missing"


def test_drain_retries_until_gone(server, admin, data_dir, local_jobs) -> None:
    blocked = f"uploads/x/{uuid.uuid4().hex}/stuck.pdf"
    target = object_file(data_dir, blocked)
    target.mkdir(parents=True)  # a directory where a file is expected: unlink fails
    admin.sql("INSERT INTO object_deletions (path, attempts) VALUES (:p, 0)", p=blocked)
    admin.run_coro(housekeeping.drain_object_deletions(admin.job_ctx()))
    row = admin.sql("SELECT attempts, last_error FROM object_deletions WHERE path = :p", p=blocked)[0]
    assert row[0] >= 1 and row[1]  # the server's cron drain may have tried too
    target.rmdir()
    admin.run_coro(housekeeping.drain_object_deletions(admin.job_ctx()))
    assert admin.sql("SELECT count(*) FROM object_deletions WHERE path = :p", p=blocked)[0][0] == 0


def test_unfinalized_uploads_expire_after_24h(server, api, user, admin, data_dir, monkeypatch, local_jobs) -> None:
    c = api(user.token(write=True))
    data = fm.file_bytes(fm.make_text_pdf(data_dir / f"{uuid.uuid4().hex}.pdf", ["abandoned upload"]))
    signed = sign(c, "application/pdf", len(data), "abandoned.pdf").json()
    assert put(signed, data).status_code == 200
    obj = object_file(data_dir, signed["path"])
    admin.sql("UPDATE uploads SET created_at = now() - interval '23 hours' WHERE path = :p", p=signed["path"])
    admin.run_coro(housekeeping.expire_uploads(admin.job_ctx()))
    assert obj.exists()
    assert admin.sql("SELECT count(*) FROM uploads WHERE path = :p", p=signed["path"])[0][0] == 1
    monkeypatch.setenv("LEV_CLOCK_OFFSET_SEC", str(2 * 3600))  # the service clock two hours later
    admin.run_coro(housekeeping.expire_uploads(admin.job_ctx()))
    assert not obj.exists()
    assert admin.sql("SELECT count(*) FROM uploads WHERE path = :p", p=signed["path"])[0][0] == 0
    r = finalize(c, signed, "application/pdf", len(data), "abandoned.pdf")
    assert r.status_code == 422 and r.json()["error"] == "object_missing"


def test_twenty_page_pdf_timing(server, api, user, tmp_path) -> None:
    """Measured: upload + finalize of a 20-page text PDF until it is searchable (printed with -s)."""
    c = api(user.token(write=True))
    pages = [f"Page {i}: chapter on the maritime history of harbour number {i}, its pilots, cargo manifests, "
             f"customs duties and the storms recorded by the harbour master in year {1800 + i}.\n" * 3
             for i in range(1, 21)]
    pdf = fm.make_text_pdf(tmp_path / "history.pdf", pages)
    started = time.perf_counter()
    _, r = upload(c, pdf, "application/pdf", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    assert r.json()["user_item_id"] in search_ids(c, "harbour master customs duties cargo manifests")
    elapsed = time.perf_counter() - started
    print(f"\n20-page text PDF searchable in {elapsed:.2f} s")
    assert elapsed < 60
