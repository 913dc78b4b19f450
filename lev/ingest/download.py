"""Media URLs (PDF, audio, video) downloaded through the SSRF guard into a private temp file, size-capped and
sniffed."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import httpx

from lev.core.errors import ingest_failed
from lev.ingest.media import MAX_UPLOAD_BYTES, SNIFF_HEAD, normalize_mime, pick_mime, read_head, sniff_matches
from lev.net.guard import USER_AGENT, guarded_client, open_url
from lev.plumbing.ports import Outbound

DOWNLOAD_TIMEOUT_SEC = 300


async def download(outbound: Outbound, url: str, kind: str) -> tuple[Path, str, str]:
    """A media URL (a PDF, audio or video) fetched into a private temp file of at most 50 MB whose leading
    bytes match its type: (path, MIME type, final URL). The caller deletes the file."""
    fd, name = tempfile.mkstemp(prefix="lev-dl-")
    os.close(fd)
    local = Path(name)
    try:
        async with asyncio.timeout(DOWNLOAD_TIMEOUT_SEC), guarded_client(
            outbound, httpx.Timeout(60.0, connect=10.0), {"User-Agent": USER_AGENT}
        ) as client, open_url(client, url) as resp:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
                raise ingest_failed("the file is larger than 50 MB")
            total = 0
            fh = await asyncio.to_thread(local.open, "wb")
            try:
                async for piece in resp.aiter_bytes():
                    total += len(piece)
                    if total > MAX_UPLOAD_BYTES:
                        raise ingest_failed("the file is larger than 50 MB")
                    await asyncio.to_thread(fh.write, piece)
            finally:
                fh.close()
            ctype = normalize_mime(resp.headers.get("content-type", ""))
            final = str(resp.url)
        mime = pick_mime(ctype, final, kind)
        head = await asyncio.to_thread(read_head, local, SNIFF_HEAD)
        if not head:
            raise ingest_failed("the URL served an empty file")
        if not sniff_matches(mime, head):
            what = {"pdf": "PDF", "audio": "audio file", "video": "video file"}.get(kind, kind)
            raise ingest_failed(f"the URL did not serve a valid {what} ({ctype or 'no content type'})")
        return local, mime, final
    except TimeoutError:
        _remove(local)
        raise ingest_failed(f"the download took longer than {DOWNLOAD_TIMEOUT_SEC} s") from None
    except BaseException:
        _remove(local)
        raise


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
