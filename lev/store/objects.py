"""Object storage for uploads behind `ObjectStore`: local files with HMAC-signed PUT URLs, or S3.

The local store serves the signed URL itself (`PUT {base_url}/api/v1/uploads/put/{path}?...`): the
route calls `verify` and then `write_stream`, which enforces the declared size as a hard cap. The S3
store hands out presigned PUT URLs bound to Content-Type and Content-Length. `local_copy` always
returns a private temporary file that the caller deletes when done.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import re
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PATH = re.compile(r"^uploads/[A-Za-z0-9_-]{1,64}/[0-9a-f]{32}/[A-Za-z0-9._-]{1,120}$")


class SignatureError(Exception):
    """A signed upload URL is malformed, tampered with, or expired."""


class SizeExceeded(Exception):
    """More bytes arrived than the upload declared."""


class InvalidObjectPath(ValueError):
    """A path that `new_path` could not have produced (traversal, wrong shape)."""


class ObjectStore(Protocol):
    """Where uploaded bytes live between the signed PUT and processing (and until the item is deleted)."""
    def new_path(self, user_id: str, filename: str) -> str: ...

    def signed_put_url(self, path: str, size: int, mime: str, expires_in: int = 3600,
                       base_url: str | None = None) -> str: ...

    async def stat(self, path: str) -> int | None: ...

    async def read_head(self, path: str, n: int = 64) -> bytes: ...

    async def local_copy(self, path: str) -> Path: ...

    async def delete(self, path: str) -> None: ...

    async def ping(self) -> None: ...

    async def list_paths(self) -> list[str]: ...

    async def put_file(self, path: str, local: Path, mime: str | None = None) -> None: ...

    def read_location(self, path: str, mime: str, expires_in: int = 900) -> Path | str:
        """Where a client reads the object: a local file the service sends itself, or a presigned GET URL."""
        ...

    def browser_origin(self) -> str | None:
        """The origin a browser sends uploads to and reads media from when it is not the service's own (S3)."""
        ...


def safe_filename(filename: str) -> str:
    """A filename reduced to `[A-Za-z0-9._-]`, no leading dots, at most 120 characters."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    name = _SAFE.sub("_", name).strip("._") or "file"
    if len(name) > 120:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: 119 - len(ext)] + "." + ext) if dot and len(ext) <= 16 else name[:120]
    return name


def new_object_path(user_id: str, filename: str) -> str:
    """`uploads/<user_id>/<uuid4 hex>/<safe filename>`."""
    user = _SAFE.sub("_", str(user_id)).replace(".", "_")[:64] or "anonymous"
    return f"uploads/{user}/{uuid.uuid4().hex}/{safe_filename(filename)}"


def check_path(path: str) -> str:
    """Return `path` when it has the shape `new_object_path` produces, else raise InvalidObjectPath."""
    if not isinstance(path, str) or not _PATH.match(path) or ".." in path.split("/"):
        raise InvalidObjectPath(f"invalid object path: {path!r}")
    return path


def path_user_id(path: str) -> str | None:
    """The user segment of a valid object path (to check that a client names its own upload)."""
    try:
        return check_path(path).split("/")[1]
    except InvalidObjectPath:
        return None


def _temp_copy_target(suffix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix="lev-obj-", suffix=suffix)
    os.close(fd)
    return Path(name)


def load_or_create_secret(data_dir: Path, configured: str | None = None) -> bytes:
    """The upload-signing key: `configured` if given, else 32 random bytes in `<data_dir>/signing.key`."""
    if configured:
        return configured.encode()
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    key_path = data_dir / "signing.key"
    if not key_path.exists():
        tmp = data_dir / f".signing.key.{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(32))
        finally:
            os.close(fd)
        try:
            os.link(tmp, key_path)  # atomic; loses cleanly to a concurrent creator
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    secret = key_path.read_bytes()
    if len(secret) < 16:
        raise RuntimeError(f"{key_path} is too short to be a signing key")
    return secret


class LocalObjectStore:
    """Files under `root`; uploads arrive through the service's own signed PUT route."""
    def __init__(self, root: Path, secret: bytes) -> None:
        self.root = Path(root)
        self._secret = secret

    def _file(self, path: str) -> Path:
        return self.root / check_path(path)

    def _sign(self, path: str, size: int, mime: str, expires: int) -> str:
        message = f"PUT\n{path}\n{size}\n{mime}\n{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def new_path(self, user_id: str, filename: str) -> str:
        return new_object_path(user_id, filename)

    def signed_put_url(self, path: str, size: int, mime: str, expires_in: int = 3600,
                       base_url: str | None = None) -> str:
        """The service's own PUT route under `base_url` (the public address the client reached)."""
        check_path(path)
        expires = int(time.time()) + expires_in
        query = urlencode({"expires": expires, "size": size, "mime": mime,
                           "sig": self._sign(path, size, mime, expires)})
        base = (base_url or "http://127.0.0.1:8080").rstrip("/")
        return f"{base}/api/v1/uploads/put/{quote(path, safe='/')}?{query}"

    def verify(self, path: str, size: int | str, mime: str, expires: int | str, sig: str) -> None:
        """Raise SignatureError unless the URL parameters are exactly what was signed and unexpired."""
        try:
            check_path(path)
            size_i, expires_i = int(size), int(expires)
        except (InvalidObjectPath, TypeError, ValueError):
            raise SignatureError("malformed upload URL") from None
        expected = self._sign(path, size_i, mime, expires_i)
        if not isinstance(sig, str) or not hmac.compare_digest(expected, sig.lower()):
            raise SignatureError("upload URL signature does not match")
        if str(size_i) != str(size).strip() or str(expires_i) != str(expires).strip():
            raise SignatureError("malformed upload URL")
        if time.time() > expires_i:
            raise SignatureError("upload URL has expired")

    async def write_stream(self, path: str, chunks: AsyncIterator[bytes], declared_size: int) -> int:
        """Write the body to a temp file, aborting (and deleting it) past `declared_size`; then rename."""
        target = self._file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
        total = 0
        try:
            fh = await asyncio.to_thread(tmp.open, "wb")
            try:
                async for chunk in chunks:
                    total += len(chunk)
                    if total > declared_size:
                        raise SizeExceeded(f"upload exceeds the declared size of {declared_size} bytes")
                    await asyncio.to_thread(fh.write, chunk)
            finally:
                fh.close()
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return total

    async def stat(self, path: str) -> int | None:
        try:
            return self._file(path).stat().st_size
        except FileNotFoundError:
            return None

    async def read_head(self, path: str, n: int = 64) -> bytes:
        def _read() -> bytes:
            with self._file(path).open("rb") as fh:
                return fh.read(n)

        return await asyncio.to_thread(_read)

    async def local_copy(self, path: str) -> Path:
        source = self._file(path)
        if not source.is_file():
            raise FileNotFoundError(path)
        copy = _temp_copy_target(source.suffix)
        copy.unlink()
        try:
            os.link(source, copy)
        except OSError:
            await asyncio.to_thread(shutil.copyfile, source, copy)
        return copy

    async def list_paths(self) -> list[str]:
        """Every stored object's path (for backups)."""
        base = self.root / "uploads"
        if not base.is_dir():
            return []
        return sorted(str(f.relative_to(self.root)) for f in base.rglob("*")
                      if f.is_file() and not f.name.endswith(".part"))

    async def put_file(self, path: str, local: Path, mime: str | None = None) -> None:
        """Store a server-side file at `path` (downloads, restores)."""
        target = self._file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copyfile, local, target)

    def read_location(self, path: str, mime: str, expires_in: int = 900) -> Path | str:
        """The object's file on this machine (the service sends it, with byte ranges)."""
        return self._file(path)

    def browser_origin(self) -> str | None:
        return None  # uploads and media go through the service itself

    async def ping(self) -> None:
        """Raise unless the store's directory can be written."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not os.access(self.root, os.W_OK):
            raise PermissionError(f"{self.root} is not writable")

    async def delete(self, path: str) -> None:
        target = self._file(path)
        target.unlink(missing_ok=True)
        for parent in (target.parent, target.parent.parent):
            try:
                parent.rmdir()
            except OSError:
                break


class S3ObjectStore:
    """An S3-compatible bucket; clients PUT to presigned URLs bound to Content-Type and Content-Length."""
    def __init__(self, bucket: str, endpoint_url: str | None = None, region: str | None = None,
                 access_key: str | None = None, secret_key: str | None = None) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self._client: Any = boto3.client(
            "s3", endpoint_url=endpoint_url, region_name=region or "us-east-1",
            aws_access_key_id=access_key, aws_secret_access_key=secret_key,
            config=Config(signature_version="s3v4",
                          s3={"addressing_style": "path" if endpoint_url else "auto"},
                          retries={"max_attempts": 3, "mode": "standard"}),
        )

    def new_path(self, user_id: str, filename: str) -> str:
        return new_object_path(user_id, filename)

    def signed_put_url(self, path: str, size: int, mime: str, expires_in: int = 3600,
                       base_url: str | None = None) -> str:
        """A presigned S3 URL (`base_url`, the service's own address, plays no part)."""
        check_path(path)
        url: str = self._client.generate_presigned_url(
            "put_object",
            Params={"Bucket": self.bucket, "Key": path, "ContentType": mime, "ContentLength": size},
            ExpiresIn=expires_in)
        return url

    @staticmethod
    def _missing(exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("404", "NoSuchKey", "NotFound")

    async def stat(self, path: str) -> int | None:
        from botocore.exceptions import ClientError

        check_path(path)
        try:
            head = await asyncio.to_thread(self._client.head_object, Bucket=self.bucket, Key=path)
        except ClientError as exc:
            if self._missing(exc):
                return None
            raise
        return int(head["ContentLength"])

    async def read_head(self, path: str, n: int = 64) -> bytes:
        from botocore.exceptions import ClientError

        check_path(path)

        def _get() -> bytes:
            try:
                obj = self._client.get_object(Bucket=self.bucket, Key=path, Range=f"bytes=0-{max(n, 1) - 1}")
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code")) == "InvalidRange":
                    return b""  # empty object
                if self._missing(exc):
                    raise FileNotFoundError(path) from None
                raise
            with obj["Body"] as body:
                data: bytes = body.read()
            return data[:n]

        return await asyncio.to_thread(_get)

    async def local_copy(self, path: str) -> Path:
        from botocore.exceptions import ClientError

        check_path(path)
        copy = _temp_copy_target(Path(path).suffix)
        try:
            await asyncio.to_thread(self._client.download_file, self.bucket, path, str(copy))
        except ClientError as exc:
            copy.unlink(missing_ok=True)
            if self._missing(exc):
                raise FileNotFoundError(path) from None
            raise
        except BaseException:
            copy.unlink(missing_ok=True)
            raise
        return copy

    async def delete(self, path: str) -> None:
        check_path(path)
        await asyncio.to_thread(self._client.delete_object, Bucket=self.bucket, Key=path)

    async def list_paths(self) -> list[str]:
        def _list() -> list[str]:
            keys: list[str] = []
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                               Prefix="uploads/"):
                keys.extend(obj["Key"] for obj in page.get("Contents", []))
            return sorted(keys)

        return await asyncio.to_thread(_list)

    async def put_file(self, path: str, local: Path, mime: str | None = None) -> None:
        """Store a server-side file at `path` (downloads, restores)."""
        check_path(path)
        extra = {"ContentType": mime} if mime else None
        await asyncio.to_thread(self._client.upload_file, str(local), self.bucket, path, ExtraArgs=extra)

    def read_location(self, path: str, mime: str, expires_in: int = 900) -> Path | str:
        """A presigned GET URL (served with the object's MIME type) that the service redirects readers to."""
        check_path(path)
        url: str = self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": path, "ResponseContentType": mime},
            ExpiresIn=expires_in)
        return url

    def browser_origin(self) -> str | None:
        """The scheme, host and port presigned URLs point at (signing is local: nothing is sent)."""
        url = str(self._client.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "origin"},
                                                      ExpiresIn=60))
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"

    async def ping(self) -> None:
        """Raise unless the bucket answers."""
        await asyncio.to_thread(self._client.head_bucket, Bucket=self.bucket)

