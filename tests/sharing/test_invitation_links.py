"""Issue 47 item 2: an invitation reaches only the owner of its address. An open sign-up with the invited address
sees nothing and cannot accept; the secret link answers it (read, accept, decline; once; a new link voids the old;
an expired one is dead) and verifies the address it was sent to; with a mail server (a loopback SMTP stand-in),
Lev mails the link, and an account verifies its address by a mailed link of its own. No code is ever logged."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.test_account import Browser
from tests.stack import Admin, LiveServer, free_port, new_user


def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


def err(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json().get("message"), r.text
    return str(r.json()["message"])


def code_of(url: str) -> str:
    match = re.fullmatch(r"https?://[^/]+/(?:invite|verify-email)/([A-Za-z0-9_-]{40,})", url)
    assert match, url
    return match.group(1)


def note(c: httpx.Client, folder: str, text: str) -> None:
    ok(c.post("/api/v1/ingest", json={"kind": "text", "text": text, "title": text[:20], "folder_id": folder}))


def test_an_open_sign_up_with_the_invited_address_sees_nothing_and_cannot_accept(api, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    alice = new_user(admin)
    folder = alice.folder("Hiring plans")
    a = api(alice.token(write=True, kb_only=False))
    note(a, folder, "The salary bands for next year are confidential.")
    newhire = f"newhire-{alice.id.hex[:8]}@example.com"
    inv = ok(a.post(f"/api/v1/folders/{folder}/invitations", json={"email": newhire, "role": "viewer"}), 201)

    mallory = Browser(server.url)  # signs up with the address: sign-up is open and proves nothing
    assert mallory.signup(newhire).status_code == 201
    assert ok(mallory.client.get("/api/v1/invitations")) == {"invitations": [], "email_verified": False}
    assert ok(mallory.client.get("/api/account"))["email_verified"] is False
    err(mallory.call("POST", f"/api/v1/invitations/{inv['id']}/accept"), 404, "not_found")
    err(mallory.call("POST", f"/api/v1/invitations/{inv['id']}/decline"), 404, "not_found")
    err(mallory.client.get(f"/api/v1/folders/{folder}/members"), 404, "not_found")
    assert folder not in {f["id"] for f in ok(mallory.client.get("/api/v1/folders"))["folders"]}
    assert ok(mallory.client.get("/api/v1/search", params={"q": "salary bands", "mode": "keyword"}))["results"] == []
    page = mallory.client.get("/")
    assert "Hiring plans" not in page.text and alice.email not in page.text
    pending = ok(a.get(f"/api/v1/folders/{folder}/members"))["invitations"]
    assert [i["status"] for i in pending] == ["pending"]  # nothing changed


def test_the_link_answers_once_verifies_the_address_and_is_never_logged(api, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    alice = new_user(admin)
    folder = alice.folder("Reading circle")
    a = api(alice.token(write=True, kb_only=False))
    note(a, folder, "Axolotls regrow their limbs.")
    invited = f"ines-{alice.id.hex[:8]}@example.com"
    inv = ok(a.post(f"/api/v1/folders/{folder}/invitations", json={"email": invited, "role": "editor"}), 201)
    code = code_of(inv["accept_url"])
    assert inv["emailed"] is False and inv["link_expires_at"] > inv["created_at"]
    stored = admin.sql("SELECT code_digest FROM folder_invitations WHERE id = :i", i=inv["id"])[0][0]
    assert code.encode() not in bytes(stored) and len(bytes(stored)) == 32  # a digest, never the link

    # a new link voids the old one; only the owner makes one
    stranger = new_user(admin)
    err(api(stranger.token(write=True, kb_only=False)).post(
        f"/api/v1/folders/{folder}/invitations/{inv['id']}/link"), 404, "not_found")
    renewed = ok(a.post(f"/api/v1/folders/{folder}/invitations/{inv['id']}/link"), 201)
    new_code = code_of(renewed["accept_url"])
    assert new_code != code and renewed["id"] == inv["id"]

    ines = Browser(server.url)
    assert ines.signup(invited.upper()).status_code == 201
    err(ines.client.get(f"/api/v1/invitation-links/{code}"), 404, "not_found")
    err(ines.call("POST", f"/api/v1/invitation-links/{code}", json={"accept": True}), 404, "not_found")
    seen = ok(ines.client.get(f"/api/v1/invitation-links/{new_code}"))
    assert (seen["folder_name"], seen["invited_by"], seen["role"], seen["email"], seen["own"]) == (
        "Reading circle", alice.email, "editor", invited, False)
    page = ines.client.get(f"/invite/{new_code}")
    assert page.status_code == 200 and "Join Reading circle" in page.text and "Accept" in page.text
    err(ines.call("POST", f"/api/v1/invitation-links/{new_code}", json={"accept": "yes"}), 400, "invalid_body")
    assert ok(ines.call("POST", f"/api/v1/invitation-links/{new_code}", json={"accept": True})) == {
        "folder_id": folder, "role": "editor"}
    assert folder in {f["id"] for f in ok(ines.client.get("/api/v1/folders"))["folders"]}
    assert ok(ines.client.get("/api/account"))["email_verified"] is True  # the link proved the inbox
    err(ines.call("POST", f"/api/v1/invitation-links/{new_code}", json={"accept": True}), 404, "not_found")  # once
    dead = ines.client.get(f"/invite/{new_code}")
    assert dead.status_code == 404 and "does not work" in dead.text

    # a verified address sees later invitations without links, and answers them by id
    other = alice.folder("Second circle")
    inv2 = ok(a.post(f"/api/v1/folders/{other}/invitations", json={"email": invited, "role": "viewer"}), 201)
    listed = ok(ines.client.get("/api/v1/invitations"))
    assert listed["email_verified"] is True and [i["id"] for i in listed["invitations"]] == [inv2["id"]]
    ok(ines.call("POST", f"/api/v1/invitations/{inv2['id']}/decline"), 204)

    # the links never reach the log: neither the activity entries nor the server's log file
    time.sleep(1.5)  # the activity writer's batch
    logged = [e["method"] for e in ok(ines.client.get("/api/account/activity"))["entries"]]
    assert "POST /api/v1/invitation-links/{code}" in logged and not any(code in m for m in logged), logged
    rows = admin.sql("SELECT count(*) FROM activity WHERE method LIKE :c OR method LIKE :n",
                     c=f"%{code}%", n=f"%{new_code}%")
    assert rows[0][0] == 0
    text = server.log_path.read_text(errors="replace")
    assert code not in text and new_code not in text


def test_declining_by_link_the_owners_own_link_and_an_expired_link(api, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    alice = new_user(admin)
    folder = alice.folder("Garden")
    a_browser = Browser(server.url)
    a = api(alice.token(write=True, kb_only=False))
    to_decline = ok(a.post(f"/api/v1/folders/{folder}/invitations",
                           json={"email": "dee@example.com", "role": "viewer"}), 201)
    dee = Browser(server.url)
    assert dee.signup().status_code == 201
    code = code_of(to_decline["accept_url"])
    assert ok(dee.call("POST", f"/api/v1/invitation-links/{code}", json={"accept": False})) == {
        "folder_id": folder, "role": "viewer"}
    assert folder not in {f["id"] for f in ok(dee.client.get("/api/v1/folders"))["folders"]}
    assert ok(dee.client.get("/api/account"))["email_verified"] is False  # another address: nothing verified
    assert ok(a.get(f"/api/v1/folders/{folder}/members"))["invitations"] == []

    own = ok(a.post(f"/api/v1/folders/{folder}/invitations", json={"email": "own@example.com", "role": "viewer"}),
             201)
    own_code = code_of(own["accept_url"])
    assert ok(a.get(f"/api/v1/invitation-links/{own_code}"))["own"] is True
    assert "own folder" in err(a.post(f"/api/v1/invitation-links/{own_code}", json={"accept": True}), 409,
                               "already_member")
    read_only = api(alice.token(write=False, kb_only=False))
    err(read_only.post(f"/api/v1/invitation-links/{own_code}", json={"accept": True}), 403, "capability_denied")
    scoped = api(alice.token(write=True, kb_only=False, folders=[folder]))
    err(scoped.get(f"/api/v1/invitation-links/{own_code}"), 403, "forbidden_scope")

    admin.sql("UPDATE folder_invitations SET code_expires_at = now() - interval '1 minute' WHERE id = :i",
              i=own["id"])
    err(dee.client.get(f"/api/v1/invitation-links/{own_code}"), 404, "not_found")
    err(dee.call("POST", f"/api/v1/invitation-links/{own_code}", json={"accept": True}), 404, "not_found")
    err(dee.client.get("/api/v1/invitation-links/not%20a%20code"), 400, "invalid_body")
    signed_out = httpx.get(f"{server.url}/invite/{own_code}")
    assert signed_out.status_code == 200 and "Sign in" in signed_out.text and "Garden" not in signed_out.text
    del a_browser


class MailStandIn:
    """An SMTP server on loopback (aiosmtpd) that keeps every message it is given."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        self.messages: list[EmailMessage] = []
        self.logins: list[tuple[bytes, bytes]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                with outer._lock:
                    outer.messages.append(message_from_bytes(envelope.original_content or envelope.content,
                                                               policy=policy.default))  # type: ignore[arg-type]
                return "250 OK"

        def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
            good = isinstance(data, LoginPassword) and (data.login, data.password) == (b"lev", b"s3cret")
            if isinstance(data, LoginPassword):
                self.logins.append((data.login, data.password))
            return AuthResult(success=good)

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=free_port(), authenticator=authenticate,
                                     auth_require_tls=False, auth_required=True)  # loopback only
        self.controller.start()
        self.url = f"smtp://lev:s3cret@127.0.0.1:{self.controller.port}"

    def to(self, address: str, timeout: float = 20) -> EmailMessage:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for m in self.messages:
                    if m["To"] == address:
                        return m
            time.sleep(0.1)
        raise AssertionError(f"no mail to {address}")

    def close(self) -> None:
        self.controller.stop()


@pytest.fixture(scope="module")
def mail() -> Iterator[MailStandIn]:
    m = MailStandIn()
    yield m
    m.close()


@pytest.fixture(scope="module")
def mailing(data_dir: Path, server: LiveServer, mail: MailStandIn) -> Iterator[LiveServer]:
    srv = LiveServer(data_dir, {"LEV_SMTP_URL": mail.url, "LEV_SMTP_FROM": "Lev <lev@example.com>",
                                "LEV_RATE_LIMITS": "off", "LEV_LIMIT_SIGN_UP_IP": "100000/hour"},
                     log_name="mailing", args=["--no-workers-inline"]).start()
    yield srv
    srv.stop()


def test_with_a_mail_server_the_link_is_mailed_and_an_address_verifies_by_mail(admin: Admin, mailing: LiveServer,
                                                                              mail: MailStandIn) -> None:
    invitee = Browser(mailing.url)
    assert invitee.signup().status_code == 201
    owner = Browser(mailing.url)
    assert owner.signup().status_code == 201
    folder = ok(owner.call("POST", "/api/v1/folders", json={"name": "Field notes"}), 201)["id"]
    inv = ok(owner.call("POST", f"/api/v1/folders/{folder}/invitations",
                        json={"email": invitee.email, "role": "viewer"}), 201)
    assert inv["emailed"] is True and mail.logins[-1] == (b"lev", b"s3cret")  # Lev signs in to the mail server
    sent = mail.to(invitee.email)
    body = sent.get_content()
    assert sent["From"] == "Lev <lev@example.com>" and "Field notes" in sent["Subject"]
    assert inv["accept_url"] in body and owner.email in body

    # the invitee verifies the address by a mail of their own; then the invitation shows in the library
    assert ok(invitee.client.get("/api/v1/invitations"))["invitations"] == []
    err(invitee.call("POST", "/api/account/email/verification/nonsense-code"), 404, "not_found")
    state = ok(invitee.call("POST", "/api/account/email/verification"))
    assert state == {"email": invitee.email, "email_verified": False, "sent": True}
    err(invitee.call("POST", "/api/account/email/verification"), 429, "rate_limited")  # one a minute
    verification = [m for m in mail.messages if m["To"] == invitee.email and "Verify" in m["Subject"]][0]
    link = re.search(r"https?://\S+/verify-email/\S+", verification.get_content())
    assert link is not None
    code = code_of(link.group(0))
    page = invitee.client.get(f"/verify-email/{code}")
    assert page.status_code == 200 and "Confirm my address" in page.text
    err(owner.call("POST", f"/api/account/email/verification/{code}"), 404, "not_found")  # another account's
    assert ok(invitee.call("POST", f"/api/account/email/verification/{code}")) == {
        "email": invitee.email, "email_verified": True}
    err(invitee.call("POST", f"/api/account/email/verification/{code}"), 404, "not_found")  # once
    assert ok(invitee.call("POST", "/api/account/email/verification"))["sent"] is False
    listed = ok(invitee.client.get("/api/v1/invitations"))["invitations"]
    assert [i["id"] for i in listed] == [inv["id"]]
    ok(invitee.call("POST", f"/api/v1/invitations/{inv['id']}/accept"))
    assert folder in {f["id"] for f in ok(invitee.client.get("/api/v1/folders"))["folders"]}


def test_without_a_mail_server_verification_by_mail_is_refused_in_words(server) -> None:  # type: ignore[no-untyped-def]
    b = Browser(server.url)
    assert b.signup().status_code == 201
    assert "LEV_SMTP_URL" in err(b.call("POST", "/api/account/email/verification"), 400,
                                 "mail_unavailable")
    err(httpx.post(f"{server.url}/api/account/email/verification"), 401, "not_signed_in")


def test_a_verification_link_for_an_address_the_account_no_longer_has_is_a_conflict(server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    """The link verifies the address it was sent to; once the account's address is another, it is 409
    address_changed, and changes nothing (asked again, the same answer)."""
    import hashlib

    b = Browser(server.url)
    assert b.signup().status_code == 201
    code = "changed-address-" + "x" * 32
    admin.sql("INSERT INTO email_verifications (code_digest, user_id, email, created_at, expires_at) "
              "VALUES (:d, :u, :e, now(), now() + interval '1 hour')",
              d=hashlib.sha256(code.encode()).digest(), u=b.user_id, e="earlier-" + b.email)
    assert "no longer the one" in err(b.call("POST", f"/api/account/email/verification/{code}"), 409,
                                      "address_changed")
    assert ok(b.client.get("/api/account"))["email_verified"] is False
    err(b.call("POST", f"/api/account/email/verification/{code}"), 409, "address_changed")
