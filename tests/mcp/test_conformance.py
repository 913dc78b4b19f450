"""The MCP conformance suite's server scenarios that apply to what Lev declares all pass against the test server
(through the token-adding proxy: tests/mcp/conformance.py), and the pinned suite holds no scenario that is neither
run nor listed as not applying (with why)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.conformance import APPLIES, NOT_APPLICABLE, failures, run, scenario_checks
from tests.mcp.header_proxy import HeaderProxy
from tests.stack import Admin, LiveServer, new_user


@pytest.fixture(scope="module")
def proxied(server: LiveServer, admin: Admin) -> Iterator[HeaderProxy]:
    proxy = HeaderProxy(server.url, {"Authorization": f"Bearer {new_user(admin).token()}"})
    yield proxy
    proxy.close()


def test_the_pinned_suite_holds_no_scenario_outside_the_two_lists() -> None:
    listed = run("list").stdout
    server_part = listed.split("Client scenarios")[0]
    names = {line.strip()[2:].split(" [")[0] for line in server_part.splitlines() if line.strip().startswith("- ")}
    assert names == set(APPLIES) | set(NOT_APPLICABLE), names ^ (set(APPLIES) | set(NOT_APPLICABLE))


@pytest.mark.parametrize("scenario", APPLIES)
def test_every_scenario_that_applies_passes(proxied: HeaderProxy, scenario: str) -> None:
    assert not failures(scenario_checks(proxied.url, scenario))
    if scenario == "dns-rebinding-protection":  # the refusal came from Lev itself, through the proxy
        assert any(status == 403 for method, _path, status in proxied.seen if method == "POST")
