"""The schema of the first release (``Base.metadata.create_all``, no alembic_version).

A store that release created is stamped at this revision, not recreated.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fingerprints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_fingerprints_key", "fingerprints", ["key"], unique=True)
    op.create_table(
        "changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(700), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_changes_key", "changes", ["key"], unique=True)
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("engine", sa.String(32), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("fingerprint_id", sa.Integer(), nullable=True),
        sa.Column("error_class", sa.String(32), nullable=True),
        sa.Column("phase", sa.String(32), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("fix", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["fingerprint_id"], ["fingerprints.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("tested_id", sa.Integer(), nullable=True),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(24), nullable=False),
        sa.Column("error_class", sa.String(32), nullable=True),
        sa.Column("phase", sa.String(32), nullable=True),
        sa.Column("against", sa.String(32), nullable=True),
        sa.Column("diagnosis", sa.JSON(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("gpu_peak_mib", sa.Float(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("run_dir", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tested_id"], ["changes.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_trials_run_id", "trials", ["run_id"])
    op.create_table(
        "outcomes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("change_id", sa.Integer(), nullable=False),
        sa.Column("fingerprint_id", sa.Integer(), nullable=True),
        sa.Column("error_class", sa.String(32), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["change_id"], ["changes.id"]),
        sa.ForeignKeyConstraint(["fingerprint_id"], ["fingerprints.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_outcomes_error_class", "outcomes", ["error_class"])
    op.create_index("ix_outcomes_run_id", "outcomes", ["run_id"])
    op.create_index("ix_outcomes_fingerprint_id", "outcomes", ["fingerprint_id"])
    op.create_index("ix_outcomes_change_id", "outcomes", ["change_id"])
    op.create_table(
        "trial_changes",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("change_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["change_id"], ["changes.id"]),
        sa.PrimaryKeyConstraint("trial_id", "change_id"),
    )


def downgrade() -> None:
    for table in ("trial_changes", "outcomes", "trials", "runs", "changes", "fingerprints"):
        op.drop_table(table)
