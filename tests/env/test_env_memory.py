"""What changed since the server last worked: a healthy run records the packages of the
server's own Python; a failure is diffed against it, and each moved package becomes a
hypothesis "back to the version that worked", ranked up when the failure touches it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyenvs import build_wheel, make_venv, pip_install

from servedoctor.experiments.envhistory import remember_run
from servedoctor.model import Change, Diagnosis, Evidence, Hypothesis


@pytest.fixture
def server(tmp_path: Path) -> tuple[Path, Path]:
    """A venv with two packages: ``PyFake-Yaml`` (imported as ``fakeyaml``) and ``sdother``."""
    python = make_venv(tmp_path / "venv")
    wheels = tmp_path / "wheels"
    for version in ("6.0", "5.9"):
        build_wheel(wheels, "PyFake-Yaml", version, {"fakeyaml/__init__.py": f"V = {version!r}\n"})
    for version in ("1.0", "1.1"):
        build_wheel(wheels, "sdother", version, {"sdother/__init__.py": ""})
    pip_install(python, wheels, "PyFake-Yaml==6.0", "sdother==1.0")
    return python, wheels


def _failure(text: str) -> Diagnosis:
    flag = Hypothesis("R1.1", "a flag", 0.5, (Change("flag", "--x", None),))
    return Diagnosis("server.log", "import_error", "startup", None, None, "RuntimeError: boom",
                     (Evidence(3, text),), (flag,))  # fmt: skip


def test_a_moved_package_the_failure_touches_by_import_name_ranks_first(
    server: tuple[Path, Path], tmp_path: Path
) -> None:
    python, wheels = server
    store = str(tmp_path / "findings.db")
    argv = [str(python), "-m", "myserver", "--model", "tiny"]
    healthy = remember_run(store, argv, str(python), healthy=True, diagnosis=None)
    assert healthy.recorded and healthy.diff is None

    pip_install(python, wheels, "PyFake-Yaml==5.9", "sdother==1.1")  # someone changes the venv
    frame = f'  File "{python.parent.parent}/lib/site-packages/fakeyaml/__init__.py", line 1'
    got = remember_run(store, argv, str(python), healthy=False, diagnosis=_failure(frame))
    assert got.diff is not None
    assert [m.describe() for m in got.diff.moves] == ["PyFake-Yaml 6.0 → 5.9", "sdother 1.0 → 1.1"]
    assert got.touched == {"PyFake-Yaml": "fakeyaml"}
    assert got.lines() == [
        "since it last worked:",
        "  PyFake-Yaml 6.0 → 5.9  (the failure names fakeyaml)",
        "  sdother 1.0 → 1.1",
    ]
    assert got.diagnosis is not None
    first, *rest = got.diagnosis.hypotheses
    assert first.changes == (Change("package", "PyFake-Yaml", "==6.0"),)
    assert "back to the version that worked" in first.cause
    assert [h.changes[0].name for h in rest] == ["--x", "sdother"]  # untouched: below the flag
    assert got.to_dict() == [
        {"package": "PyFake-Yaml", "worked": "6.0", "now": "5.9", "touched_by": "fakeyaml"},
        {"package": "sdother", "worked": "1.0", "now": "1.1", "touched_by": None},
    ]


def test_another_model_or_no_record_gives_no_diff(
    server: tuple[Path, Path], tmp_path: Path
) -> None:
    python, wheels = server
    store = str(tmp_path / "findings.db")
    remember_run(store, [str(python), "-m", "s", "--model", "a"], str(python), healthy=True,
                 diagnosis=None)  # fmt: skip
    pip_install(python, wheels, "sdother==1.1")
    other = remember_run(store, [str(python), "-m", "s", "--model", "b"], str(python),
                         healthy=False, diagnosis=_failure("x"))  # fmt: skip
    assert other.diff is None and other.lines() == []
    assert other.diagnosis is not None and len(other.diagnosis.hypotheses) == 1


def test_a_store_that_cannot_be_opened_is_one_line(
    server: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _ = server
    got = remember_run("postgresql://nobody@127.0.0.1:1/none", [str(python), "-m", "s"],
                       str(python), healthy=True, diagnosis=None)  # fmt: skip
    assert got.problem and not got.recorded
    (line,) = got.lines()
    assert line.startswith("environment memory: ")
