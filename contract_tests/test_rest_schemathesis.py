"""schemathesis against the REST surface with no configuration of Lev's (issue 52: what `st run --checks all`
finds from outside): every operation in openapi.yaml, positive and negative data, with a token of each kind
(whole-library write, whole-library read-only, one-folder, two-folder) and without one, plus a stateful run
through the OpenAPI links. The only failures allowed are the kinds docs/decisions.md lists as refusals no schema
can state (`REFUSALS`, read from there); anything else fails the test."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from schemathesis.checks import CHECKS as REGISTRY
from schemathesis.checks import load_all_checks
from schemathesis.core.failures import Failure, FailureGroup

from contract_tests.conftest import FUZZ_EXAMPLES, TOKEN_KINDS, Library, count_case, examples
from lev.core.contract import SPEC_PATH
from tests.stack import ROOT

# Every check schemathesis has (what `st run --checks all` runs), with its default expectations.
load_all_checks()
CHECKS = [c for c in REGISTRY.get_all() if callable(c) and not isinstance(c, type)]
STATEFUL_CHECKS = CHECKS
DECISIONS = ROOT / "docs" / "decisions.md"
REFUSALS_HEADING = "### What schemathesis still reports, and why no schema can say it"


@dataclass(frozen=True)
class Refusal:
    """One kind of failure schemathesis may report: its code (ST202 a schema-valid request refused, ST201 a
    schema-violating one answered with a status it does not count as a refusal), the operation, the status and
    the error code of the body."""
    check: str
    operation: str
    status: int
    error: str


def documented_refusals() -> set[Refusal]:
    """The list under REFUSALS_HEADING in docs/decisions.md, one `- STnnn `METHOD /path` STATUS `code`: why` a line."""
    text = DECISIONS.read_text()
    section = text.split(REFUSALS_HEADING, 1)[1].split("\n#", 1)[0]
    found = re.findall(r"^- (ST20[12]) `([A-Z]+ /[^`]+)` (\d{3}) `([a-z_]+)`", section, re.MULTILINE)
    return {Refusal(check, op, int(status), code) for check, op, status, code in found}


REFUSALS = documented_refusals()


def undocumented(group: FailureGroup, response: Any) -> list[Failure]:
    """The failures of one response that are not a documented refusal."""
    try:
        code = response.json().get("error")
    except Exception:
        code = None
    left = []
    for failure in group.exceptions:
        status = getattr(failure, "status_code", None)
        if Refusal(failure.code, failure.operation, status or 0, code or "") not in REFUSALS:
            left.append(failure)
    return left

# URLs schemathesis generates for kind=url are random strings. Host names are rewritten to `.invalid` hosts
# (RFC 2606: never resolvable) so a run never reaches the outside world nor depends on a resolver's timeout;
# IP literals, empty and unparsable hosts and non-http schemes are sent as generated.
def _tame_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return url
    if parts.scheme.lower() not in {"http", "https"} or not host:
        return url
    try:
        ip_address(host)
        return url
    except ValueError:
        pass
    return urlunsplit((parts.scheme, "fuzz.invalid", parts.path, parts.query, parts.fragment))


# Bodies whose `url` Lev fetches (ingest, following a feed) or posts to (a webhook endpoint, every event after).
OUTBOUND_URL_PATHS = frozenset({"/api/v1/ingest", "/api/v1/feeds", "/api/v1/webhooks"})


def _tame_ingest_url(case: Any) -> None:
    body = case.body
    if case.operation.path in OUTBOUND_URL_PATHS and isinstance(body, dict) and isinstance(body.get("url"), str):
        body["url"] = _tame_url(body["url"])
        if case.operation.path == "/api/v1/webhooks":  # IP literals too: deliveries never leave the machine
            try:
                parts = urlsplit(body["url"])
            except ValueError:
                return
            if parts.scheme.lower() in {"http", "https"} and parts.netloc:
                body["url"] = urlunsplit((parts.scheme, "fuzz.invalid", parts.path, parts.query, parts.fragment))


def _load_schema(base: str | None = None, token: str | None = None,
                 phases: tuple[str, ...] = ("examples", "coverage", "fuzzing")) -> Any:
    loaded = schemathesis.openapi.from_path(SPEC_PATH)
    loaded.config.update(base_url=base,
                         headers={"Authorization": f"Bearer {token}"} if token else None,
                         request_timeout=60)
    # Credentials are the test's job (one token per kind), not generated data.
    loaded.config.generation.update(max_examples=examples(), modes=["positive", "negative"],
                                    with_security_parameters=False)
    loaded.config.phases.update(phases=list(phases))
    return loaded


# Every phase for the tokens that write (the whole library, one folder): the coverage phase's boundary values are
# about validation, which a read-only, a second scoped or a missing token meets only behind its 403 or 401. The
# other kinds get the examples and random cases (a third of the cases, a third of the time, issue 52's list holds).
COVERED_KINDS = ("whole_write", "one_folder")
SAMPLED_KINDS = tuple(k for k in TOKEN_KINDS if k not in COVERED_KINDS)
schema = _load_schema().exclude(path_regex="^/api/account")  # the account API: test_account_schemathesis.py
sampled = _load_schema(phases=("examples", "fuzzing")).exclude(path_regex="^/api/account")


@schemathesis.serializer("application/pdf", "audio/*", "video/*", "image/*", "application/octet-stream")
def _raw_bytes(_ctx: Any, value: Any) -> bytes:
    """Upload PUT bodies: whatever was generated, as raw bytes."""
    return value if isinstance(value, bytes) else json.dumps(value).encode()


@pytest.fixture(scope="session", params=COVERED_KINDS)
def covered_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session", params=SAMPLED_KINDS)
def sampled_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _authorize(case: Any, token: str | None) -> None:
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    case.headers = headers


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_rest_operations_conform(case: Any, covered_kind: str, server, library: Library) -> None:  # type: ignore[no-untyped-def]
    """Every operation, every phase, with a writing token: documented statuses, bodies and content types; never a
    5xx; negative data rejected; the same request without a token (or with a bad one) gets 401."""
    _conform(case, covered_kind, server.url, library)


@sampled.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_rest_operations_conform_for_every_other_token(case: Any, sampled_kind: str, server,  # type: ignore[no-untyped-def]
                                                       library: Library) -> None:
    """The same checks with a read-only token, a two-folder token and none, on the examples and random cases."""
    _conform(case, sampled_kind, server.url, library)


def _conform(case: Any, token_kind: str, url: str, library: Library) -> None:
    _tame_ingest_url(case)
    count_case(f"rest schemathesis [{token_kind}]")
    token = library.tokens[token_kind]
    _authorize(case, None)
    checks = CHECKS if token else [c for c in CHECKS if c.__name__ != "ignored_auth"]
    headers = {"Authorization": f"Bearer {token}"} if token else None
    response = case.call(base_url=url, headers=headers)
    try:
        case.validate_response(response, checks=checks, headers=headers,
                               transport_kwargs={"base_url": url, **({"headers": headers} if headers else {})})
    except FailureGroup as group:
        left = undocumented(group, response)
        if left:
            raise FailureGroup(left, str(group)) from None
    if token is None and _needs_auth(case) and _is_positive(case):
        assert response.status_code == 401, (response.status_code, response.text)
        assert response.json()["error"] == "missing_bearer_token"
        assert response.headers.get("www-authenticate", [""])[0].lower().startswith("bearer")


def _needs_auth(case: Any) -> bool:
    """The documented method of an operation that does not opt out of bearer auth (`security: []`)."""
    if case.method.upper() != case.operation.method.upper():
        return False
    return case.operation.definition.raw.get("security", [{"bearerAuth": []}]) != []


def _is_positive(case: Any) -> bool:
    meta = case.meta
    return meta is None or str(getattr(meta.generation.mode, "value", meta.generation.mode)) == "positive"


# --- stateful: create folder -> ingest -> add membership -> list -> remove -> delete ------------------------

def test_rest_stateful_links(server, library: Library) -> None:  # type: ignore[no-untyped-def]
    """Random walks along the OpenAPI links with a whole-library write token. Membership targets are drawn
    from the folders this run created (and now and then a random UUID) so adds and removes really happen."""
    stateful = _load_schema(server.url, library.tokens["whole_write"])
    stateful.config.phases.update(phases=["stateful"])
    base = stateful.exclude(path_regex="^/api/account").as_state_machine()
    failures: list[str] = []

    class LevLinks(base):  # type: ignore[misc,valid-type]
        created: list[str]

        def setup(self) -> None:
            self.created = []
            self.rng = random.Random(7)

        def before_call(self, case: Any) -> None:
            count_case("rest stateful steps")
            _tame_ingest_url(case)
            _authorize(case, library.tokens["whole_write"])
            if case.operation.path == "/api/v1/items/{id}/folders" and self.created and isinstance(case.body, dict):
                pool = [*self.created, "00000000-0000-4000-8000-000000000000"]
                case.body = {"folder_ids": self.rng.sample(pool, k=self.rng.randint(1, min(3, len(pool))))}

        def after_call(self, response: Any, case: Any) -> None:
            created = case.method.upper() == "POST" and response.status_code == 201
            if case.operation.path == "/api/v1/folders" and created:
                self.created.append(response.json()["id"])

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None,
                              **kwargs: Any) -> None:
            try:
                case.validate_response(response, checks=STATEFUL_CHECKS, transport_kwargs=kwargs or None)
            except FailureGroup as exc:  # recorded, not raised: a replay against live data is not deterministic
                if undocumented(exc, response):
                    failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: {exc}")

    # Generation only, as schemathesis's own runner does: a replay against a live server that kept earlier
    # scenarios' data (names taken, folders gone) is not deterministic, so failures are recorded as found and
    # a scenario Hypothesis cannot replay identically (Flaky) just ends the exploration.
    LevLinks.TestCase.settings = settings(
        phases=[Phase.generate],
        max_examples=examples(0.5, floor=3), stateful_step_count=min(12, max(6, FUZZ_EXAMPLES)), deadline=None,
        suppress_health_check=list(HealthCheck), derandomize=True,
    )
    try:
        LevLinks.TestCase().runTest()
    except Flaky:
        pass
    assert not failures, "\n\n".join(failures[:5])


def test_the_documented_refusals_name_documented_answers() -> None:
    """Every refusal docs/decisions.md lists is an operation of openapi.yaml, a status it documents and a code of
    the error table: the list is the contract's, not the fuzzer's."""
    from lev.core.contract import load_spec
    from lev.core.errors import TABLE

    assert len(REFUSALS) >= 5
    paths = load_spec()["paths"]
    for r in REFUSALS:
        method, path = r.operation.split(" ", 1)
        op = paths[path][method.lower()]
        assert str(r.status) in op["responses"], r
        assert TABLE[r.error].status == r.status, r
