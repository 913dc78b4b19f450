"""Object storage: local signed PUT URLs and capped writes; the S3 adapter against moto on loopback."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from lev.core.settings import get_settings
from lev.runtime import get_object_store
from lev.store.objects import (
    InvalidObjectPath,
    LocalObjectStore,
    S3ObjectStore,
    SignatureError,
    SizeExceeded,
    check_path,
    load_or_create_secret,
    path_user_id,
    safe_filename,
)

SECRET = b"k" * 32
PDF = b"%PDF-1.4\n" + b"x" * 1000


@pytest.fixture
def local(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", SECRET)


def parse_signed(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    prefix = "/api/v1/uploads/put/"
    assert parts.path.startswith(prefix)
    return unquote(parts.path[len(prefix):]), {k: v[0] for k, v in parse_qs(parts.query).items()}


async def chunks_of(data: bytes, size: int = 100) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_new_path_shape_and_sanitising(local: LocalObjectStore) -> None:
    path = local.new_path("user-1", "../../etc/My Report (final).pdf")
    assert check_path(path) == path
    parts = path.split("/")
    assert parts[0] == "uploads" and parts[1] == "user-1" and len(parts[2]) == 32
    assert parts[3] == "My_Report_final_.pdf"
    assert path_user_id(path) == "user-1"
    assert local.new_path("user-1", "a.pdf") != local.new_path("user-1", "a.pdf")
    assert safe_filename("...") == "file" and safe_filename(".bashrc") == "bashrc"
    bad_paths = ("uploads/u/../../etc/passwd", "/etc/passwd", "uploads/u/abc/x.pdf",
                 "objects/u/" + "a" * 32 + "/x")
    for bad in bad_paths:
        with pytest.raises(InvalidObjectPath):
            check_path(bad)
        assert path_user_id(bad) is None


def test_signed_url_verifies(local: LocalObjectStore) -> None:
    path = local.new_path("u1", "doc.pdf")
    url = local.signed_put_url(path, 1234, "application/pdf", expires_in=600, base_url="http://lev.test/")
    assert url.startswith("http://lev.test/api/v1/uploads/put/uploads/u1/")
    got_path, q = parse_signed(url)
    assert got_path == path and q["size"] == "1234" and q["mime"] == "application/pdf"
    local.verify(got_path, q["size"], q["mime"], q["expires"], q["sig"])


@pytest.mark.parametrize("field", ["sig", "size", "mime", "path", "expires"])
def test_tampered_signed_url_is_refused(local: LocalObjectStore, field: str) -> None:
    path = local.new_path("u1", "doc.pdf")
    _, q = parse_signed(local.signed_put_url(path, 1234, "application/pdf"))
    args = {"path": path, "size": q["size"], "mime": q["mime"], "expires": q["expires"], "sig": q["sig"]}
    args[field] = {
        "sig": q["sig"][:-1] + ("0" if q["sig"][-1] != "0" else "1"),
        "size": "1235",
        "mime": "image/png",
        "path": local.new_path("u2", "doc.pdf"),
        "expires": str(int(q["expires"]) + 3600),
    }[field]
    with pytest.raises(SignatureError):
        local.verify(**args)


def test_expired_and_foreign_key_urls_are_refused(local: LocalObjectStore, tmp_path: Path) -> None:
    path = local.new_path("u1", "doc.pdf")
    _, q = parse_signed(local.signed_put_url(path, 10, "application/pdf", expires_in=-1))
    with pytest.raises(SignatureError, match="expired"):
        local.verify(path, q["size"], q["mime"], q["expires"], q["sig"])
    other = LocalObjectStore(tmp_path, b"z" * 32)
    _, q = parse_signed(other.signed_put_url(path, 10, "application/pdf"))
    with pytest.raises(SignatureError):
        local.verify(path, q["size"], q["mime"], q["expires"], q["sig"])
    with pytest.raises(SignatureError):
        local.verify(path, "ten", q["mime"], q["expires"], q["sig"])


async def test_write_stat_head_copy_delete(local: LocalObjectStore) -> None:
    path = local.new_path("u1", "doc.pdf")
    assert await local.stat(path) is None
    assert await local.write_stream(path, chunks_of(PDF), len(PDF)) == len(PDF)
    assert await local.stat(path) == len(PDF)
    assert await local.read_head(path, 8) == PDF[:8]
    assert await local.read_head(path) == PDF[:64]
    copy = await local.local_copy(path)
    try:
        assert copy.read_bytes() == PDF and copy != local.root / path
    finally:
        copy.unlink()
    assert await local.stat(path) == len(PDF)  # removing the copy leaves the object
    await local.delete(path)
    await local.delete(path)  # idempotent
    assert await local.stat(path) is None
    assert not (local.root / path).parent.exists()
    with pytest.raises(FileNotFoundError):
        await local.local_copy(path)


async def test_write_over_declared_size_aborts_and_leaves_nothing(local: LocalObjectStore) -> None:
    path = local.new_path("u1", "doc.pdf")
    consumed = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal consumed
        for _ in range(10_000):
            consumed += 1
            yield b"x" * 100

    with pytest.raises(SizeExceeded):
        await local.write_stream(path, endless(), 1000)
    assert consumed == 11  # stopped at the first chunk past the cap
    assert await local.stat(path) is None
    assert [p for p in (local.root / path).parent.iterdir()] == []


async def test_short_write_is_kept_for_finalize_to_judge(local: LocalObjectStore) -> None:
    path = local.new_path("u1", "doc.pdf")
    assert await local.write_stream(path, chunks_of(PDF[:500]), len(PDF)) == 500
    assert await local.stat(path) == 500


def test_secret_is_created_once_with_private_mode(tmp_path: Path) -> None:
    first = load_or_create_secret(tmp_path / "data")
    key = tmp_path / "data" / "signing.key"
    assert len(first) == 32 and key.read_bytes() == first
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_or_create_secret(tmp_path / "data") == first
    assert load_or_create_secret(tmp_path / "data", "configured-secret") == b"configured-secret"
    assert sorted(os.listdir(tmp_path / "data")) == ["signing.key"]


def test_get_object_store_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    try:
        monkeypatch.setenv("LEV_DATA_DIR", str(tmp_path))
        monkeypatch.setenv("LEV_OBJECT_STORE", "local")
        monkeypatch.setenv("LEV_UPLOAD_SECRET", "s3cret-value")
        get_settings.cache_clear()
        get_object_store.cache_clear()
        store = get_object_store()
        assert isinstance(store, LocalObjectStore) and store.root == tmp_path / "objects"
        path = store.new_path("u", "a.png")
        _, q = parse_signed(store.signed_put_url(path, 5, "image/png"))
        same_key = LocalObjectStore(tmp_path, b"s3cret-value")
        same_key.verify(path, 5, "image/png", q["expires"], q["sig"])
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        get_object_store.cache_clear()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


async def test_s3_presigned_put_then_stat_head_copy_delete(moto_endpoint: str) -> None:
    s3 = S3ObjectStore("lev-test", moto_endpoint, "us-east-1", "testing", "testing")
    s3._client.create_bucket(Bucket="lev-test")
    path = s3.new_path("u1", "doc.pdf")
    assert await s3.stat(path) is None
    url = s3.signed_put_url(path, len(PDF), "application/pdf", expires_in=600)
    assert url.startswith(moto_endpoint + "/lev-test/uploads/u1/") and "X-Amz-Signature=" in url
    async with httpx.AsyncClient() as client:
        response = await client.put(url, content=PDF, headers={"Content-Type": "application/pdf"})
    assert response.status_code == 200, response.text
    assert await s3.stat(path) == len(PDF)
    assert await s3.read_head(path, 16) == PDF[:16]
    copy = await s3.local_copy(path)
    try:
        assert copy.read_bytes() == PDF
    finally:
        copy.unlink()
    await s3.delete(path)
    await s3.delete(path)
    assert await s3.stat(path) is None
    with pytest.raises(FileNotFoundError):
        await s3.local_copy(path)
