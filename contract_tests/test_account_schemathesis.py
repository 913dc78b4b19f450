"""schemathesis against the account API (/api/account, cookie-authenticated): every operation, positive and
negative data, in a signed-in browser session of a pro user (with its CSRF header) and without a session.
CSRF refusals are tested one by one in tests/auth/test_account.py."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from contract_tests.conftest import count_case, examples
from lev.core.contract import SPEC_PATH
from tests.stack import Admin

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]
PASSWORD = "fuzzing password"

schema = schemathesis.openapi.from_path(SPEC_PATH).include(path_regex="^/api/account")
schema.config.generation.update(max_examples=examples(), modes=["positive", "negative"],
                                with_security_parameters=False)
schema.config.phases.update(phases=["examples", "coverage", "fuzzing"])


@pytest.fixture(scope="module")
def account(server, admin: Admin) -> dict[str, str]:  # type: ignore[no-untyped-def]
    email = f"fuzz{uuid.uuid4().hex[:8]}@example.com"
    r = httpx.post(f"{server.url}/api/account/signup", json={"email": email, "password": PASSWORD})
    assert r.status_code == 201, r.text
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=r.json()["user_id"])
    return {"email": email}


@pytest.fixture(scope="module", params=["session", "signed_out"])
def session_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


_SESSION: dict[str, str] = {}


def _session(base: str, path: str, email: str) -> dict[str, str]:
    """Session headers: a throwaway account for password changes (wrong current passwords count as failed
    sign-ins), else the shared account's session, signed in again after a case that may have ended it."""
    if path == "/api/account/password":
        throwaway = f"fuzz{uuid.uuid4().hex[:8]}@example.com"
        r = httpx.post(f"{base}/api/account/signup", json={"email": throwaway, "password": PASSWORD})
    elif not _SESSION:
        r = httpx.post(f"{base}/api/account/login", json={"email": email, "password": PASSWORD})
    else:
        return dict(_SESSION)
    assert r.status_code in (200, 201), r.text
    headers = {"Cookie": f"lev_session={r.cookies['lev_session']}", "X-CSRF-Token": r.json()["csrf_token"]}
    if path != "/api/account/password":
        _SESSION.update(headers)
    return headers


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_account_operations_conform(case: Any, session_kind: str, server, account: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """Documented statuses, bodies and content types; never a 5xx; negative data rejected."""
    count_case(f"account schemathesis [{session_kind}]")
    headers = _session(server.url, case.operation.path, account["email"]) if session_kind == "session" else {}
    case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() not in {"cookie", "x-csrf-token"}}
    try:
        case.call_and_validate(base_url=server.url, checks=CHECKS, headers=headers)
    finally:
        if case.operation.path == "/api/account/logout":
            _SESSION.clear()
