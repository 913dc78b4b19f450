"""Invitations reach only the owner of their address (issue 47): each pending invitation has a secret link (its
SHA-256 digest kept, never the link) that accepts it, and an account's address counts as its own only once Lev has
verified it (`users.email_verified_at`: by an invitation link or a verification mail sent to it, or the operator's
`lev user create`). Addresses of earlier accounts are unverified: their pending invitations need a link.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE users ADD COLUMN IF NOT EXISTS email_verified_at timestamptz;
        ALTER TABLE folder_invitations ADD COLUMN IF NOT EXISTS code_digest bytea,
                                       ADD COLUMN IF NOT EXISTS code_expires_at timestamptz;
        CREATE UNIQUE INDEX IF NOT EXISTS folder_invitations_code ON folder_invitations (code_digest)
            WHERE code_digest IS NOT NULL;
        CREATE TABLE IF NOT EXISTS email_verifications (
            code_digest bytea PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            email text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX IF NOT EXISTS email_verifications_user ON email_verifications (user_id, created_at DESC);
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS email_verifications;
        DROP INDEX IF EXISTS folder_invitations_code;
        ALTER TABLE folder_invitations DROP COLUMN IF EXISTS code_digest, DROP COLUMN IF EXISTS code_expires_at;
        ALTER TABLE users DROP COLUMN IF EXISTS email_verified_at;
    """)
