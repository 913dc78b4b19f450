"""The few REST calls `lev sync` makes, to any Lev (its public API alone): the files kept by their path under a
folder (GET /api/v1/source-files), one file sent through the upload handshake with its path (signed URL, PUT,
finalize with `source_path`), an item deleted. Busy answers (429, 502-504, a dropped connection) are waited out
and tried again; what the server refuses for one file (400, 413, 415, 422) is that file's, the rest go on;
anything else (a bad token, a server that is no Lev) stops the run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TRIES = 5
TIMEOUT = httpx.Timeout(300.0, connect=30.0)
PAGE = 1000


class SyncError(Exception):
    """The run cannot go on (no such server, a bad token, an unexpected answer)."""


class FileRefused(Exception):
    """The server refused one file (its type, its size, its bytes); `code` is its error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Remote:
    """A file the library keeps by its path."""

    path: str
    sha256: str
    item_id: str


class Client:
    """An authenticated client of one Lev; counts the requests that change something (`writes`)."""

    def __init__(self, url: str, token: str, *, transport: httpx.BaseTransport | None = None,
                 pause: float = 1.0) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
                                 timeout=TIMEOUT, transport=transport, follow_redirects=False)
        # the bytes go to the signed URL without the token (its signature is the credential; S3 takes no other)
        self.bare = httpx.Client(timeout=TIMEOUT, transport=transport, follow_redirects=False)
        self.pause = pause
        self.writes = 0

    def close(self) -> None:
        self.http.close()
        self.bare.close()

    def _call(self, method: str, url: str, *, body: Any = None, bare: bool = False, **kwargs: Any) -> httpx.Response:
        """One request, tried again while the server is busy or away for a moment."""
        http = self.bare if bare else self.http
        for attempt in range(TRIES):
            if method != "GET":
                self.writes += 1
            try:
                if hasattr(body, "seek"):
                    body.seek(0)
                r = http.request(method, url, content=body, **kwargs)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                if attempt + 1 == TRIES:
                    raise SyncError(f"{method} {url}: {exc}") from None
                time.sleep(self.pause * 2 ** attempt)
                continue
            if r.status_code in (429, 502, 503, 504) and attempt + 1 < TRIES:
                wait = r.headers.get("retry-after", "")
                time.sleep(min(float(wait), 60.0) if wait.isdigit() else self.pause * 2 ** attempt)
                continue
            return r
        raise AssertionError("unreachable")

    def _json(self, r: httpx.Response, what: str) -> dict[str, Any]:
        if r.status_code in (400, 413, 415, 422):
            body = _body(r)
            raise FileRefused(str(body.get("error") or r.status_code), str(body.get("message") or r.text[:300]))
        if r.status_code >= 300:
            body = _body(r)
            reason = body.get("message") or body.get("error") or r.text[:300] or r.reason_phrase
            raise SyncError(f"{what}: HTTP {r.status_code}: {reason}")
        try:
            found: dict[str, Any] = r.json()
        except ValueError:
            raise SyncError(f"{what}: the answer is not JSON (is {self.http.base_url} a Lev?)") from None
        return found

    def files(self, prefix: str) -> Iterator[Remote]:
        """Every file kept by its path under `prefix`, in byte order of their paths."""
        after: str | None = None
        while True:
            params = {"prefix": prefix, "limit": PAGE, **({"after": after} if after is not None else {})}
            page = self._json(self._call("GET", "/api/v1/source-files", params=params), "listing the files")
            for f in page["files"]:
                yield Remote(f["path"], f["sha256"], f["item_id"])
            after = page.get("next_after")
            if after is None:
                return

    def upload(self, local: Path, *, mime: str, source_path: str) -> dict[str, Any]:
        """Send one file through the upload handshake, kept at `source_path`; the finalize answer."""
        size = local.stat().st_size
        signed = self._json(self._call("POST", "/api/v1/uploads/signed-url",
                                       json={"mime": mime, "size": size, "filename": local.name}), "signing an upload")
        with local.open("rb") as fh:
            put = self._call(signed.get("method", "PUT"), signed["signed_url"], body=fh, bare=True,
                             headers={**signed.get("headers", {}), "Content-Length": str(size)})
        if put.status_code >= 300:  # Lev's own store answers JSON, S3 an empty 200
            self._json(put, "sending the bytes")
        done = self._json(self._call("POST", f"/api/v1/uploads/{signed['finalize_endpoint']}", json={
            "path": signed["path"], "mime": mime, "size": size, "filename": local.name,
            "source_path": source_path}), "finishing the upload")
        return done

    def delete_item(self, item_id: str) -> None:
        r = self._call("DELETE", f"/api/v1/items/{item_id}")
        if r.status_code != 404:  # already gone is what was wanted
            self._json(r, "deleting an item")


def _body(r: httpx.Response) -> dict[str, Any]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
