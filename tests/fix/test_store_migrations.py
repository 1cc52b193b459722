"""The findings store's schema comes from Alembic migrations shipped in the package."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from servedoctor.experiments.trial import Trial
from servedoctor.findings import migrate
from servedoctor.findings.schema import Base
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Change

# What the first release's ``Base.metadata.create_all`` made on SQLite (no alembic_version).
FIRST_RELEASE_DDL = """
CREATE TABLE fingerprints (id INTEGER NOT NULL, "key" VARCHAR(64) NOT NULL, data JSON NOT NULL,
    created_at DATETIME NOT NULL, PRIMARY KEY (id));
CREATE UNIQUE INDEX ix_fingerprints_key ON fingerprints ("key");
CREATE TABLE changes (id INTEGER NOT NULL, "key" VARCHAR(700) NOT NULL, kind VARCHAR(16) NOT NULL,
    name VARCHAR(256) NOT NULL, value TEXT, PRIMARY KEY (id));
CREATE UNIQUE INDEX ix_changes_key ON changes ("key");
CREATE TABLE runs (id INTEGER NOT NULL, started_at DATETIME NOT NULL, finished_at DATETIME,
    status VARCHAR(16) NOT NULL, engine VARCHAR(32) NOT NULL, argv JSON NOT NULL, env JSON NOT NULL,
    options JSON NOT NULL, fingerprint_id INTEGER, error_class VARCHAR(32), phase VARCHAR(32),
    summary TEXT NOT NULL, reason TEXT NOT NULL, fix JSON NOT NULL, PRIMARY KEY (id),
    FOREIGN KEY(fingerprint_id) REFERENCES fingerprints (id));
CREATE INDEX ix_runs_status ON runs (status);
CREATE TABLE trials (id INTEGER NOT NULL, run_id INTEGER NOT NULL, "index" INTEGER NOT NULL,
    role VARCHAR(16) NOT NULL, tested_id INTEGER, why TEXT NOT NULL, argv JSON NOT NULL,
    env JSON NOT NULL, outcome VARCHAR(24) NOT NULL, error_class VARCHAR(32), phase VARCHAR(32),
    against VARCHAR(32), diagnosis JSON, duration_s FLOAT NOT NULL, gpu_peak_mib FLOAT,
    exit_code INTEGER, run_dir TEXT, created_at DATETIME NOT NULL, PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    FOREIGN KEY(tested_id) REFERENCES changes (id));
CREATE INDEX ix_trials_run_id ON trials (run_id);
CREATE TABLE outcomes (id INTEGER NOT NULL, run_id INTEGER NOT NULL, change_id INTEGER NOT NULL,
    fingerprint_id INTEGER, error_class VARCHAR(32), verdict VARCHAR(16) NOT NULL, PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE,
    FOREIGN KEY(change_id) REFERENCES changes (id),
    FOREIGN KEY(fingerprint_id) REFERENCES fingerprints (id));
CREATE INDEX ix_outcomes_error_class ON outcomes (error_class);
CREATE INDEX ix_outcomes_run_id ON outcomes (run_id);
CREATE INDEX ix_outcomes_fingerprint_id ON outcomes (fingerprint_id);
CREATE INDEX ix_outcomes_change_id ON outcomes (change_id);
CREATE TABLE trial_changes (trial_id INTEGER NOT NULL, change_id INTEGER NOT NULL,
    PRIMARY KEY (trial_id, change_id), FOREIGN KEY(trial_id) REFERENCES trials (id) ON DELETE CASCADE,
    FOREIGN KEY(change_id) REFERENCES changes (id));
INSERT INTO fingerprints VALUES (1, 'abc', '{"gpu": "old"}', '2025-01-01 00:00:00');
INSERT INTO runs VALUES (1, '2025-01-01 00:00:00', NULL, 'interrupted', 'vllm', '["vllm"]', '{}',
    '{}', 1, 'oom', 'load', 'out of memory', '', '[]');
INSERT INTO trials VALUES (1, 1, 0, 'baseline', NULL, '', '["vllm"]', '{}', 'failed', 'oom',
    'load', NULL, NULL, 12.5, NULL, 1, NULL, '2025-01-01 00:00:00');
"""


def test_a_first_release_store_is_stamped_and_upgraded_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(FIRST_RELEASE_DDL)
    store = FindingsStore.open(path)
    with store.engine.connect() as conn:
        assert migrate.current_revision(conn) == migrate.head_revision() != migrate.BASELINE
        assert "owner_pid" in {c["name"] for c in inspect(conn).get_columns("runs")}
    old = store.run(1)  # its data is all there
    assert old is not None and old.status == "interrupted" and old.engine == "vllm"
    assert old.summary == "out of memory" and [t.duration_s for t in old.trials] == [12.5]
    store.reopen(1)  # and it can be resumed and written to
    tested = Change("flag", "--x", "1")
    store.add_trial(1, Trial(index=1, role="candidate", changes=(tested,), tested=tested, why="",
                             argv=("vllm",), env={}, outcome="healthy", diagnosis=None,
                             duration_s=1.0))  # fmt: skip
    again = FindingsStore.open(path).run(1)
    assert again is not None and len(again.trials) == 2


def test_the_models_match_the_migrations(store_url_for_test: str) -> None:
    """A change to schema.py without a migration (or the reverse) fails here."""
    store = FindingsStore.open(store_url_for_test)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_opening_a_store_at_head_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    FindingsStore.open(path).start_run(engine="x", argv=[], env={}, options={}, fingerprint={})
    before = sqlite3.connect(path).execute("SELECT * FROM alembic_version").fetchall()
    store = FindingsStore.open(path)
    assert sqlite3.connect(path).execute("SELECT * FROM alembic_version").fetchall() == before
    assert len(store.runs()) == 1


def test_the_migrations_ship_inside_the_package() -> None:
    assert migrate.MIGRATIONS.is_relative_to(Path(migrate.__file__).parent)
    assert (migrate.MIGRATIONS / "env.py").is_file()
    assert migrate.head_revision() == "0004"
