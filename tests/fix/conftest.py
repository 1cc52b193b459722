from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgserver import create_database, start_server, unavailable


@pytest.fixture(scope="session")
def postgres_base() -> Iterator[str]:
    """A real PostgreSQL server for this session (skipped where none can run).

    Its folder is outside pytest's (root-only) temporary tree: the server user must reach it.
    """
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="servedoctor-pg-"))
    try:
        try:
            server = start_server(folder)
        except (subprocess.SubprocessError, OSError) as exc:
            # the machine cannot run a server (no permission, no shared memory...): that is
            # the environment, not the store under test
            detail = getattr(exc, "stderr", b"") or b""
            pytest.skip(f"PostgreSQL did not start: {exc} {detail[-300:]!r}")
        try:
            yield server.url
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url_for_test(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh findings store: a SQLite file, or a new database on a real PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "f.db")
    base = request.getfixturevalue("postgres_base")
    name = "t_" + re.sub(r"\W+", "_", request.node.name).lower()[:50]
    return create_database(base, name)
