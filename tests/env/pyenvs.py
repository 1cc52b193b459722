"""Real Python environments for tests: venvs, hand-built wheels, offline pip, tree hashes.

Everything works offline: wheels are built by hand (a zip with METADATA, WHEEL, RECORD) or
repacked from a distribution installed here, and pip installs only from a local folder.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(where: Path, name: str, version: str, files: Mapping[str, str]) -> Path:
    """A pure-Python wheel of ``name`` ``version`` holding ``files`` (path → text)."""
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    content = {p: t.encode() for p, t in files.items()}
    content[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    content[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    return _zip(where / f"{stem}-py3-none-any.whl", content, info)


def repack(where: Path, distribution: str) -> Path:
    """A wheel of a distribution installed in this Python, from its RECORD: the real files,
    so an overlay can install the real package offline."""
    dist = metadata.distribution(distribution)
    name = dist.metadata["Name"].replace("-", "_")
    infos = {Path(str(e)).parts[0] for e in dist.files or [] if ".dist-info" in str(e)}
    info = next(iter(infos)) if len(infos) == 1 else f"{name}-{dist.version}.dist-info"
    content: dict[str, bytes] = {}
    for entry in dist.files or []:
        path = Path(str(dist.locate_file(entry)))
        text = str(entry)
        if text.startswith("..") or "__pycache__" in text or not path.is_file():
            continue
        if text.endswith(("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")):
            continue
        content[text] = path.read_bytes()
    tag = "py3-none-any" if not any(p.endswith(".so") for p in content) else _platform_tag()
    content.setdefault(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\n"
                       f"Root-Is-Purelib: false\nTag: {tag}\n".encode())  # fmt: skip
    return _zip(where / f"{name}-{dist.version}-{tag}.whl", content, info)


def _platform_tag() -> str:
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{plat}"


def _zip(out: Path, content: dict[str, bytes], info: str) -> Path:
    record = [_record_line(p, data) for p, data in content.items()]
    record.append(f"{info}/RECORD,,")
    content[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in content.items():
            z.writestr(path, data)
    return out


def make_venv(path: Path, *, layered_on_this: bool = False) -> Path:
    """A venv without pip at ``path``; its python. ``layered_on_this``: it also sees this
    Python's site-packages (a .pth after its own), as a venv with system packages would."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    if layered_on_this:
        (site_packages(python) / "zz_layer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return Path(out.stdout.strip())


def pip_install(python: Path, wheels: Path, *requirements: str) -> None:
    """Install into ``python``'s environment (a real install: an older version is
    uninstalled) with this Python's pip (``--python``), offline (only from ``wheels``),
    without dependencies."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", "--no-deps", "--no-index", "--find-links", str(wheels),
         *requirements],
        check=True, capture_output=True,
    )  # fmt: skip


def offline_pip_env(wheels: Path) -> dict[str, str]:
    """Environment variables that make any pip (an overlay's too) install only from
    ``wheels``."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip


def tree_hash(root: Path) -> str:
    """One digest of every file under ``root``: paths, modes and bytes (symlinks by target)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            h.update(str(path.relative_to(root)).encode() + b"\0")
            if path.is_symlink():
                h.update(b"->" + os.readlink(path).encode())
                continue
            h.update(oct(path.stat().st_mode).encode())
            h.update(path.read_bytes())
    return h.hexdigest()
