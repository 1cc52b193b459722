"""A real OpenSSH server on loopback as a "remote host" (tests/remote and bench/remote_latency.py).

``sshd`` runs as the current user on a free port with a host key, a client key and an
authorized_keys file made here; the client gets its own ``ssh -F`` config, so nothing of the
user's ~/.ssh is read or written. Every host name reaches it (``Host *``).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from servedoctor.remote.url import SshTarget

SSHD = Path("/usr/sbin/sshd")


def missing() -> str | None:
    """Why no sshd can be started here, or None."""
    if not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "no OpenSSH server or client: apt-get install openssh-server"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            return s.recv(4).startswith(b"SSH")
    except OSError:
        return False


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def start_sshd(root: Path) -> tuple[subprocess.Popen[bytes], SshTarget]:
    """Start sshd with its files under ``root``; the target reaches it as ``testhost``."""
    if os.geteuid() == 0:  # sshd running as root wants its privilege separation directory
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    _keygen(root / "host_key")
    _keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = _free_port()
    user = getpass.getuser()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n"
        f"AuthorizedKeysFile {root}/authorized_keys\nPidFile {root}/sshd.pid\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin yes\n"
        f"AllowUsers {user}\nAllowTcpForwarding yes\nLogLevel ERROR\n"
    )
    host_pub = (root / "host_key.pub").read_text().split()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (root / "ssh_config").write_text(
        f"Host *\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
        f"  IdentityFile {root}/client_key\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {root}/known_hosts\n  StrictHostKeyChecking yes\n"
        "  LogLevel ERROR\n"
    )
    with (root / "sshd.log").open("wb") as log:
        sshd = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(root / "sshd_config")],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 10.0
    while not _port_answers(port):
        if sshd.poll() is not None or time.monotonic() > deadline:
            sshd.kill()
            raise RuntimeError(f"sshd did not start: {(root / 'sshd.log').read_text()[-500:]}")
        time.sleep(0.05)
    return sshd, SshTarget(host="testhost", config_file=str(root / "ssh_config"))


def stop_sshd(sshd: subprocess.Popen[bytes]) -> None:
    sshd.terminate()
    sshd.wait(timeout=10)
