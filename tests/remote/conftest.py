"""A real OpenSSH server on loopback as the "remote host" (``sshd.py``), and the real-server
fixtures of tests/realserver (``tests/realserve.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sshd import missing, start_sshd, stop_sshd

from realserve import free_port, models, no_leftovers, offline_env  # noqa: F401 (fixtures)
from servedoctor.remote.url import SshTarget


@pytest.fixture(scope="session")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshTarget]:
    """An sshd on 127.0.0.1 that lets this user in with a key of its own."""
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    sshd, target = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield target
    stop_sshd(sshd)
