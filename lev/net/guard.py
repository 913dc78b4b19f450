"""SSRF-guarded outbound HTTP: the address rule, the guarded client, redirects re-checked hop by hop.

Every TCP connection, including each redirect hop, goes through `_GuardedBackend`: it resolves the
host, refuses private/loopback/link-local addresses (unless LEV_ALLOW_PRIVATE_URLS or the allowlist lets them
through) and cloud metadata services (always, however they are spelled), then connects to the very IP it
checked, so DNS rebinding between check and connect is not possible. TLS SNI and the Host header still carry
the URL's host name (httpcore takes both from the URL).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

import httpcore
import httpx

from lev.core.errors import ApiError, address_refused, ingest_failed
from lev.net import share
from lev.plumbing.ports import Outbound

MAX_REDIRECTS = 5
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36 Lev/0.1 (+knowledge-base page fetcher)"
)
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use prefix (RFC 6052 /48 layout)
_IPV4_COMPAT = ipaddress.ip_network("::/96")

# Cloud instance metadata services (they hand out credentials): refused whatever LEV_ALLOW_PRIVATE_URLS and
# LEV_PRIVATE_URL_ALLOWLIST say, in every spelling (the resolver turns decimal, octal and hex IPv4 forms into these;
# IPv4 inside IPv6 is unwrapped below).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, Google Cloud, Azure, Oracle, DigitalOcean, OpenStack, ...
    "169.254.170.2",  # AWS ECS task metadata and credentials
    "169.254.170.23",  # AWS EKS Pod Identity
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "fd00:ec2::23",  # AWS EKS Pod Identity over IPv6
    "100.100.100.200",  # Alibaba Cloud
))
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"})


def _blocked_ipv4(ip: ipaddress.IPv4Address) -> bool:
    return (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or not ip.is_global
    )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: mapped, compatible, 6to4, Teredo, NAT64 (/96 and /48)."""
    embedded: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        embedded.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        embedded.append(ip.sixtofour)
    if ip.teredo is not None:
        embedded.extend(ip.teredo)
    if ip in _NAT64 or ip in _IPV4_COMPAT:
        embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip in _NAT64_LOCAL:  # bits 48-63 hold the first two octets, bits 72-87 the last two
        raw = int(ip)
        embedded.append(ipaddress.IPv4Address((((raw >> 64) & 0xFFFF) << 16) | ((raw >> 40) & 0xFFFF)))
    return embedded


def is_metadata_address(address: str) -> bool:
    """True for a cloud metadata service's address, also when it is wrapped in an IPv6 address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip in METADATA_ADDRESSES:
        return True
    return isinstance(ip, ipaddress.IPv6Address) and any(v4 in METADATA_ADDRESSES for v4 in _embedded_ipv4(ip))


def is_blocked_address(address: str) -> bool:
    """True for any address URL ingest must never reach (including IPv4 hidden inside IPv6)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv4Address):
        return _blocked_ipv4(ip)
    if any(_blocked_ipv4(v4) for v4 in _embedded_ipv4(ip)):
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


ALLOW_HINT = ("to allow it, add its network to LEV_PRIVATE_URL_ALLOWLIST (e.g. 192.168.1.0/24) or set "
              "LEV_ALLOW_PRIVATE_URLS=true, then restart Lev")
METADATA_HINT = "no setting allows it (LEV_ALLOW_PRIVATE_URLS and LEV_PRIVATE_URL_ALLOWLIST never do)"


class AddressRefused(ApiError):
    """A host the guard does not connect to, saying which setting allows it. An ingest answers it as any unreachable
    URL (`ingest_failed`); a feed or a webhook endpoint as `address_refused` (`refused_as`)."""

    def __init__(self, message: str) -> None:
        super().__init__("ingest_failed", message)

    def refused_as(self, what: str) -> ApiError:
        return address_refused(f"{what} is refused: {self.message}.")


async def check_host(outbound: Outbound, host: str, port: int) -> list[str]:
    """Resolve `host` and return its addresses; refuse if any of them is non-public.

    A cloud metadata service (by name or by any address) is always refused. Otherwise, with
    LEV_ALLOW_PRIVATE_URLS set the addresses are returned unchecked; addresses inside a
    LEV_PRIVATE_URL_ALLOWLIST network pass.
    """
    host = host.strip("[]")
    if host.lower().rstrip(".") in METADATA_HOSTS:
        raise AddressRefused(f"refusing to fetch {host!r}: it is a cloud metadata service; {METADATA_HINT}")
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ingest_failed(f"could not resolve host {host!r} (DNS lookup failed)") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise ingest_failed(f"could not resolve host {host!r} (no addresses)")
    for addr in addresses:
        if is_metadata_address(addr):
            raise AddressRefused(f"refusing to fetch {host!r}: it resolves to a cloud metadata service ({addr}); "
                                 f"{METADATA_HINT}")
    if outbound.allow_private:
        return addresses
    allowed = _allowlist(outbound.allowlist)
    for addr in addresses:
        if is_blocked_address(addr) and not _allowlisted(addr, allowed):
            raise AddressRefused(f"refusing to fetch {host!r}: it resolves to a private, loopback, link-local or "
                                 f"otherwise non-public address ({addr}); {ALLOW_HINT}")
    return addresses


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves and checks each host, then connects to one of the checked IPs."""

    def __init__(self, outbound: Outbound) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._outbound = outbound

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await check_host(self._outbound, host, port)
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


def ssl_context(outbound: Outbound) -> ssl.SSLContext:
    """The TLS context of Lev's outgoing requests: the public CAs, plus LEV_OUTBOUND_CA_FILE when set."""
    ctx = httpx.create_ssl_context(trust_env=False)
    if outbound.ca_file is not None:
        ctx.load_verify_locations(cafile=str(outbound.ca_file))
    return ctx


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connection pool uses `_GuardedBackend` (no proxies, no env)."""

    def __init__(self, outbound: Outbound, connections: int = 10) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context(outbound),
            max_connections=connections,
            max_keepalive_connections=0,
            network_backend=_GuardedBackend(outbound),
        )


def guarded_client(outbound: Outbound, timeout: httpx.Timeout, headers: dict[str, str], *,
                   connections: int = 10) -> httpx.AsyncClient:
    """An httpx client whose every connection is checked (redirects are followed by `open_url`, not httpx), with
    at most `connections` open at once."""
    return httpx.AsyncClient(transport=_GuardedTransport(outbound, connections), timeout=timeout, headers=headers,
                             follow_redirects=False, trust_env=False)


def _check_url(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise ingest_failed(f"only http and https URLs can be ingested, not {url.scheme or 'this'}:")
    if not url.host:
        raise ingest_failed("the URL has no host")


def status_error(code: int) -> ApiError:
    """The descriptive ingest_failed for an HTTP error answer of the site."""
    if code in (404, 410, 451):
        return ingest_failed(f"page not found (HTTP {code})")
    if code in (401, 403, 407):
        return ingest_failed(f"login required or paywalled (HTTP {code})")
    if code == 429:
        return ingest_failed("the site is rate-limiting requests (HTTP 429); try again later")
    if code >= 500:
        return ingest_failed(f"the site returned a server error (HTTP {code})")
    return ingest_failed(f"the site refused the request (HTTP {code})")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, kind):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


async def _send(client: httpx.AsyncClient, url: httpx.URL, headers: dict[str, str] | None = None) -> httpx.Response:
    try:
        return await client.send(client.build_request("GET", url, headers=headers), stream=True)
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


@asynccontextmanager
async def open_url(client: httpx.AsyncClient, url: str, *, headers: dict[str, str] | None = None,
                   not_modified: bool = False) -> AsyncIterator[httpx.Response]:
    """GET `url` (http/https only) following at most 5 redirects, each hop checked again; yields the final
    200 answer unread (streaming) and closes it afterwards. Anything else is a descriptive ingest_failed.
    `headers` go with every hop (a conditional GET's validators); with `not_modified` a 304 is yielded too."""
    try:
        current = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise ingest_failed(f"invalid URL: {exc}") from exc
    _check_url(current)
    async with share.slot():
        async with _follow(client, current, headers, not_modified) as resp:
            yield resp


@asynccontextmanager
async def _follow(client: httpx.AsyncClient, current: httpx.URL, headers: dict[str, str] | None,
                  not_modified: bool) -> AsyncIterator[httpx.Response]:
    for hop in range(MAX_REDIRECTS + 1):
        resp = await _send(client, current, headers)
        try:
            if resp.status_code in REDIRECT_CODES and "location" in resp.headers:
                if hop == MAX_REDIRECTS:
                    raise ingest_failed(f"too many redirects (more than {MAX_REDIRECTS})")
                try:
                    current = resp.url.join(resp.headers["location"])
                except (httpx.InvalidURL, ValueError) as exc:
                    raise ingest_failed(f"the site redirected to an invalid URL: {exc}") from exc
                _check_url(current)
                continue
            if resp.status_code >= 400:
                raise status_error(resp.status_code)
            if resp.status_code != 200 and not (not_modified and resp.status_code == 304):
                raise ingest_failed(f"unexpected response from the site (HTTP {resp.status_code})")
            yield resp
            return
        finally:
            await resp.aclose()


_shared: dict[tuple[int, Outbound, float, str, int], httpx.AsyncClient] = {}


def shared_client(outbound: Outbound, timeout: float, user_agent: str = USER_AGENT, *,
                  connections: int = 10) -> httpx.AsyncClient:
    """One guarded client per event loop for frequent small requests (feed checks, webhook deliveries): its TLS
    context is built once (about 19 ms of CPU each time otherwise). Connections are still checked one by one and
    never kept alive (an idle pool costs more CPU per request than a new loopback or LAN connection); at most
    `connections` at once; per-request headers go with each request."""
    key = (id(asyncio.get_running_loop()), outbound, timeout, user_agent, connections)
    client = _shared.get(key)
    if client is None or client.is_closed:
        client = _shared[key] = guarded_client(outbound, httpx.Timeout(timeout), {"User-Agent": user_agent},
                                               connections=connections)
    return client
