"""The caller's scope as plain data: whose library, which folders (shared ones included), KB-only. Every visibility
query takes one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """What a caller may see: one user's library, whole or limited to folders, optionally KB-only."""
    user_id: uuid.UUID
    folder_ids: frozenset[uuid.UUID] | None  # None = whole library
    kb_only: bool = False
    token_id: uuid.UUID | None = None  # a folder-scoped token also sees the unfiled items it created
    # The folders whose items are seen whoever saved them: those shared with the user and the user's own folders
    # that have members (read with the credential: `lev.store.members.shared_ids`). Empty for most users, and
    # then every statement is the one-library statement.
    shared: frozenset[uuid.UUID] = frozenset()
    # The other people of those folders (owners and members): nobody else's items can be in them. It bounds the
    # shared rule by an indexed `user_id` list.
    peers: frozenset[uuid.UUID] = frozenset()

    @property
    def is_unscoped(self) -> bool:
        return self.folder_ids is None

    @property
    def shared_in_scope(self) -> frozenset[uuid.UUID]:
        """The shared folders this scope reaches (all of them for a whole-library scope)."""
        return self.shared if self.folder_ids is None else self.shared & self.folder_ids

    def own_only(self) -> Scope:
        """The same scope without the shared folders: the caller's own items only (export)."""
        return Scope(self.user_id, self.folder_ids, self.kb_only, self.token_id)  # shared and peers empty
