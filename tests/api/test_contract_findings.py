"""The contract is no looser than the server, as an outside fuzzer reads it (issue 32): ingest's `url` declares the
http(s) form the server enforces, the upload size cap is the schema's maximum and refused as the schema refuses
(400 with maxBytes; issue 52), and the import file is described as UTF-8 text."""

from __future__ import annotations

import httpx
from jsonschema import Draft202012Validator

from lev.core.contract import ContractValidator, load_spec
from tests.stack import User


def _schema(name: str) -> dict:
    spec = load_spec()
    return {**spec["components"]["schemas"][name], "components": spec["components"]}


def test_ingest_urls_the_server_refuses_are_refused_by_the_schema() -> None:
    url = ContractValidator(_schema("IngestUrl"), format_checker=Draft202012Validator.FORMAT_CHECKER)
    for bad in ("0", "ftp://example.com/x", "http://", "http:///path", "javascript:alert(1)", " http://e.com/",
                "http://e.com/\x00"):
        assert not url.is_valid({"kind": "url", "url": bad}), bad
    for good in ("http://e.com", "HTTPS://E.COM/a?b#c", "https://127.0.0.1:8080/x y"):
        assert url.is_valid({"kind": "url", "url": good}), good


def test_an_upload_over_the_cap_breaks_the_schema_and_is_refused_as_the_schema_refuses(server, user: User) -> None:
    size = _schema("UploadSize")
    assert size["maximum"] == 52428800 and "52428800" in size["description"]
    c = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {user.token(write=True)}"})
    body = {"mime": "application/pdf", "filename": "a.pdf"}
    assert c.post("/api/v1/uploads/signed-url", json={**body, "size": 52428800}).status_code == 200
    for size_over in (52428801, 9223372036854775806):  # the fuzzer's: it got 413 before
        r = c.post("/api/v1/uploads/signed-url", json={**body, "size": size_over})
        assert r.status_code == 400 and r.json() == {
            "error": "invalid_body", "maxBytes": 52428800,
            "message": "size: uploads are limited to 52428800 bytes (50 MB)."}, r.text
    r = c.post("/api/v1/uploads/signed-url", content=b'{"mime": "application/pdf", "filename": "a.pdf", '
               b'"size": 9223372036854775808}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text
    r = c.post("/api/v1/ingest", json={"kind": "url", "url": "0"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text  # was ingest_failed: "connect to 0"


def test_the_import_file_is_described_as_utf8_text() -> None:
    op = load_spec()["paths"]["/api/v1/imports"]["post"]
    file = op["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
    assert "UTF-8" in file["description"] and "not UTF-8" in file["description"]
    assert "not UTF-8" in op["responses"]["400"]["description"]


def test_the_contract_is_a_valid_openapi_document_and_libyaml_reads_it_as_pyyaml_does() -> None:
    """The server parses openapi.yaml with libyaml and no meta-schema check (a restart's seconds, issue 51): the
    check is here, and the two parsers agree."""
    import yaml

    from lev.core.contract import SPEC_PATH, check_spec

    check_spec()
    assert load_spec() == yaml.safe_load(SPEC_PATH.read_text())
