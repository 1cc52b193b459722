"""The serving stack as data (``env/data/stack.yaml``): which packages are installed, which
version, and where their compiled libraries are — from package metadata, without importing."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from servedoctor.datafile import load_yaml
from servedoctor.env.fatbin import is_library_name

DATA = Path(__file__).parent / "data" / "stack.yaml"


class StackPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: list[str] = Field(description="distribution names, first installed one wins")
    role: Literal["engine", "kernels", "runtime", "framework"]
    scan: bool = False

    @field_validator("name", mode="before")
    @classmethod
    def _listify(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v


class _StackFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    packages: list[StackPackage]


@lru_cache(maxsize=1)
def stack_packages() -> tuple[StackPackage, ...]:
    raw = load_yaml(DATA)
    return tuple(_StackFile.model_validate(raw).packages)


@dataclass(frozen=True, slots=True)
class Installed:
    name: str
    version: str
    role: str
    scan: bool


def find_distribution(names: list[str]) -> metadata.Distribution | None:
    for name in names:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def installed_stack() -> list[Installed]:
    """The stack packages present in this Python environment, in stack.yaml order."""
    found: list[Installed] = []
    for pkg in stack_packages():
        dist = find_distribution(pkg.name)
        if dist is not None:
            name = dist.metadata["Name"] or pkg.name[0]
            found.append(Installed(name=name, version=dist.version, role=pkg.role, scan=pkg.scan))
    return found


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def compiled_libraries(name: str) -> list[Path]:
    """The shared objects a distribution installed, from its RECORD file."""
    dist = find_distribution([name])
    if dist is None or dist.files is None:
        return []
    libs: list[Path] = []
    for entry in dist.files:
        if not is_library_name(Path(str(entry))):
            continue
        path = Path(str(dist.locate_file(entry)))
        if path.is_file():
            libs.append(path)
    return sorted(libs)


def stack_libraries() -> dict[str, list[Path]]:
    """Compiled libraries of every installed stack package marked ``scan: true``."""
    return {pkg.name: compiled_libraries(pkg.name) for pkg in installed_stack() if pkg.scan}
