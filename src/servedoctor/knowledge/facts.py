"""Facts a rule derives from what it captured: the package behind a name in a message.

Used as placeholder filters in rule changes (``{module|dist}``): an ``ImportError`` names a
module, and the change to test is a version of the distribution that owns it; an undefined
symbol names an extension's file, and the change is that extension's package; a missing
shared library names a file, and the change is the package that ships it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from servedoctor.datafile import load_yaml
from servedoctor.model import SERVER_BIN

DATA = Path(__file__).parent / "data" / "packages.yaml"
_SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z_][\w]*)")
_ELIDED = re.compile(r"^(?:\.{3}|…)[/\\]([A-Za-z_]\w*)[/\\]")
_LIB = re.compile(r"lib(?P<name>[\w+-]+?)(?:\.so(?:\.(?P<major>\d+))?[\d.]*)?$")


@cache
def _tables() -> dict[str, Any]:
    data = load_yaml(DATA)
    return {
        "modules": data.get("modules", {}),
        "libs": data.get("shared_libraries", {}),
        "pass_through": frozenset(data.get("pass_through", [])),
        "api_errors": frozenset(data.get("api_errors", [])),
        "kernel_packages": data.get("kernel_packages", {}),
        "engine_builds": data.get("engine_builds", {}),
        "symbol_namespaces": data.get("symbol_namespaces", {}),
        "system_packages": frozenset(data.get("system_packages", [])),
        "system_patterns": tuple(re.compile(p) for p in data.get("system_package_patterns", [])),
        "headers": data.get("headers", {}),
        "executables": data.get("executables", {}),
        "cache_folders": tuple(
            (re.compile(row["match"]), str(row["variable"]))
            for row in data.get("cache_folders", [])
        ),
        "servers": frozenset(data.get("servers", [])),
    }


def package_of_kernel_library(culprit: str | None, engine: str | None = None) -> str | None:
    """The package that ships a kernel library named as a culprit (flashinfer → -python),
    under the name of the engine's own build of it when the engine pins one."""
    packages: dict[str, str] = _tables()["kernel_packages"]
    package = packages.get(culprit or "")
    builds: dict[str, str] = _tables()["engine_builds"].get(engine or "", {})
    return builds.get(package, package) if package else None


def is_system_package(name: str) -> bool:
    """A stack installed with the system, not pip (ROCm, Debian's libnuma1 or libnuma-dev):
    it applies to binary servers too."""
    t = _tables()
    return name in t["system_packages"] or any(p.match(name) for p in t["system_patterns"])


def is_server_package(name: str) -> bool:
    """An inference server's own distribution or build (vllm, ollama, llama.cpp)."""
    return re.sub(r"[-_]+", "-", name).lower() in _tables()["servers"]


def passes_through(distribution: str) -> bool:
    """Whether frames of ``distribution`` only pass calls on (torch's module dispatch)."""
    return distribution in _tables()["pass_through"]


def is_api_error(exc_type: str | None) -> bool:
    """Whether an exception type says one package's code does not fit its caller."""
    return bool(exc_type) and str(exc_type).rsplit(".", 1)[-1] in _tables()["api_errors"]


def distribution_of_module(module: str) -> str | None:
    """The PyPI distribution that owns an import name (``flash_attn.ops`` → ``flash-attn``)."""
    top = module.strip().strip("'\"‘’`").split(".")[0]
    if not top or not re.match(r"^[A-Za-z_]\w*$", top):
        return None
    known: dict[str, str] = _tables()["modules"]
    return known.get(top) or top.lstrip("_").replace("_", "-") or None


def is_known_module(module: str) -> bool:
    """Is ``module`` an import name the package table lists (not just any identifier)?"""
    return module.split(".")[0] in _tables()["modules"]


def distribution_of_path(path: str) -> str | None:
    """The distribution a file belongs to: under site-packages, in a clone named after its
    package, or an extension's ``.so`` named by its module."""
    m = _SITE.search(path)
    if m is not None:
        return distribution_of_module(m.group(1).split(".")[0])
    # a path the poster shortened (``.../flashinfer/comm/mnnvl.py``): its first folder, when
    # that is an import name the table lists (any other folder may be the user's own)
    elided = _ELIDED.match(path.strip())
    if elided is not None and is_known_module(elided.group(1)):
        return distribution_of_module(elided.group(1))
    # a source checkout installed in place: the clone's folder is named after the package
    # it holds (``vllm-ascend/vllm_ascend/platform.py``, ``AReaL/areal/…``,
    # ``sglang/python/sglang/…``)
    checkout = _package_of_checkout(path)
    if checkout is not None:
        return checkout
    # an extension file: relative to site-packages (``lmcache/c_ops.cpython-312-….so``), its
    # first folder's owner; bare (``flash_attn_2_cuda.cpython-310-….so``), its module's owner
    extension = re.match(r"^(\w+)\.(?:cpython|abi3)[\w.-]*\.so$", path.strip().split("/")[-1])
    if extension is None:
        return None
    folder = re.match(r"^([A-Za-z_]\w*)/", path.strip())
    return distribution_of_module(folder.group(1) if folder else extension.group(1))


def _package_of_checkout(path: str) -> str | None:
    """The package of a file in a clone whose folder bears the package's name (the clone
    nearest the root: a package's own sub-folders may repeat a name)."""
    parts = [p for p in path.strip().replace("\\", "/").split("/") if p][:-1]
    for i in range(1, len(parts)):
        package = parts[i]
        if len(package) < 3 or not re.fullmatch(r"[A-Za-z_]\w*", package):
            continue
        clone = parts[i - 2] if parts[i - 1] in ("python", "src") and i >= 2 else parts[i - 1]
        if canonicalize_name(clone) == canonicalize_name(package):  # vllm-ascend = vllm_ascend
            return distribution_of_module(package)
    return None


def package_of_library(library: str) -> str | None:
    """The package that ships ``libNAME.so.N``; ``None`` for the driver's libraries."""
    m = _LIB.search(library.strip().split("/")[-1])
    if m is None:
        return None
    libs: dict[str, str | None] = _tables()["libs"]
    if m.group("name") not in libs:
        return _package_in_library_name(m.group("name")) or _debian_package(
            m.group("name"), m.group("major")
        )
    template = libs[m.group("name")]
    if template is None:
        return None
    if "{major}" in template:
        if not m.group("major"):
            return None
        return template.replace("{major}", m.group("major"))
    return template


def _debian_package(name: str, major: str | None) -> str | None:
    """Debian's package for a system library: its name and soname version (libnuma.so.1 →
    libnuma1; libfoo2.so.1 → libfoo2-1), the convention every Debian library follows."""
    if not major:
        return None
    name = name.lower()
    return f"lib{name}{'-' if name[-1].isdigit() else ''}{major}"


def cuda_library(library: str) -> str | None:
    """``library`` when it is one of CUDA's own (shipped per CUDA major version), else None."""
    package = package_of_library(library)
    return library if package is not None and package.startswith("nvidia-") else None


#: Where a CUDA toolkit puts its libraries (the path its installers and images use).
CUDA_TOOLKIT_LIBS = "/usr/local/cuda/lib64"


def cuda_library_path(library: str) -> str | None:
    """The loader path with the CUDA toolkit's libraries first, for one of CUDA's own
    libraries (installed with the toolkit, not found by the loader); None for any other."""
    return f"{CUDA_TOOLKIT_LIBS}:$LD_LIBRARY_PATH" if cuda_library(library) else None


def package_of_header(header: str) -> str | None:
    """The package whose headers a build is missing (numa.h → libnuma-dev); None for the
    CUDA toolkit's own headers."""
    headers: dict[str, str | None] = _tables()["headers"]
    key = header.strip().strip("'\"<>")
    if key in headers:
        return headers[key]
    stem = re.fullmatch(r"([a-z][a-z0-9_+-]*)\.h", key.split("/")[-1])
    return f"lib{stem.group(1).replace('_', '-')}-dev" if stem else None


def _cache_folder(path: str) -> tuple[re.Match[str], str] | None:
    """Where in ``path`` a known cache folder is named, and the variable that moves it."""
    folders: tuple[tuple[re.Pattern[str], str], ...] = _tables()["cache_folders"]
    for pattern, variable in folders:
        if m := pattern.search(path):
            return m, variable
    return None


def cache_variable(path: str) -> str | None:
    """The variable that moves the cache ``path`` belongs to (/root/.triton → TRITON_CACHE_DIR)."""
    found = _cache_folder(path)
    return found[1] if found else None


def writable_folder(path: str) -> str | None:
    """A folder under /tmp for a cache that cannot be written where it is (/root/.triton →
    /tmp/triton): the user's /tmp is writable wherever a server runs. A file deep inside a
    known cache names the cache's own folder (~/.cache/vllm/torch_compile_cache/… →
    /tmp/vllm), as its variable moves the whole cache."""
    root = path.rstrip("/")
    found = None if root.startswith("/tmp/") else _cache_folder(root)
    if found is not None:
        end = root.find("/", found[0].end())
        root = root if end < 0 else root[:end]
    leaf = root.split("/")[-1].lstrip(".")
    return f"/tmp/{leaf}" if re.fullmatch(r"[\w.-]+", leaf or "") else None


def _package_in_library_name(name: str) -> str | None:
    """A library a Python package ships in its own folder is named after it
    (libnvinfer_plugin_tensorrt_llm → tensorrt_llm, libtorch_cuda → torch)."""
    known: dict[str, str] = _tables()["modules"]
    for module in sorted(known, key=len, reverse=True):
        if len(module) > 3 and re.search(rf"(?:^|_){re.escape(module)}(?:_|$)", name):
            return known[module]
    return None


_MANGLED = re.compile(r"^_ZN[KVrO]*(?P<len>\d+)(?P<rest>\w+)$")


def package_of_symbol(symbol: str) -> str | None:
    """The package behind a C++ symbol's outermost namespace (``_ZN3c10…`` → torch)."""
    m = _MANGLED.match(symbol.strip())
    if m is None:
        return None
    name = m.group("rest")[: int(m.group("len"))]
    return _package_of_namespace(name)


def _package_of_namespace(outer: str, *, listed_only: bool = False) -> str | None:
    """The package of a C++ namespace: the namespace table, else the import name it spells
    (any name of three letters or more, or ``listed_only`` the names the table lists)."""
    table: dict[str, str | None] = _tables()["symbol_namespaces"]
    if outer in table:
        return table[outer]
    if listed_only:
        return distribution_of_module(outer) if is_known_module(outer) else None
    return distribution_of_module(outer) if len(outer) > 2 else None


def package_of_cxx_type(type_name: str) -> str | None:
    """The package whose native library defines a C++ type (``tvm::ffi::Error`` →
    apache-tvm-ffi, ``c10::Error`` → torch); a type outside any listed namespace has none."""
    parts = type_name.strip().split("::")
    if len(parts) < 2 or not parts[0]:
        return None
    if len(parts) > 2 and is_known_module(f"{parts[0]}_{parts[1]}"):
        return distribution_of_module(f"{parts[0]}_{parts[1]}")
    # only listed names: an unlisted namespace may be the program's own
    return _package_of_namespace(parts[0], listed_only=True)


_GFX = re.compile(r"^gfx(?P<major>\d{1,2}?)(?P<minor>[0-9a-f])(?P<step>[0-9a-f])$")


def hsa_override_of(gfx: str) -> str | None:
    """The ROCm arch a GPU can pose as: its family's base (gfx1152 → 11.5.0, gfx90c → 9.0.0).

    ROCm libraries ship code for a family's first chip; HSA_OVERRIDE_GFX_VERSION makes the
    runtime load it for a later stepping of the same family (an APU, a mobile part).
    """
    m = _GFX.match(gfx.strip().lower())
    if m is None:
        return None
    return f"{int(m.group('major'))}.{int(m.group('minor'), 16)}.0"


def package_of_dependency(name: str) -> str | None:
    """The package to install for a dependency a message names in words: a CUDA library by
    its short name (cuDNN → nvidia-cudnn-cu12), else the distribution owning that module."""
    key = name.strip().strip("'\"`").lower()
    if key in _tables()["libs"]:
        return package_of_library(f"lib{key}.so")
    return distribution_of_module(key)


def package_of_executable(name: str) -> str | None:
    """The package that installs a program looked up on PATH (ninja → ninja, gcc →
    build-essential); None for a toolkit's own compiler or a program no table knows."""
    found: str | None = _tables()["executables"].get(name.strip().strip("'\"`"))
    return found


def server_bin_path(name: str) -> str | None:
    """PATH with the server's own bin folder first, for a program pip installs into the
    environment (ninja, cmake): installed but not found when the environment was not
    activated. None for a program the system or a toolkit provides."""
    package = package_of_executable(name)
    if package is None or is_system_package(package):
        return None
    return f"{SERVER_BIN}:$PATH"


def flag_of_field(field: str) -> str | None:
    """The command-line spelling of a config field (``enforce_eager`` → ``--enforce-eager``),
    as engines derive their flags from their config's field names."""
    return "--" + field.replace("_", "-") if re.fullmatch(r"[a-z][a-z0-9_]*", field) else None


def switch_of_feature(words: str) -> str | None:
    """The switch that turns on a feature a message names in words ("Chunked prefill" →
    ``--enable-chunked-prefill``), where some engine's parser (its inventory) has it."""
    from servedoctor.engines.inventory import inventory, known_inventories

    slug = "-".join(words.strip().lower().split())
    if not re.fullmatch(r"[a-z][a-z0-9-]*", slug):
        return None
    for flag in (f"--enable-{slug}", f"--{slug}"):
        for engine in known_inventories():
            inv = inventory(engine)
            found = inv.newest(flag) if inv is not None else None
            if found is not None and found.type == "bool":
                return flag
    return None


#: Where a container gets the driver's libraries (NVIDIA's container runtime mounts them
#: there and CUDA images name the folder in LD_LIBRARY_PATH) and where WSL keeps them.
DRIVER_LIBS = "/usr/local/nvidia/lib64:/usr/lib/wsl/lib"


def driver_library_path(library: str) -> str | None:
    """The loader path with the driver's library folders first, for one of the driver's own
    libraries (libcuda, libnvidia-ml: no package ships them); None for any other."""
    m = _LIB.search(library.strip().split("/")[-1])
    libs: dict[str, str | None] = _tables()["libs"]
    if m is None or m.group("name") not in libs or libs[m.group("name")] is not None:
        return None
    return f"{DRIVER_LIBS}:$LD_LIBRARY_PATH"


def server_library(library: str) -> str | None:
    """``library`` when it is an inference server's own (libllama.so, libggml.so: a build
    puts them beside its programs), else None."""
    package = package_of_library(library)
    return library if package is not None and is_server_package(package) else None


def folder_of(path: str) -> str | None:
    """The folder a file's path names (``build/bin/llama-server`` → ``build/bin``); None for
    a bare name, which says nothing of where the file is."""
    folder, slash, _ = path.strip().rpartition("/")
    return (folder or "/") if slash else None


#: Placeholder filters for rule templates: ``{group|name}``.
FILTERS: dict[str, Callable[[str], str | None]] = {
    "flag": flag_of_field,
    "switch": switch_of_feature,
    "dist": distribution_of_module,
    "dep": package_of_dependency,
    "path_dist": distribution_of_path,
    "lib_package": package_of_library,
    "cuda_lib": cuda_library,
    "cuda_lib_path": cuda_library_path,
    "server_lib": server_library,
    "folder": folder_of,
    "driver_lib_path": driver_library_path,
    "header_package": package_of_header,
    "exe_package": package_of_executable,
    "server_bin_path": server_bin_path,
    "cache_variable": cache_variable,
    "writable": writable_folder,
    "hsa_version": hsa_override_of,
    "symbol_dist": package_of_symbol,
}
