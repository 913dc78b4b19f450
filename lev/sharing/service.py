"""Sharing a folder: invitations by email (sent, listed, accepted, declined, withdrawn), members and their roles, a
member leaving or removed (their items handed over), and publishing the folder's public page.

An invitation reaches only the owner of its address: it is answered through its secret link (mailed when Lev has a
mail server, else copied by the inviter), or by an account whose address Lev has verified; an account that merely
signed up with the address sees nothing.

Every change to who reaches a folder ends every process's cached principals when it commits
(`lev.auth.principal_cache.changing_auth`): a removed member's next request, on any surface, sees nothing of it.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, folder_visible, require, require_manager, require_owner, require_whole_library
from lev.auth.principal_cache import changing_auth
from lev.core import context
from lev.core.contract import INVITE_EMAIL, ecma_pattern
from lev.core.errors import ApiError, invalid_body, not_found
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.ports import MailError
from lev.store import members as member_store
from lev.store import publications as publication_store
from lev.store import tokens as token_store
from lev.store import users as user_store

SLUG_BYTES = 24  # 192 bits of randomness (at least 128 asked)
LINK_BYTES = 32
LINK_DAYS = 30  # an invitation's link works once, for this long; its owner can make a new one
LINK_PATH = "/invite/"
MAX_EMAIL_CHARS = 320  # InvitationCreate.email
DEAD_LINK = ("This invitation link does not work: it was answered, withdrawn or replaced by a newer one, or it "
             "expired. Ask the person who invited you for a new one.")
log = logs.get_logger("lev.sharing")


def _role(value: object) -> str:
    if value not in member_store.ROLES:
        raise invalid_body(f"role must be 'editor' or 'viewer', not {str(value)[:40]!r}.")
    return str(value)


def _email(value: object) -> str:
    email = str(value or "").strip()
    if len(email) > MAX_EMAIL_CHARS or not ecma_pattern(INVITE_EMAIL).search(email):
        raise invalid_body(f"email must be an email address such as name@example.com; {email[:80]!r} is not one.")
    return email


async def _email_of(s: AsyncSession, p: Principal) -> str:
    email = p.extra.get("email")
    if isinstance(email, str):
        return email
    user = await user_store.by_id(s, p.user_id)
    return str(user["email"]) if user else ""


async def _reach(s: AsyncSession, p: Principal, folder_id: uuid.UUID, *, lock: bool = False) -> str:
    """The caller's role on the folder, or 404 when it is out of their reach (or their token's scope)."""
    role = await member_store.role_of(s, p.user_id, folder_id, lock=lock) \
        if folder_visible(p.scope, folder_id) else None
    if role is None:
        raise not_found()
    return role


def digest(code: str) -> bytes:
    """What Lev keeps of a secret link's code."""
    return hashlib.sha256(code.encode()).digest()


def _new_link() -> tuple[str, bytes, datetime]:
    code = secrets.token_urlsafe(LINK_BYTES)
    return code, digest(code), datetime.now(UTC) + timedelta(days=LINK_DAYS)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:200]


async def _hand_out(deps: Deps, invitation: dict[str, Any], code: str, expires: datetime, folder_name: str,
                    inviter: str) -> dict[str, Any]:
    """The invitation with its link (shown to the inviter once), mailed to the address when Lev has a mail server."""
    url = f"{context.base_url()}{LINK_PATH}{code}"
    emailed = False
    if deps.mailer is not None:
        role = "an editor" if invitation["role"] == member_store.EDITOR else "a viewer"
        body = (f"{_one_line(inviter)} invites you to the folder “{_one_line(folder_name)}” on Lev, as {role}.\n\n"
                f"Open this link to accept or decline (it works once, until {expires:%Y-%m-%d}):\n{url}\n\n"
                "If you did not expect this invitation, ignore this mail.\n")
        try:
            await deps.mailer.send(invitation["email"], f"{_one_line(inviter)} invites you to "
                                   f"“{_one_line(folder_name)}” on Lev", body)
            emailed = True
        except MailError as exc:
            log.warning("invitation mail not sent", error=str(exc), invitation=invitation["id"])
    return {**invitation, "accept_url": url, "link_expires_at": expires.isoformat(), "emailed": emailed}


async def invite(deps: Deps, p: Principal, folder_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Invite a person by email as an editor or a viewer (the owner's, with a whole-library write credential): the
    invitation with its secret link, mailed to them when Lev has a mail server."""
    require_manager(p, "share folders")
    email, role = _email(body.get("email")), _role(body.get("role"))
    code, code_digest, expires = _new_link()
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id, lock=True), "invite people")
        await member_store.lock_folder_members(s, folder_id)
        inviter = await _email_of(s, p)
        if email.lower() == inviter.lower():
            raise ApiError("already_member", "You cannot invite yourself: you own this folder already.")
        if await member_store.is_member_email(s, folder_id, email):
            raise ApiError("already_member", f"{email} is a member of this folder already; change their role instead.")
        created = await member_store.create_invitation(s, folder_id, email, role, p.user_id, code_digest, expires)
        if created is None:
            raise ApiError("already_invited", f"{email} has been invited to this folder already; withdraw that "
                           "invitation to send another, or make a new link for it.")
        folder = await member_store.folder(s, folder_id)
    return await _hand_out(deps, created, code, expires, folder["name"] if folder else "", inviter)


async def new_link(deps: Deps, p: Principal, folder_id: uuid.UUID, invitation_id: uuid.UUID) -> dict[str, Any]:
    """A new secret link for a pending invitation (the folder's owner; the old link stops working), mailed again
    when Lev has a mail server."""
    require_manager(p, "share folders")
    code, code_digest, expires = _new_link()
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id), "make invitation links")
        changed = await member_store.set_invitation_code(s, folder_id, invitation_id, code_digest, expires)
        if changed is None:
            raise not_found("This folder has no pending invitation with this id.")
        folder = await member_store.folder(s, folder_id)
        inviter = await _email_of(s, p)
    return await _hand_out(deps, changed, code, expires, folder["name"] if folder else "", inviter)


async def _verified_email(s: AsyncSession, p: Principal) -> str | None:
    """The caller's address when Lev has verified it is theirs, else None."""
    user = await user_store.by_id(s, p.user_id)
    return str(user["email"]) if user and user.get("email_verified_at") else None


async def invitations(deps: Deps, p: Principal, *, note: bool = True) -> dict[str, Any]:
    """The pending invitations addressed to the caller's verified address (`note`: counted in the request's activity
    entry); none while the address is unverified (`email_verified` says so)."""
    require_whole_library(p, "see invitations")
    async with deps.db.read_session() as s:
        email = await _verified_email(s, p)
        found = await member_store.invitations_for(s, email) if email else []
    if note:
        context.note_results(len(found))
    return {"invitations": [_received(i) for i in found], "email_verified": email is not None}


def _received(i: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in i.items() if k != "email"}


async def _join(s: AsyncSession, p: Principal, invitation: dict[str, Any], accept: bool) -> dict[str, Any]:
    folder = await member_store.folder(s, invitation["folder_id"])
    role = invitation["role"]
    if accept and folder is not None and folder["user_id"] != p.user_id:
        await member_store.lock_folder_members(s, folder["id"])
        await member_store.add_member(s, folder["id"], p.user_id, role)
    await member_store.answer_invitation(s, invitation["id"], "accepted" if accept else "declined")
    return {"folder_id": str(invitation["folder_id"]), "role": role}


async def answer(deps: Deps, p: Principal, invitation_id: uuid.UUID, accept: bool) -> dict[str, Any]:
    """Accept (join the folder with the invitation's role) or decline an invitation addressed to the caller's
    verified address."""
    require_manager(p, "answer invitations")
    async with changing_auth(deps.db) as s:
        email = await _verified_email(s, p)
        invitation = await member_store.take_invitation(s, invitation_id, email) if email else None
        if invitation is None:
            raise not_found("There is no pending invitation with this id for you. An invitation to an address Lev "
                            "has not verified as yours is answered through the link sent with it.")
        return await _join(s, p, invitation, accept)


async def by_link(deps: Deps, p: Principal, code: str) -> dict[str, Any]:
    """The pending invitation a secret link stands for, as its invitee sees it (the page that answers it)."""
    require_manager(p, "answer invitations")
    async with deps.db.read_session() as s:
        found = await member_store.invitation_by_code(s, digest(code))
    if found is None:
        raise not_found(DEAD_LINK)
    return {"id": str(found["id"]), "folder_id": str(found["folder_id"]), "folder_name": found["folder_name"],
            "role": found["role"], "email": found["email"], "invited_by": found["invited_by_email"],
            "status": found["status"], "created_at": found["created_at"].isoformat(),
            "link_expires_at": found["code_expires_at"].isoformat(), "own": found["owner_id"] == p.user_id}


async def answer_link(deps: Deps, p: Principal, code: str, body: dict[str, Any]) -> dict[str, Any]:
    """Accept or decline (`{"accept": false}`) the invitation a secret link stands for: holding the link proves the
    inbox it was sent to, so the caller's address, when it is the invited one, counts as verified from then on."""
    require_manager(p, "answer invitations")
    accept = body.get("accept", True)
    if not isinstance(accept, bool):
        raise invalid_body("accept must be true (join the folder) or false (decline the invitation).")
    async with changing_auth(deps.db) as s:
        invitation = await member_store.invitation_by_code(s, digest(code), lock=True)
        if invitation is None:
            raise not_found(DEAD_LINK)
        if invitation["owner_id"] == p.user_id:
            raise ApiError("already_member",
                           "This invitation is to your own folder: send its link to the person you invited.")
        await user_store.verify_email(s, p.user_id, invitation["email"])
        return await _join(s, p, invitation, accept)


async def withdraw(deps: Deps, p: Principal, folder_id: uuid.UUID, invitation_id: uuid.UUID) -> None:
    require_manager(p, "withdraw invitations")
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id), "withdraw invitations")
        if not await member_store.delete_invitation(s, folder_id, invitation_id):
            raise not_found("This folder has no pending invitation with this id.")


async def members(deps: Deps, p: Principal, folder_id: uuid.UUID, *, note: bool = True) -> dict[str, Any]:
    """The folder's owner and members with their roles (anyone who reaches the folder may read them), and, for
    its owner, the pending invitations."""
    async with deps.db.read_session() as s:
        role = await _reach(s, p, folder_id)
        found = await member_store.list_members(s, folder_id)
        pending = await member_store.pending_of_folder(s, folder_id) if role == member_store.OWNER else None
    if note:
        context.note_results(len(found))
    out: dict[str, Any] = {"members": found}
    if pending is not None:
        out["invitations"] = pending
    return out


async def set_role(deps: Deps, p: Principal, folder_id: uuid.UUID, user_id: uuid.UUID,
                   body: dict[str, Any]) -> dict[str, Any]:
    """The owner changes a member's role; a member made a viewer no longer fills the folder from their feeds."""
    require_manager(p, "change roles")
    role = _role(body.get("role"))
    async with changing_auth(deps.db) as s:
        require_owner(await _reach(s, p, folder_id, lock=True), "change roles")
        if user_id == p.user_id:
            raise ApiError("owner_fixed", "The owner's role cannot change: an owner stays the owner of their folder.")
        await member_store.lock_folder_members(s, folder_id)
        if not await member_store.set_role(s, folder_id, user_id, role):
            raise not_found("This user is not a member of this folder.")
        if role == member_store.VIEWER:
            await member_store.unfile_feeds(s, folder_id, user_id)
        found = next(m for m in await member_store.list_members(s, folder_id) if m["user_id"] == str(user_id))
    return found


async def remove(deps: Deps, p: Principal, folder_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """The owner removes a member, or a member leaves. What they filed into the folder stays there as the owner's
    (`members.hand_over`); their tokens scoped to the folder lose it (revoked when it was their only folder)."""
    leaving = user_id == p.user_id
    require(p, "write")
    require_whole_library(p, "leave a folder" if leaving else "remove members")
    async with changing_auth(deps.db) as s:
        role = await _reach(s, p, folder_id)
        if not leaving:
            require_owner(role, "remove members")
        elif role == member_store.OWNER:
            raise ApiError("owner_fixed", "The owner cannot leave their own folder; delete the folder instead.")
        folder = await member_store.folder(s, folder_id)
        assert folder is not None
        await member_store.lock_folder_members(s, folder_id)
        if not await member_store.remove_member(s, folder_id, user_id):
            raise not_found("This user is not a member of this folder.")
        await member_store.hand_over(s, folder_id, user_id, folder["user_id"])
        await token_store.unscope_folder(s, folder_id, user_id)


def _publication(row: dict[str, Any]) -> dict[str, Any]:
    url = f"{context.base_url()}/p/{row['slug']}"
    return {"url": url, "feed_url": f"{url}/feed.atom", "created_at": row["created_at"].isoformat()}


async def publish(deps: Deps, p: Principal, folder_id: uuid.UUID) -> dict[str, Any]:
    """Turn on the folder's public page (the same URL when it is on already)."""
    require_manager(p, "publish folders")
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id, lock=True), "publish it")
        row = await publication_store.publish(s, folder_id, secrets.token_urlsafe(SLUG_BYTES))
    return _publication(row)


async def publication(deps: Deps, p: Principal, folder_id: uuid.UUID) -> dict[str, Any]:
    async with deps.db.read_session() as s:
        await _reach(s, p, folder_id)
        row = await publication_store.of_folder(s, folder_id)
    if row is None:
        raise not_found("This folder is not published.")
    return _publication(row)


async def unpublish(deps: Deps, p: Principal, folder_id: uuid.UUID) -> None:
    """Turn the public page off: the page and its feed answer 404 from the commit on."""
    require_manager(p, "unpublish folders")
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id, lock=True), "unpublish it")
        await publication_store.unpublish(s, folder_id)


async def page_view(deps: Deps, p: Principal, folder_id: uuid.UUID) -> dict[str, Any]:
    """What a folder's page shows of its sharing: members, pending invitations (its owner's view) and the public
    page's URLs (None when it is off)."""
    view = await members(deps, p, folder_id, note=False)
    async with deps.db.read_session() as s:
        row = await publication_store.of_folder(s, folder_id)
    return {**view, "publication": _publication(row) if row else None}


async def saver(deps: Deps, p: Principal, item_id: uuid.UUID) -> str | None:
    """The email of whoever saved an item the caller sees through a shared folder; None for the caller's own."""
    async with deps.db.read_session() as s:
        return await member_store.saver_email(s, item_id, p.user_id)
