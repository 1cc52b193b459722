"""Versions stated as evidence become requirements against a real (offline) package index."""

from __future__ import annotations

import sys
from pathlib import Path

from test_overlay import _wheel

from servedoctor.experiments.candidates import build_candidates
from servedoctor.experiments.command import parse
from servedoctor.experiments.releases import Resolver, resolvable
from servedoctor.model import Change, Diagnosis, Hypothesis


def _resolver(tmp_path: Path, *versions: str) -> Resolver:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in versions:
        _wheel(wheels, version)
    return Resolver(sys.executable, pip_args=("--no-index", "--find-links", str(wheels)))


def test_the_release_before_is_the_newest_older_one_the_index_has(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "1.0", "1.5", "2.0", "2.1rc1")
    assert resolver.concrete(Change("package", "sdfake", "the release before 2.1")) == Change(
        "package", "sdfake", "==2.0"
    )
    assert resolver.concrete(Change("package", "sdfake", "the release before 1.0")) is None


def test_another_release_means_older_than_the_installed_one(tmp_path: Path) -> None:
    import importlib.metadata

    installed = importlib.metadata.version("packaging")
    resolver = _resolver(tmp_path)  # an index without packaging: no release to move to
    assert resolver.concrete(Change("package", "packaging", "another release")) is None
    assert resolver.installed["packaging"] == installed


def test_prose_without_evidence_is_never_guessed(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "1.0")
    assert not resolvable(Change("package", "sdfake", "a build with this GPU's arch"))
    assert resolver.concrete(Change("package", "sdfake", "a build with this GPU's arch")) is None
    # the engine is not installed here: its declared requirement is unknown
    resolver.engine = "vllm"
    assert resolver.concrete(Change("package", "sdfake", "the version vllm 0.6.4 requires")) is None


def test_a_resolved_package_becomes_a_runnable_candidate(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "1.0", "2.0")
    diagnosis = Diagnosis(
        file="x.log",
        error_class="other",
        phase="serving",
        component="unknown",
        culprit=None,
        summary="boom",
        hypotheses=(
            Hypothesis(
                id="OWNER.2",
                cause="a regression",
                confidence=0.3,
                changes=(Change("package", "sdfake", "the release before 2.0"),),
            ),
        ),
    )
    command = parse([sys.executable, "-m", "http.server"])
    found = build_candidates(
        diagnosis=diagnosis, command=command, base_cost_s=1.0, packages=True,
        resolve=resolver.concrete,
    )  # fmt: skip
    assert [(c.change, c.runnable) for c in found if c.change.kind == "package"] == [
        (Change("package", "sdfake", "==1.0"), True)
    ]


def test_the_release_after_is_the_oldest_newer_one(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "1.0", "1.5", "2.0")
    after = resolver.concrete(Change("package", "sdfake", "the release after 1.0"))
    assert after == Change("package", "sdfake", "==1.5")
    assert resolver.concrete(Change("package", "sdfake", "the release after 2.0")) is None


def test_a_first_release_and_the_latest_become_requirements(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "1.0", "1.5", "2.0", "2.1rc1")
    assert resolver.concrete(Change("package", "sdfake", "1.5 or later")) == Change(
        "package", "sdfake", ">=1.5"
    )
    assert resolver.concrete(Change("package", "sdfake", "the latest release")) == Change(
        "package", "sdfake", "==2.0"
    )
