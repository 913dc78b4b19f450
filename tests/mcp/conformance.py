"""The MCP conformance suite (@modelcontextprotocol/conformance, pinned 0.1.16, on the pinned Node 22 it needs) as
Lev runs it: the server scenarios that apply to what Lev declares (tools, resources; no prompts, logging,
completions, subscriptions or server-sent streams), through a loopback proxy that adds the bearer token (the suite
sends none). The other scenarios test fixtures of the suite's own "everything" server (`test_simple_text`,
`test://static-text`, ...) and are listed with why. `make conformance` (this module's `main`) runs them against a
running Lev; tests/mcp/test_conformance.py against the test server."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.mcp.header_proxy import HeaderProxy
from tests.npm_cache import PINNED, npm_package

APPLIES = ("server-initialize", "ping", "tools-list", "resources-list", "dns-rebinding-protection")
NOT_APPLICABLE = {
    **{s: "calls a tool of the suite's own test server" for s in (
        "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
        "tools-call-mixed-content", "tools-call-with-logging", "tools-call-error", "tools-call-with-progress",
        "tools-call-sampling", "tools-call-elicitation", "json-schema-2020-12", "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums")},
    **{s: "reads a test:// resource of the suite's own test server" for s in (
        "resources-read-text", "resources-read-binary", "resources-templates-read")},
    "resources-subscribe": "Lev declares no resource subscriptions", "resources-unsubscribe": "no subscriptions",
    "logging-set-level": "Lev declares no logging capability", "completion-complete": "no completions capability",
    "server-sse-polling": "Lev is stateless JSON (no sessions, no server-sent stream to poll)",
    "server-sse-multiple-streams": "no server-sent streams",
    **{s: "Lev declares no prompts" for s in ("prompts-list", "prompts-get-simple", "prompts-get-with-args",
                                              "prompts-get-embedded-resource", "prompts-get-with-image")},
}
NAME = "conformance-0.1.16"


def suite() -> tuple[Path, Path]:
    """The pinned node and the suite's entry point (installed into .cache/ on first use)."""
    spec, *also = PINNED[NAME]
    package = npm_package(spec, NAME, *also)
    return package.parents[1] / ".bin" / "node", package / "dist" / "index.js"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    node, entry = suite()
    return subprocess.run([str(node), str(entry), *args], capture_output=True, text=True, timeout=timeout)


def scenario_checks(url: str, scenario: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as out:
        done = run("server", "--url", f"{url}/api/mcp", "--scenario", scenario, "-o", out)
        files = list(Path(out).rglob("checks.json"))
        assert files, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
        return [c for f in files for c in json.loads(f.read_text())]


def failures(checks: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """The checks that did not pass (INFO entries are the suite's log, not verdicts); one entry when none ran."""
    verdicts = [c for c in checks if c["status"] != "INFO"]
    if not verdicts:
        return [("no-checks", "FAILURE", "the scenario produced no verdict")]
    return [(c["id"], c["status"], c.get("errorMessage")) for c in verdicts if c["status"] != "SUCCESS"]


def main() -> None:
    """`make conformance`: LEV_URL (default http://127.0.0.1:8080) and LEV_TOKEN, the scenarios that apply."""
    import os
    import sys

    url, token = os.environ.get("LEV_URL", "http://127.0.0.1:8080"), os.environ.get("LEV_TOKEN", "")
    if not token:
        sys.exit("Set LEV_TOKEN to a lev_ token (lev token create --user EMAIL --name conformance).")
    proxy = HeaderProxy(url, {"Authorization": f"Bearer {token}"})
    bad = 0
    try:
        for scenario in APPLIES:
            failed = failures(scenario_checks(proxy.url, scenario))
            bad += bool(failed)
            print(f"{'FAIL' if failed else 'pass'}  {scenario}", *[f"\n      {f}" for f in failed])
        for scenario, why in NOT_APPLICABLE.items():
            print(f"n/a   {scenario}: {why}")
    finally:
        proxy.close()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
