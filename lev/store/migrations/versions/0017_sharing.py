"""Shared folders and public pages (issue 41): a folder's members with their roles, the invitations sent by email
(pending until accepted or declined), and a folder's public page (an unguessable slug).

Revision ID: 0017
Revises: 0018
"""

from alembic import op

revision = "0017"
down_revision = "0018"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS folder_members (
            folder_id uuid NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            role text NOT NULL CHECK (role IN ('editor', 'viewer')),
            added_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (folder_id, user_id)
        );
        CREATE INDEX IF NOT EXISTS folder_members_user ON folder_members (user_id);

        CREATE TABLE IF NOT EXISTS folder_invitations (
            id uuid PRIMARY KEY,
            folder_id uuid NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
            email text NOT NULL,
            role text NOT NULL CHECK (role IN ('editor', 'viewer')),
            invited_by uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'declined')),
            created_at timestamptz NOT NULL DEFAULT now(),
            responded_at timestamptz
        );
        CREATE UNIQUE INDEX IF NOT EXISTS folder_invitations_pending
            ON folder_invitations (folder_id, lower(email)) WHERE status = 'pending';
        CREATE INDEX IF NOT EXISTS folder_invitations_email
            ON folder_invitations (lower(email)) WHERE status = 'pending';

        CREATE TABLE IF NOT EXISTS folder_publications (
            folder_id uuid PRIMARY KEY REFERENCES folders(id) ON DELETE CASCADE,
            slug text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL DEFAULT now()
        );
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS folder_publications;
        DROP TABLE IF EXISTS folder_invitations;
        DROP TABLE IF EXISTS folder_members;
    """)
