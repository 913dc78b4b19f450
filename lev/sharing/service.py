"""Sharing a folder: invitations by email (sent, listed, accepted, declined, withdrawn), members and their roles, a
member leaving or removed (their items handed over), and publishing the folder's public page.

Every change to who reaches a folder ends every process's cached principals when it commits
(`lev.auth.principal_cache.changing_auth`): a removed member's next request, on any surface, sees nothing of it.
"""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, folder_visible, require, require_manager, require_owner, require_whole_library
from lev.auth.principal_cache import changing_auth
from lev.core import context
from lev.core.errors import invalid_body, not_found
from lev.plumbing.deps import Deps
from lev.store import members as member_store
from lev.store import publications as publication_store
from lev.store import tokens as token_store
from lev.store import users as user_store

SLUG_BYTES = 24  # 192 bits of randomness (at least 128 asked)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")


def _role(value: object) -> str:
    if value not in member_store.ROLES:
        raise invalid_body(f"role must be 'editor' or 'viewer', not {str(value)[:40]!r}.")
    return str(value)


def _email(value: object) -> str:
    email = str(value or "").strip()
    if len(email) > 320 or not _EMAIL.fullmatch(email) or any(ord(c) < 0x20 for c in email):
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


async def invite(deps: Deps, p: Principal, folder_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Invite a person by email as an editor or a viewer (the owner's, with a whole-library write credential)."""
    require_manager(p, "share folders")
    email, role = _email(body.get("email")), _role(body.get("role"))
    async with deps.db.transaction() as s:
        require_owner(await _reach(s, p, folder_id, lock=True), "invite people")
        await member_store.lock_folder(s, folder_id)
        if email.lower() == (await _email_of(s, p)).lower():
            raise invalid_body("You cannot invite yourself: you own this folder already.")
        if await member_store.is_member_email(s, folder_id, email):
            raise invalid_body(f"{email} is a member of this folder already; change their role instead.")
        created = await member_store.create_invitation(s, folder_id, email, role, p.user_id)
        if created is None:
            raise invalid_body(f"{email} has been invited to this folder already; withdraw that invitation to send "
                               "another.")
    return created


async def invitations(deps: Deps, p: Principal, *, note: bool = True) -> dict[str, Any]:
    """The pending invitations addressed to the caller's email (`note`: counted in the request's activity entry)."""
    require_whole_library(p, "see invitations")
    async with deps.db.read_session() as s:
        found = await member_store.invitations_for(s, await _email_of(s, p))
    if note:
        context.note_results(len(found))
    return {"invitations": [{k: v for k, v in i.items() if k != "email"} for i in found]}


async def answer(deps: Deps, p: Principal, invitation_id: uuid.UUID, accept: bool) -> dict[str, Any]:
    """Accept (join the folder with the invitation's role) or decline an invitation addressed to the caller."""
    require_manager(p, "answer invitations")
    async with changing_auth(deps.db) as s:
        invitation = await member_store.take_invitation(s, invitation_id, await _email_of(s, p))
        if invitation is None:
            raise not_found("There is no pending invitation with this id for you.")
        folder = await member_store.folder(s, invitation["folder_id"])
        role = invitation["role"]
        if accept and folder is not None and folder["user_id"] != p.user_id:
            await member_store.lock_folder(s, folder["id"])
            await member_store.add_member(s, folder["id"], p.user_id, role)
        await member_store.answer_invitation(s, invitation_id, "accepted" if accept else "declined")
    return {"folder_id": str(invitation["folder_id"]), "role": role}


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
            raise invalid_body("The owner's role cannot change: an owner stays the owner of their folder.")
        await member_store.lock_folder(s, folder_id)
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
            raise invalid_body("The owner cannot leave their own folder; delete the folder instead.")
        folder = await member_store.folder(s, folder_id)
        assert folder is not None
        await member_store.lock_folder(s, folder_id)
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
