"""Package trials run in an overlay of the server's environment: real pip, real wheels, a
real server process; the environment itself is never written."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from servedoctor.diagnose import diagnose_path
from servedoctor.experiments.command import parse
from servedoctor.experiments.overlay import Overlays, requirement_of
from servedoctor.experiments.planner import Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import LaunchReport
from servedoctor.model import Change

SERVER = """
import sdfake, sys
if sdfake.__version__ != "1.0":
    print(f"ImportError: sdfake>=1,<2 is required for a normal functioning of this module, "
          f"but found sdfake=={sdfake.__version__}.")
    sys.exit(1)
print("INFO:     Uvicorn running on http://127.0.0.1:8000")
"""


def _wheel(where: Path, version: str) -> Path:
    """A minimal pure-Python wheel of ``sdfake`` (built by hand: no network, no build deps)."""
    name = f"sdfake-{version}"
    files = {
        "sdfake/__init__.py": f"__version__ = {version!r}\n",
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: sdfake\nVersion: {version}\n",
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{name}.dist-info/RECORD,,")
    files[f"{name}.dist-info/RECORD"] = "\n".join(record) + "\n"
    out = where / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return out


def _wheels_and_pip(tmp_path: Path) -> tuple[Path, list[str]]:
    """Wheels of sdfake 1.0 and 2.0, and a pip that installs only from them (offline)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "1.0"), _wheel(wheels, "2.0")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
           "--find-links", str(wheels)]  # fmt: skip
    return wheels, pip


def _launcher(tmp_path: Path) -> Callable[[Sequence[str], Mapping[str, str]], LaunchReport]:
    """Runs the stand-in server as a real process and diagnoses what it printed."""

    def launch(argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        log = tmp_path / f"run{len(list(tmp_path.glob('run*.log')))}.log"
        proc = subprocess.run(list(argv), env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        log.write_text(proc.stdout + proc.stderr)
        if proc.returncode == 0:
            return LaunchReport("healthy", None, 1.0, exit_code=0)
        return LaunchReport("failed", diagnose_path(log), 1.0, exit_code=proc.returncode)

    return launch


def test_requirement_of_reads_versions_and_ranges_not_prose() -> None:
    assert requirement_of(Change("package", "numpy", "<2")) == "numpy<2"
    assert requirement_of(Change("package", "transformers", "4.57.1")) == "transformers==4.57.1"
    assert requirement_of(Change("package", "torch", "a build with CUDA")) is None
    assert requirement_of(Change("flag", "--x", "1")) is None


def test_fix_finds_the_package_version_in_an_overlay_and_leaves_the_environment(
    tmp_path: Path,
) -> None:
    wheels, pip = _wheels_and_pip(tmp_path)
    site = tmp_path / "server-site"  # the server's own environment: sdfake 2.0
    subprocess.run([*pip, "--target", str(site), "sdfake==2.0"], check=True)
    before = sorted(p.name for p in site.iterdir())
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    overlays = Overlays(sys.executable, cache=tmp_path / "cache",
                        pip_args=["--no-index", "--find-links", str(wheels)])  # fmt: skip

    launch = _launcher(tmp_path)
    cmd = parse([f"PYTHONPATH={site}", sys.executable, str(server)])
    result = Planner(cmd, TrialRunner(cmd, launch, overlays=overlays), max_trials=4).run()
    assert result.outcome == "fixed", [t.outcome for t in result.trials]
    assert result.changes == (Change("package", "sdfake", ">=1,<2"),)
    assert result.trials_to_healthy == 1
    # the overlay holds 1.0; the server's environment still holds 2.0, untouched
    (overlay,) = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert (overlay / "sdfake" / "__init__.py").read_text() == "__version__ = '1.0'\n"
    assert (site / "sdfake" / "__init__.py").read_text() == "__version__ = '2.0'\n"
    assert sorted(p.name for p in site.iterdir()) == before
    # built once; a later session reuses the cached overlay without pip
    assert list(overlays.built) == ["sdfake<2,>=1"]
    again = Overlays(sys.executable, cache=tmp_path / "cache", pip_args=["--no-index"])
    assert again.path_for("sdfake<2,>=1") == overlay and not again.built


GARBLED = """
import sdfake, sys
if sdfake.__version__ != "1.0":
    print("RuntimeError: probability tensor contains either inf, nan or element < 0")
    sys.exit(1)
print("INFO:     Uvicorn running on http://127.0.0.1:8000")
"""


def test_a_package_the_error_does_not_name_is_found_by_the_diff_with_the_last_healthy_run(
    tmp_path: Path,
) -> None:
    from servedoctor.experiments.envhistory import moved_since_healthy, remember_healthy
    from servedoctor.findings.store import FindingsStore

    wheels, pip = _wheels_and_pip(tmp_path)
    site = tmp_path / "server-site"
    subprocess.run([*pip, "--target", str(site), "sdfake==1.0"], check=True)
    server = tmp_path / "server.py"
    server.write_text(GARBLED)
    cmd = parse([f"PYTHONPATH={site}", sys.executable, str(server), "--model", "tiny"])
    store = FindingsStore.open(tmp_path / "findings.db")
    remember_healthy(store, cmd, sys.executable)  # it works today: remembered
    # someone upgrades the package in the server's environment; the error does not name it
    subprocess.run([*pip, "--target", str(site), "--upgrade", "sdfake==2.0"], check=True)
    moved, moves = moved_since_healthy(store, cmd, sys.executable)
    assert [m.describe() for m in moves] == ["sdfake 1.0 → 2.0"]
    assert moved == [Change("package", "sdfake", "==1.0")]

    launch = _launcher(tmp_path)
    overlays = Overlays(sys.executable, cache=tmp_path / "cache",
                        pip_args=["--no-index", "--find-links", str(wheels)])  # fmt: skip
    runner = TrialRunner(cmd, launch, overlays=overlays)
    result = Planner(cmd, runner, max_trials=6, moved=moved).run()
    assert result.outcome == "fixed"
    assert result.changes == (Change("package", "sdfake", "==1.0"),)
    assert (site / "sdfake" / "__init__.py").read_text() == "__version__ = '2.0'\n"


def test_a_shell_line_runs_as_written(tmp_path: Path) -> None:
    from servedoctor.findings.working import shell_line

    out = tmp_path / "out"
    script = f"import os, sys; open({str(out)!r}, 'w').write(os.environ['A'] + '|' + sys.argv[1])"
    line = shell_line([sys.executable, "-c", script, "two words $(x)"], {"A": "***; echo"})
    subprocess.run(["sh", "-c", line], check=True)
    assert out.read_text() == "***; echo|two words $(x)"


def test_prune_removes_unused_overlays_and_dead_builds_and_nothing_else(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "1.0")
    _wheel(wheels, "2.0")
    cache = tmp_path / "cache"
    overlays = Overlays(sys.executable, cache=cache,
                        pip_args=["--no-index", "--find-links", str(wheels)])  # fmt: skip
    old, fresh = overlays.path_for("sdfake==1.0"), overlays.path_for("sdfake==2.0")
    month_ago = os.stat(old).st_mtime - 40 * 86400
    os.utime(old / ".servedoctor-overlay", (month_ago, month_ago))
    dead_build = cache / "build-x1"
    dead_build.mkdir()
    os.utime(dead_build, (month_ago, month_ago))
    live_build = cache / "build-x2"
    live_build.mkdir()
    someone_elses = cache / "notes"
    someone_elses.mkdir()
    os.utime(someone_elses, (month_ago, month_ago))

    removed = overlays.prune()

    assert sorted(removed) == sorted([old, dead_build])
    assert fresh.is_dir() and live_build.is_dir() and someone_elses.is_dir()
    # using an overlay again keeps it: its marker's time is the last use
    os.utime(fresh / ".servedoctor-overlay", (month_ago, month_ago))
    assert overlays.path_for("sdfake==2.0") == fresh
    assert overlays.prune() == []
