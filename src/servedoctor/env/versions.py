"""Version checks that turn the fingerprint into *facts*: one line each, matched by the
preflight rules (``knowledge/rules/preflight``). A check states what it saw; the rule that
matches the line says why it matters and what to change.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.archjudge import Judgement, judge_code
from servedoctor.env.fingerprint import Fingerprint
from servedoctor.errors import UserError


def _major_minor(text: str) -> tuple[int, int] | None:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def driver_facts(fp: Fingerprint) -> list[str]:
    """The driver must support the CUDA runtime's major version (minor versions are
    compatible since CUDA 11, with PTX JIT and new APIs left out)."""
    if not fp.cuda_driver or not fp.cuda_runtime:
        return []
    driver, runtime = _major_minor(fp.cuda_driver), _major_minor(fp.cuda_runtime)
    if driver is None or runtime is None or driver >= runtime:
        return []
    seen = (
        f"the driver {fp.driver_version or '?'} supports CUDA {fp.cuda_driver}; "
        f"the CUDA runtime is {fp.cuda_runtime}"
    )
    if driver[0] < runtime[0]:
        return [f"driver-too-old: {seen}"]
    return [f"driver-older-minor: {seen}"]


def _torch_arch_targets(arch_list: tuple[str, ...]) -> tuple[tuple[Arch, ...], tuple[Arch, ...]]:
    sass: list[Arch] = []
    ptx: list[Arch] = []
    for item in arch_list:
        try:
            arch = parse_arch(item)
        except UserError:
            continue
        (ptx if item.startswith("compute") else sass).append(arch)
    return tuple(sass), tuple(ptx)


def torch_arch_facts(fp: Fingerprint, gpu: Arch) -> list[str]:
    """torch's compiled arch list (``torch.cuda.get_arch_list()``) against the GPU."""
    if fp.torch is None or not fp.torch.arch_list:
        return []
    sass, ptx = _torch_arch_targets(fp.torch.arch_list)
    how = judge_code(sass, ptx, gpu)
    listed = " ".join(fp.torch.arch_list)
    if how == "none":
        return [f"torch-lacks-arch: torch {fp.torch.version} is built for {listed}; not {gpu.sm}"]
    if how == "ptx_jit":
        return [f"torch-ptx-only: torch {fp.torch.version} is built for {listed}; {gpu.sm} by JIT"]
    return []


def archscan_facts(judgements: list[Judgement], packages: dict[str, str]) -> list[str]:
    """One fact per library that the GPU cannot run (no code, or PTX too new for the driver),
    or can run only through JIT."""
    facts: list[str] = []
    for j in judgements:
        owner = packages.get(j.file, "")
        prefix = f"{owner} " if owner else ""
        if j.how == "none":
            facts.append(f"no-kernel: {prefix}{j.message}")
        elif j.how == "ptx_too_new":
            facts.append(f"ptx-too-new: {prefix}{j.message}")
        elif j.how == "ptx_jit":
            facts.append(f"ptx-jit-only: {prefix}{j.message}")
    return facts


@dataclass(frozen=True, slots=True)
class TorchPin:
    package: str
    version: str
    requirement: str


def torch_requirements(
    requires: Iterable[tuple[str, str, str]] | None = None,
) -> list[TorchPin]:
    """Installed packages whose metadata requires torch (extras left out): this Python's,
    or ``requires`` as (package, version, requirement) read in the server's."""
    if requires is None:
        requires = _own_requires()
    pins: list[TorchPin] = []
    for name, version, line in requires:
        if name.lower() == "torch":
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() != "torch" or not str(req.specifier):
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        pins.append(TorchPin(name, version, f"torch{req.specifier}"))
    return sorted(pins, key=lambda p: p.package.lower())


def _own_requires() -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name and name.lower() not in seen:
            seen.add(name.lower())
            found += [(name, dist.version, line) for line in dist.requires or []]
    return found


def torch_pin_facts(torch_version: str | None, pins: list[TorchPin]) -> list[str]:
    if not torch_version:
        return []
    try:
        installed = Version(torch_version)
    except InvalidVersion:
        return []
    facts = []
    for pin in pins:
        spec = Requirement(pin.requirement).specifier
        if not spec.contains(installed, prereleases=True):
            facts.append(
                f"torch-pin-mismatch: {pin.package} {pin.version} requires {pin.requirement}; "
                f"installed torch {torch_version}"
            )
    return facts


# --- the model ------------------------------------------------------------------------


def read_model_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise UserError(f"{model_dir}: no config.json (give --model a local model directory)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable config.json ({exc})") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path}: config.json is not a JSON object")
    return data


def transformers_model_types() -> tuple[str, set[str]] | None:
    """The installed transformers' version and the ``model_type`` values it knows, offline."""
    try:
        version = metadata.version("transformers")
        auto: Any = importlib.import_module("transformers.models.auto.configuration_auto")
    except Exception:
        return None
    return version, set(getattr(auto, "CONFIG_MAPPING_NAMES", {}))


def model_facts(
    config: dict[str, Any],
    *,
    known: tuple[str, set[str]] | None,
    trust_remote_code: bool,
) -> list[str]:
    facts: list[str] = []
    model_type = config.get("model_type")
    remote = bool(config.get("auto_map"))
    if remote and not trust_remote_code:
        facts.append(
            "model-remote-code: the model's config.json maps classes to custom code "
            "(auto_map) and the command has no --trust-remote-code"
        )
    if isinstance(model_type, str) and known is not None and not remote:
        version, types = known
        if model_type not in types:
            facts.append(
                f"model-type-unknown: model_type {model_type!r} is not known to "
                f"transformers {version}"
            )
    if "index_topk" in config:
        facts.append(
            f"model-dsa: the model uses DeepSeek sparse attention (index_topk="
            f"{config['index_topk']}), model_type {model_type!r}"
        )
    return facts
