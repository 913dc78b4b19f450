"""Fetch a web page safely (SSRF guard, bounded size and time) and extract its readable text.

Every TCP connection, including each redirect hop, goes through `_GuardedBackend`: it resolves the
host, refuses private/loopback/link-local/metadata addresses (unless LEV_ALLOW_PRIVATE_URLS) and
then connects to the very IP it checked, so DNS rebinding between check and connect is not possible.
TLS SNI and the Host header still carry the URL's host name (httpcore takes both from the URL).
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import re
import socket
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from lev.errors import ApiError, ingest_failed
from lev.settings import get_settings

MAX_BYTES = 20 * 1024 * 1024
MAX_REDIRECTS = 5
MIN_TEXT_CHARS = 200
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36 Lev/0.1 (+knowledge-base page fetcher)"
)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain"})
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})

_MEDIA_EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    **dict.fromkeys((".mp3", ".m4a", ".wav", ".ogg", ".flac", ".opus"), "audio"),
    **dict.fromkeys((".mp4", ".webm", ".mov", ".mkv"), "video"),
}
_YOUTUBE_HOSTS = frozenset({"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com"})
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPAT = ipaddress.ip_network("::/96")


class UnsupportedMedia(ApiError):
    """The URL serves a PDF, audio or video; the caller may route it to a media pipeline."""
    def __init__(self, kind: str, content_type: str) -> None:
        super().__init__("ingest_failed", "PDF/audio/video URLs are not supported yet")
        self.kind = kind
        self.content_type = content_type


@dataclass
class FetchedPage:
    url: str  # final URL after redirects
    canonical: str
    title: str | None
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    content_type: str = "text/html"


def canonical_url(url: str) -> str:
    """The URL used to share content records: no fragment, no utm_* params, no default port."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    netloc = f"{userinfo}@{host}" if userinfo else host
    # filter the raw "k=v" pairs so the kept ones stay byte-for-byte as they were
    query = "&".join(
        pair for pair in parts.query.split("&")
        if pair and not pair.split("=", 1)[0].lower().startswith("utm_")
    )
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def classify_media_url(url: str) -> str | None:
    """'youtube', 'pdf', 'audio' or 'video' when the URL itself says so, else None."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    path = parts.path
    if host == "youtu.be" and len(path) > 1:
        return "youtube"
    if host in _YOUTUBE_HOSTS and (path == "/watch" or path.startswith(("/shorts/", "/live/", "/embed/"))):
        return "youtube"
    dot = path.rfind(".")
    if dot > path.rfind("/"):
        return _MEDIA_EXTENSIONS.get(path[dot:].lower())
    return None


def _blocked_ipv4(ip: ipaddress.IPv4Address) -> bool:
    return (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or not ip.is_global
    )


def is_blocked_address(address: str) -> bool:
    """True for any address URL ingest must never reach (including IPv4 hidden inside IPv6)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv4Address):
        return _blocked_ipv4(ip)
    embedded: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        embedded.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        embedded.append(ip.sixtofour)
    if ip.teredo is not None:
        embedded.extend(ip.teredo)
    if ip in _NAT64 or ip in _IPV4_COMPAT:
        embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if any(_blocked_ipv4(v4) for v4 in embedded):
        return True
    return (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_site_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or not ip.is_global
    )


@lru_cache(maxsize=8)
def _allowlist(networks: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in networks if n.strip())


def _allowlisted(address: str, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return any(ip in net for net in networks)


async def check_host(host: str, port: int) -> list[str]:
    """Resolve `host` and return its addresses; refuse if any of them is non-public.

    With LEV_ALLOW_PRIVATE_URLS set the addresses are returned unchecked; addresses inside a
    LEV_PRIVATE_URL_ALLOWLIST network pass.
    """
    host = host.strip("[]")
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ingest_failed(f"could not resolve host {host!r} (DNS lookup failed)") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise ingest_failed(f"could not resolve host {host!r} (no addresses)")
    settings = get_settings()
    if settings.allow_private_urls:
        return addresses
    allowed = _allowlist(tuple(settings.private_url_allowlist))
    for addr in addresses:
        if is_blocked_address(addr) and not _allowlisted(addr, allowed):
            raise ingest_failed(
                f"refusing to fetch {host!r}: it resolves to a private, loopback, link-local or "
                f"otherwise non-public address ({addr})"
            )
    return addresses


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves and checks each host, then connects to one of the checked IPs."""
    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await check_host(host, port)
        last: Exception | None = None
        for addr in addresses:
            try:
                return await self._inner.connect_tcp(
                    addr, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        raise ingest_failed("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connection pool uses `_GuardedBackend` (no proxies, no env)."""
    def __init__(self) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            max_keepalive_connections=0,
            network_backend=_GuardedBackend(),
        )


def _check_url(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise ingest_failed(f"only http and https URLs can be ingested, not {url.scheme or 'this'}:")
    if not url.host:
        raise ingest_failed("the URL has no host")


def _status_error(code: int) -> ApiError:
    if code in (404, 410, 451):
        return ingest_failed(f"page not found (HTTP {code})")
    if code in (401, 403, 407):
        return ingest_failed(f"login required or paywalled (HTTP {code})")
    if code == 429:
        return ingest_failed("the site is rate-limiting requests (HTTP 429); try again later")
    if code >= 500:
        return ingest_failed(f"the site returned a server error (HTTP {code})")
    return ingest_failed(f"the site refused the request (HTTP {code})")


def _media_kind(content_type: str) -> str | None:
    if content_type == "application/pdf":
        return "pdf"
    if content_type.startswith("audio/"):
        return "audio"
    if content_type.startswith("video/"):
        return "video"
    return None


def _charset(header: str) -> str | None:
    for param in header.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


async def _read_capped(resp: httpx.Response, max_bytes: int) -> bytes:
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ingest_failed(f"page larger than {max_bytes // (1024 * 1024)} MB")
    buf = bytearray()
    async for piece in resp.aiter_bytes():
        buf += piece
        if len(buf) > max_bytes:
            raise ingest_failed(f"page larger than {max_bytes // (1024 * 1024)} MB")
    return bytes(buf)


def _extract_html(body: bytes, url: str) -> tuple[str | None, str, dict[str, Any]]:
    import trafilatura

    doc = trafilatura.bare_extraction(
        body,
        url=url,
        favor_recall=True,
        include_tables=True,
        include_comments=False,
        include_images=False,
        include_links=False,
        with_metadata=True,
    )
    text = ""
    title: str | None = None
    meta: dict[str, Any] = {}
    if doc is not None and not isinstance(doc, dict):
        text = doc.text or ""
        title = doc.title or None
        for key in ("author", "date", "sitename", "description", "hostname"):
            value = getattr(doc, key, None)
            if isinstance(value, str) and value.strip():
                meta[key] = value.strip()
    if not title:
        head = body[:200_000].decode("utf-8", errors="replace")
        match = _TITLE_RE.search(head)
        if match:
            title = " ".join(html.unescape(match.group(1)).split()) or None
    return title, text.strip(), meta


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, kind):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


async def _send(client: httpx.AsyncClient, url: httpx.URL) -> httpx.Response:
    try:
        return await client.send(client.build_request("GET", url), stream=True)
    except ApiError:
        raise
    except httpx.ConnectTimeout as exc:
        raise ingest_failed(f"timed out connecting to {url.host}") from exc
    except httpx.TimeoutException as exc:
        raise ingest_failed(f"{url.host} did not respond in time") from exc
    except httpx.ConnectError as exc:
        detail = str(exc) or "connection failed"
        if _caused_by(exc, ConnectionRefusedError) or "refused" in detail.lower():
            detail = "connection refused"
        raise ingest_failed(f"could not connect to {url.host}: {detail}") from exc
    except httpx.HTTPError as exc:
        raise ingest_failed(f"could not fetch {url.host}: {exc or type(exc).__name__}") from exc


async def _fetch(url: str, connect_timeout: float, read_timeout: float, max_bytes: int) -> FetchedPage:
    try:
        current = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise ingest_failed(f"invalid URL: {exc}") from exc
    _check_url(current)
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        "Accept-Language": "en;q=0.9,*;q=0.5",
    }
    async with httpx.AsyncClient(
        transport=_GuardedTransport(), timeout=timeout, headers=headers,
        follow_redirects=False, trust_env=False,
    ) as client:
        hops = 0
        while True:
            resp = await _send(client, current)
            try:
                if resp.status_code in REDIRECT_CODES and "location" in resp.headers:
                    hops += 1
                    if hops > MAX_REDIRECTS:
                        raise ingest_failed(f"too many redirects (more than {MAX_REDIRECTS})")
                    try:
                        current = resp.url.join(resp.headers["location"])
                    except (httpx.InvalidURL, ValueError) as exc:
                        raise ingest_failed(f"the site redirected to an invalid URL: {exc}") from exc
                    _check_url(current)
                    continue
                if resp.status_code >= 400:
                    raise _status_error(resp.status_code)
                if resp.status_code != 200:
                    raise ingest_failed(f"unexpected response from the site (HTTP {resp.status_code})")
                raw_type = resp.headers.get("content-type", "")
                ctype = raw_type.split(";", 1)[0].strip().lower() or "text/html"
                kind = _media_kind(ctype)
                if kind is not None:
                    raise UnsupportedMedia(kind, ctype)
                if ctype not in HTML_TYPES and ctype not in TEXT_TYPES:
                    raise ingest_failed(f"unsupported content type {ctype} (only web pages and plain text)")
                body = await _read_capped(resp, max_bytes)
            finally:
                await resp.aclose()
            break

    final = str(resp.url.copy_with(fragment=None))
    if ctype in TEXT_TYPES:
        text = body.decode(_charset(raw_type) or "utf-8", errors="replace").strip()
        if not text:
            raise ingest_failed("the page is empty")
        segment = resp.url.path.rstrip("/").rsplit("/", 1)[-1]
        host = resp.url.host
        title = segment or host or None
        return FetchedPage(final, canonical_url(final), title, text, {"hostname": host}, ctype)

    title, text, meta = await asyncio.to_thread(_extract_html, body, final)
    if resp.url.host:
        meta.setdefault("hostname", resp.url.host)
    if len(text) < MIN_TEXT_CHARS:
        raise ingest_failed("page has no readable text; it may need a login or be paywalled")
    return FetchedPage(final, canonical_url(final), title, text, meta, ctype)


async def fetch_page(
    url: str,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float = 15.0,
    total_timeout: float = 30.0,
    max_bytes: int = MAX_BYTES,
) -> FetchedPage:
    """Fetch `url` (http/https only, at most 5 redirects, 20 MB) and extract title, text and metadata.

    Raises `ingest_failed` with a descriptive message, or `UnsupportedMedia` for PDF/audio/video.
    """
    try:
        async with asyncio.timeout(total_timeout):
            return await _fetch(url, connect_timeout, read_timeout, max_bytes)
    except TimeoutError as exc:
        raise ingest_failed(f"the page took longer than {total_timeout:g} s to fetch") from exc
