"""The served contract (`GET /api/v1/openapi.json`, the whole document, paths other issues add included) passes
Redocly CLI's `recommended` rules and Spectral's `spectral:oas` rules with no error and no warning: tags declared,
every operation described, license and contact given, no description cut in two by YAML (issue 32).

Both linters are pinned and installed once into `.cache/` from the npm registry (about a minute; later runs reuse
them, as the MCP Inspector's test does)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.stack import ROOT

REDOCLY = "@redocly/cli@2.77.0"
SPECTRAL = "@stoplight/spectral-cli@6.16.3"
HOME = ROOT / ".cache" / "spec-lint-redocly-2.77.0-spectral-6.16.3"


def _linters() -> Path:
    """The directory of the linters' executables, installed on first use (into a fresh directory, then moved)."""
    bin_dir = HOME / "node_modules" / ".bin"
    if not (bin_dir / "redocly").exists() or not (bin_dir / "spectral").exists():
        npm = shutil.which("npm")
        assert npm, "the contract lint test needs Node.js and npm on PATH"
        HOME.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="spec-lint-", dir=HOME.parent))
        subprocess.run([npm, "install", "--prefix", str(staging), "--no-save", "--no-audit", "--no-fund",
                        "--loglevel=error", REDOCLY, SPECTRAL], check=True, timeout=600, capture_output=True)
        try:
            staging.rename(HOME)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return bin_dir


def _run(args: list[str], cwd: Path) -> Any:
    env = {**os.environ, "NO_COLOR": "1", "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    start = out.stdout.find("{") if out.stdout.lstrip().startswith("{") else out.stdout.find("[")
    assert start >= 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    return json.JSONDecoder().raw_decode(out.stdout[start:])[0]


def test_the_served_contract_passes_redocly_and_spectral_without_a_warning(server, tmp_path: Path) -> None:
    document = httpx.get(f"{server.url}/api/v1/openapi.json", timeout=60)
    assert document.status_code == 200
    (tmp_path / "openapi.json").write_bytes(document.content)
    (tmp_path / "redocly.yaml").write_text("extends:\n  - recommended\n")
    (tmp_path / ".spectral.yaml").write_text('extends: ["spectral:oas"]\n')
    bin_dir = _linters()

    redocly = _run([str(bin_dir / "redocly"), "lint", "openapi.json", "--format=json"], tmp_path)
    problems = [(p["ruleId"], p["message"], [loc.get("pointer") for loc in p.get("location", [])])
                for p in redocly["problems"]]
    assert redocly["totals"] == {"errors": 0, "warnings": 0, "ignored": 0}, problems

    spectral = _run([str(bin_dir / "spectral"), "lint", "openapi.json", "--ruleset", ".spectral.yaml", "-f", "json",
                     "--fail-severity", "hint"], tmp_path)
    assert spectral == [], [(p["code"], p["message"], ".".join(map(str, p["path"]))) for p in spectral]


def test_no_flow_mapping_value_of_openapi_yaml_is_split_on_a_comma() -> None:
    """An unquoted `{description: a, b}` is read as two keys, `description: a` and `b` (the Import.total bug)."""

    def split(node: Any) -> list[str]:
        found = []
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if node.flow_style and isinstance(value, yaml.ScalarNode) and value.tag.endswith(":null") \
                        and value.value == "":
                    found.append(f"line {key.start_mark.line + 1}: {key.value[:60]!r}")
                found += split(value)
        elif isinstance(node, yaml.SequenceNode):
            for value in node.value:
                found += split(value)
        return found

    assert split(yaml.compose((ROOT / "openapi.yaml").read_text())) == []
