"""Cloud metadata services are refused by the outbound guard whatever LEV_ALLOW_PRIVATE_URLS and the allowlist
say, in every spelling of their addresses. Tested at the decision (`check_host`): the resolver only parses the
numeric forms here, and no connection is ever attempted."""

from __future__ import annotations

import ipaddress

import pytest

from lev.core.errors import ApiError
from lev.core.settings import Settings
from lev.net.guard import check_host, is_metadata_address
from lev.plumbing.ports import Outbound

# Private URLs allowed and an allowlist that covers every address there is.
EVERYTHING = Outbound(allow_private=True, allowlist=("0.0.0.0/0", "::/0"))


def test_the_settings_say_what_the_guard_lets_through() -> None:
    out = Outbound.from_settings(Settings(allow_private_urls=True, private_url_allowlist=["10.0.0.0/8"]))
    assert out.allow_private and out.allowlist == ("10.0.0.0/8",)


def _v4_spellings(dotted: str) -> list[str]:
    """What the resolver (inet_aton) reads as this IPv4 address: decimal, octal, hex, mixed and short forms."""
    n = int(ipaddress.IPv4Address(dotted))
    octets = [int(o) for o in dotted.split(".")]
    return [dotted, str(n), hex(n), "0" + oct(n)[2:], ".".join(f"0{o:o}" for o in octets),
            ".".join(hex(o) for o in octets), f"{octets[0]}.{octets[1]}.{(octets[2] << 8) | octets[3]}",
            f"{octets[0]}.{(octets[1] << 16) | (octets[2] << 8) | octets[3]}"]


def _v6_wrappings(dotted: str) -> list[str]:
    """The same IPv4 address inside IPv6: mapped, compatible, NAT64 (well-known and local-use), 6to4."""
    v4 = ipaddress.IPv4Address(dotted)
    hi, lo = int(v4) >> 16, int(v4) & 0xFFFF
    return [f"::ffff:{dotted}", f"::ffff:{hi:x}:{lo:x}", f"::{dotted}", f"64:ff9b::{dotted}",
            f"64:ff9b::{hi:x}:{lo:x}", f"64:ff9b:1:{hi:x}:{lo >> 8:x}:{(lo & 0xFF) << 8:x}::",
            f"2002:{hi:x}:{lo:x}::1"]


METADATA_V4 = ["169.254.169.254", "100.100.100.200", "169.254.170.2"]
SPELLINGS = [s for a in METADATA_V4 for s in _v4_spellings(a)] + \
    [f"[{s}]" for a in METADATA_V4 for s in _v6_wrappings(a)] + \
    ["[fd00:ec2::254]", "[fd00:0ec2:0000:0000:0000:0000:0000:0254]", "[FD00:EC2::254]", "[fd00:ec2::23]"]


@pytest.mark.asyncio
@pytest.mark.parametrize("host", SPELLINGS)
async def test_metadata_addresses_are_refused_even_with_private_urls_allowed(host: str) -> None:
    with pytest.raises(ApiError) as info:
        await check_host(EVERYTHING, host, 80)
    assert info.value.code == "ingest_failed" and info.value.status == 400
    assert "cloud metadata service" in (info.value.message or ""), info.value.message


@pytest.mark.asyncio
@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "metadata.goog"])
async def test_metadata_host_names_are_refused_before_any_lookup(host: str) -> None:
    with pytest.raises(ApiError) as info:
        await check_host(EVERYTHING, host, 80)
    assert "cloud metadata service" in (info.value.message or "")


@pytest.mark.asyncio
async def test_other_private_addresses_still_follow_the_settings() -> None:
    """Only the metadata services are fixed: loopback, link-local and private neighbours pass when allowed."""
    for host in ("127.0.0.1", "169.254.169.253", "169.254.1.1", "100.100.100.201", "10.0.0.1", "[::1]",
                 "[fd00:ec2::253]"):
        assert await check_host(EVERYTHING, host, 80) == [host.strip("[]")]


def test_the_decision_unwraps_every_ipv6_form() -> None:
    for dotted in METADATA_V4:
        for wrapped in _v6_wrappings(dotted):
            assert is_metadata_address(wrapped), wrapped
    assert is_metadata_address("fd00:ec2::254%eth0")
    assert not is_metadata_address("::ffff:169.254.169.253")
    assert not is_metadata_address("8.8.8.8")
