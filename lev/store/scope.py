"""The caller's scope as plain data: whose library, which folders, KB-only. Every visibility query takes one."""

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

    @property
    def is_unscoped(self) -> bool:
        return self.folder_ids is None
