"""The packages of a server environment that worked, to diff a later failure against.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "healthy_envs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("engine", sa.String(64), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("python", sa.String(512), nullable=False),
        sa.Column("packages", sa.JSON(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_healthy_envs_engine", "healthy_envs", ["engine"])
    op.create_index("ix_healthy_envs_target", "healthy_envs", ["target"])


def downgrade() -> None:
    op.drop_index("ix_healthy_envs_target", table_name="healthy_envs")
    op.drop_index("ix_healthy_envs_engine", table_name="healthy_envs")
    op.drop_table("healthy_envs")
