"""A throwaway PostgreSQL server on loopback, from the machine's own PostgreSQL binaries.

The findings store promises that a PostgreSQL URL works for a team; these helpers let the
tests prove it against a real server instead of compiling DDL. The server runs from a
temporary folder, as the ``postgres`` user when the tests run as root (PostgreSQL refuses
root), and is stopped at the end of the session.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

USER = "servedoctor"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_server_user() -> list[str] | None:
    """The prefix that runs a command as a non-root user (None: impossible here)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return None
    return [runuser, "-u", "postgres", "--"] if runuser else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unavailable() -> str | None:
    """Why no server can be started here, or None."""
    if _binary("initdb") is None or _binary("pg_ctl") is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    if _as_server_user() is None:
        return "running as root without a 'postgres' user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed"
    return None


@dataclass(frozen=True)
class Server:
    url: str  # SQLAlchemy URL base, without a database name
    data: Path
    prefix: tuple[str, ...]

    def stop(self) -> None:
        pg_ctl = _binary("pg_ctl")
        assert pg_ctl
        subprocess.run(
            [*self.prefix, pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )


def start_server(folder: Path) -> Server:
    """Start a server in ``folder``; raises SubprocessError when this machine cannot."""
    prefix = _as_server_user() or []
    folder.mkdir(parents=True, exist_ok=True)
    if prefix:
        shutil.chown(folder, user="postgres")
        folder.chmod(0o700)
    data = folder / "data"
    port = _free_port()
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    assert initdb and pg_ctl
    subprocess.run(
        [*prefix, initdb, "-D", str(data), "--auth=trust", "-U", USER, "-E", "UTF8"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [*prefix, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return Server(f"postgresql+psycopg://{USER}@127.0.0.1:{port}", data, tuple(prefix))


def create_database(base_url: str, name: str) -> str:
    """A fresh, empty database on the server; its SQLAlchemy URL."""
    import psycopg

    conninfo = base_url.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base_url}/{name}"
