"""Build versioned flag inventories from the released wheels of SGLang, vLLM and transformers.

Each engine's serve flags are read STATICALLY (``ast``) from the Python sources of its released
wheels: nothing of the engines is imported or executed. The result is one YAML per engine under
``src/servedoctor/engines/inventory/``.

    python scripts/inventory/build_inventories.py [--engines sglang vllm] [--cache .cache/wheels]

Wheels are fetched with ``pip download --no-deps --only-binary=:all:``; only the ``.py`` members
that the reader actually opened are kept (under ``CACHE/src/<name>-<version>/``) and the wheel is
deleted afterwards (``--keep-wheels`` keeps it). Release dates come from the PyPI simple index
(JSON form, the same index pip reads).
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import yaml
from llamacpp_args import choices as _cpp_choices
from llamacpp_args import server_options
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "src" / "servedoctor" / "engines" / "inventory"
SCRIPT = "scripts/inventory/build_inventories.py"
HELP_LEN = 200

# The releases read for each engine (ascending; the newest release is always included).
VERSIONS: dict[str, list[str]] = {
    "sglang": ["0.4.6", "0.5.1", "0.5.5", "0.5.10", "0.5.15", "0.5.20", "0.5.23"],
    "vllm": ["0.8.5", "0.10.0", "0.11.0", "0.15.0", "0.20.0", "0.26.0", "0.33.0"],
    "transformers": ["5.0.0", "5.10.0", "5.24.0"],
    # llama.cpp publishes no Python package; the llama-cpp-python sdists vendor its source
    # (vendor/llama.cpp), so these are the llama.cpp trees of those uploads
    "llamacpp": ["0.3.4", "0.3.9", "0.3.16", "0.3.20", "0.3.28", "0.3.36"],
}
SOURCES: dict[str, str] = {
    "sglang": "sglang/srt/server_args.py and sglang/srt/arg_groups/fields/*.py "
    "(static read of the released wheels)",
    "vllm": "vllm/engine/arg_utils.py, vllm/config/, vllm/entrypoints/{openai,common}/cli_args.py "
    "(static read of the released wheels)",
    "transformers": "transformers/cli/serve.py, the `transformers serve` typer options "
    "(static read of the released wheels)",
    "llamacpp": "llama.cpp's common/arg.cpp, the options offered to llama-server, as vendored in "
    "the llama-cpp-python sdists (static read of the C++); a version is the date of the sdist "
    "that carried that tree (llama.cpp's own build numbers are not in the source)",
}
#: engines whose inventory versions are labelled by the upload date of what was read
DATE_LABELLED = {"llamacpp"}
#: files other than Python modules that a reader opens
OTHER_MEMBERS = ("/common/arg.cpp",)


class Unresolved:
    """Marker for a value that cannot be computed without running the engine."""

    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = Unresolved()


@dataclass
class Flag:
    """One command-line option as one release declares it."""

    names: list[str]
    type: str = "str"
    choices: list[str] | None = None
    default: str | None = None
    nargs: str | None = None
    negatable: bool = False
    help: str = ""
    deprecated: bool = False
    replacement: str | None = None
    removed: bool = False  # the parser knows the name only to refuse it

    @property
    def canonical(self) -> str:
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]

    @property
    def aliases(self) -> list[str]:
        return [n for n in self.names if n != self.canonical]


# --------------------------------------------------------------------------------------------
# Sources: a released package's files, read from a wheel, an sdist or the extracted cache
# --------------------------------------------------------------------------------------------


class Source(Protocol):
    def read(self, path: str) -> str | None: ...

    def listdir(self, prefix: str) -> list[str]: ...


class ArchiveSource:
    """Files of a wheel or sdist; remembers which members were read."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.accessed: dict[str, str] = {}
        self._files: dict[str, Callable[[], bytes]] = {}
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            zf = zipfile.ZipFile(archive)
            self._zip: zipfile.ZipFile | None = zf
            for name in zf.namelist():
                if name.endswith((".py", *OTHER_MEMBERS)):
                    self._files[name] = functools.partial(zf.read, name)
        else:
            self._zip = None
            with tarfile.open(archive) as tf:
                for member in tf.getmembers():
                    if not member.isfile() or not member.name.endswith((".py", *OTHER_MEMBERS)):
                        continue
                    # sdist members are <name>-<version>/[src/]<package path>
                    rel = member.name.split("/", 1)[1] if "/" in member.name else member.name
                    extracted = tf.extractfile(member)
                    if extracted is None:
                        continue
                    data = extracted.read()
                    for candidate in (rel, rel.removeprefix("src/")):
                        self._files.setdefault(candidate, functools.partial(bytes, data))

    def read(self, path: str) -> str | None:
        getter = self._files.get(path)
        if getter is None:
            return None
        text = getter().decode("utf-8", errors="replace")
        self.accessed[path] = text
        return text

    def listdir(self, prefix: str) -> list[str]:
        return sorted(n for n in self._files if n.startswith(prefix))

    def save(self, dest: Path) -> None:
        """Keep the members that were read, so a later run needs no download."""
        if dest.exists():
            shutil.rmtree(dest)
        for path, text in self.accessed.items():
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (dest / ".complete").write_text(self.archive.name + "\n", encoding="utf-8")

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


class DirSource:
    """Files kept by an earlier run."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, path: str) -> str | None:
        target = self.root / path
        return target.read_text(encoding="utf-8") if target.is_file() else None

    def listdir(self, prefix: str) -> list[str]:
        return sorted(
            str(p.relative_to(self.root))
            for p in self.root.rglob("*.py")
            if str(p.relative_to(self.root)).startswith(prefix)
        )


def pip_download(name: str, version: str, cache: Path) -> Path:
    """Download the release's wheel (or sdist as a last resort) and return its path."""
    cache.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(cache)]
    attempts = [
        [*base, "--only-binary=:all:", f"{name}=={version}"],
        [
            *base,
            "--only-binary=:all:",
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "manylinux_2_34_x86_64",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            f"{name}=={version}",
        ],
        [*base, "--no-binary=:all:", f"{name}=={version}"],
    ]
    for cmd in attempts:
        before = set(cache.iterdir())
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        found = find_archive(name, version, cache, before)
        if proc.returncode == 0 and found is not None:
            return found
    raise RuntimeError(f"could not download {name}=={version}")


def find_archive(name: str, version: str, cache: Path, before: set[Path]) -> Path | None:
    stem = name.replace("-", "_")
    candidates = [
        p
        for p in cache.iterdir()
        if p.is_file()
        and re.match(rf"(?i){re.escape(stem)}-{re.escape(version)}[-.]", p.name)
        and (p.suffix == ".whl" or p.name.endswith(".tar.gz"))
    ]
    candidates.sort(key=lambda p: (p not in before, p.suffix == ".whl"), reverse=True)
    return candidates[0] if candidates else None


def release_dates(name: str, index: str) -> dict[str, str]:
    """Version → date of its first uploaded file, from the PyPI simple index (JSON)."""
    request = urllib.request.Request(
        f"{index.rstrip('/')}/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        data = json.load(response)
    dates: dict[str, str] = {}
    for item in data.get("files", []):
        fn: str = item["filename"]
        m = re.match(
            rf"(?i){re.escape(name.replace('-', '_'))}-([^-]+?)(?:-|\.tar\.gz$|\.zip$)", fn
        )
        if not m or not item.get("upload-time"):
            continue
        day = str(item["upload-time"])[:10]
        ver = m.group(1)
        if ver not in dates or day < dates[ver]:
            dates[ver] = day
    return dates


# --------------------------------------------------------------------------------------------
# Static resolution of names, constants and classes across a package's modules
# --------------------------------------------------------------------------------------------


@dataclass
class Module:
    name: str
    tree: ast.Module
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)


@dataclass(frozen=True)
class ClassRef:
    node: ast.ClassDef
    module: Module


class Resolver:
    """Reads modules on demand and evaluates the literal parts of their code."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        self._modules[name] = None
        path = name.replace(".", "/")
        text = self.source.read(path + ".py")
        is_pkg = False
        if text is None:
            text = self.source.read(path + "/__init__.py")
            is_pkg = True
        if text is None:
            return None
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        mod = Module(name=name, tree=tree)
        package = name if is_pkg else name.rpartition(".")[0]
        for stmt in tree.body:
            self._index(stmt, mod, package)
        self._modules[name] = mod
        return mod

    def _index(self, stmt: ast.stmt, mod: Module, package: str) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    mod.assigns.setdefault(target.id, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.value is not None:
                mod.assigns.setdefault(stmt.target.id, stmt.value)
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - stmt.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in stmt.names:
                mod.imports.setdefault(alias.asname or alias.name, (base, alias.name))
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    mod.imports.setdefault(alias.asname, (alias.name, None))
                else:
                    top = alias.name.split(".")[0]
                    mod.imports.setdefault(top, (top, None))
        elif isinstance(stmt, ast.ClassDef):
            mod.classes.setdefault(stmt.name, stmt)
        elif isinstance(stmt, ast.FunctionDef):
            mod.functions.setdefault(stmt.name, stmt)
        elif isinstance(stmt, (ast.If, ast.Try)):
            for sub in [*stmt.body, *getattr(stmt, "orelse", [])]:
                self._index(sub, mod, package)

    def lookup(self, name: str, mod: Module, depth: int = 0) -> tuple[Any, Module] | None:
        """What a module-level name stands for: (ast.expr | ClassRef | Module, its module)."""
        if depth > 12:
            return None
        if name in mod.classes:
            return ClassRef(mod.classes[name], mod), mod
        if name in mod.assigns:
            return mod.assigns[name], mod
        if name in mod.imports:
            target, attr = mod.imports[name]
            if attr is None:
                sub = self.module(target)
                return (sub, sub) if sub is not None else None
            sub = self.module(f"{target}.{attr}")
            if sub is not None:
                return sub, sub
            owner = self.module(target)
            if owner is not None:
                return self.lookup(attr, owner, depth + 1)
        return None

    def resolve_class(self, expr: ast.expr, mod: Module) -> ClassRef | None:
        found = self._lookup_expr(expr, mod)
        return found if isinstance(found, ClassRef) else None

    def _lookup_expr(self, expr: ast.expr, mod: Module) -> Any:
        if isinstance(expr, ast.Name):
            hit = self.lookup(expr.id, mod)
            if hit is None:
                return None
            value, owner = hit
            if isinstance(value, ast.Name) and value.id != expr.id:
                return self._lookup_expr(value, owner)
            return value
        if isinstance(expr, ast.Attribute):
            base = self._lookup_expr(expr.value, mod)
            if isinstance(base, Module):
                hit = self.lookup(expr.attr, base)
                return hit[0] if hit else None
        return None

    def value(
        self,
        expr: ast.expr | None,
        mod: Module,
        local: dict[str, ast.expr] | None = None,
        depth: int = 0,
    ) -> Any:
        """The literal value of ``expr`` or UNRESOLVED."""
        if expr is None or depth > 20:
            return UNRESOLVED
        local = local or {}
        nxt = depth + 1
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            items = [self.value(e, mod, local, nxt) for e in expr.elts]
            return UNRESOLVED if any(i is UNRESOLVED for i in items) else items
        if isinstance(expr, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(expr.keys, expr.values, strict=True):
                if k is None:
                    return UNRESOLVED
                key, val = self.value(k, mod, local, nxt), self.value(v, mod, local, nxt)
                if key is UNRESOLVED or val is UNRESOLVED:
                    return UNRESOLVED
                out[key] = val
            return out
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            v = self.value(expr.operand, mod, local, nxt)
            return -v if isinstance(v, (int, float)) else UNRESOLVED
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mult, ast.BitOr)):
            left = self.value(expr.left, mod, local, nxt)
            right = self.value(expr.right, mod, local, nxt)
            if left is UNRESOLVED or right is UNRESOLVED:
                return UNRESOLVED
            try:
                if isinstance(expr.op, ast.Add):
                    return left + right
                if isinstance(expr.op, ast.Mult):
                    return left * right
                if isinstance(left, dict) and isinstance(right, dict):
                    return {**left, **right}
            except TypeError:
                return UNRESOLVED
            return UNRESOLVED
        if isinstance(expr, ast.JoinedStr):
            return self.text(expr, mod, local)
        if isinstance(expr, ast.Name):
            if expr.id in local:
                return self.value(local[expr.id], mod, {}, nxt)
            hit = self.lookup(expr.id, mod)
            if hit is None or not isinstance(hit[0], ast.expr):
                return UNRESOLVED
            return self.value(hit[0], hit[1], {}, nxt)
        if isinstance(expr, ast.Attribute):
            base = self._lookup_expr(expr.value, mod)
            if isinstance(base, Module):
                hit = self.lookup(expr.attr, base)
                if hit is not None and isinstance(hit[0], ast.expr):
                    return self.value(hit[0], hit[1], {}, nxt)
                return UNRESOLVED
            if isinstance(base, ClassRef):
                return self.class_attr(base, expr.attr, nxt)
            return UNRESOLVED
        if isinstance(expr, ast.Call):
            return self._call_value(expr, mod, local, nxt)
        return UNRESOLVED

    def _call_value(
        self, expr: ast.Call, mod: Module, local: dict[str, ast.expr], depth: int
    ) -> Any:
        func = expr.func
        fname = (
            func.id
            if isinstance(func, ast.Name)
            else (func.attr if isinstance(func, ast.Attribute) else "")
        )
        kw = {k.arg: k.value for k in expr.keywords if k.arg}
        if fname in ("list", "tuple", "sorted", "set", "frozenset") and len(expr.args) == 1:
            inner = self.value(expr.args[0], mod, local, depth)
            if isinstance(inner, dict):
                inner = list(inner)
            if isinstance(inner, (list, str)):
                items = list(inner)
                return sorted(items, key=str) if fname in ("sorted", "set", "frozenset") else items
            return UNRESOLVED
        if fname in ("int", "float", "str", "bool") and len(expr.args) == 1:
            inner = self.value(expr.args[0], mod, local, depth)
            if inner is UNRESOLVED:
                return UNRESOLVED
            try:
                return {"int": int, "float": float, "str": str, "bool": bool}[fname](inner)
            except (TypeError, ValueError):
                return UNRESOLVED
        if fname == "keys" and isinstance(func, ast.Attribute) and not expr.args:
            inner = self.value(func.value, mod, local, depth)
            return list(inner) if isinstance(inner, dict) else UNRESOLVED
        if fname in ("field", "Field", "msgspec.field"):
            if "default" in kw:
                return self.value(kw["default"], mod, local, depth)
            if expr.args and fname == "Field":
                return self.value(expr.args[0], mod, local, depth)
            factory = kw.get("default_factory")
            if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "set", "tuple"):
                return {"list": [], "dict": {}, "set": [], "tuple": []}[factory.id]
            if isinstance(factory, ast.Lambda):
                return self.value(factory.body, mod, local, depth)
            return UNRESOLVED
        if fname == "get_field" and len(expr.args) == 2:
            cls = self.resolve_class(expr.args[0], mod)
            attr = self.value(expr.args[1], mod, local, depth)
            if cls is not None and isinstance(attr, str):
                return self.class_attr(cls, attr, depth)
        return UNRESOLVED

    def class_attr(self, cls: ClassRef, attr: str, depth: int = 0) -> Any:
        for ref in self.mro(cls):
            for stmt in ref.node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.target.id == attr
                ):
                    return self.value(stmt.value, ref.module, {}, depth + 1)
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == attr for t in stmt.targets
                ):
                    return self.value(stmt.value, ref.module, {}, depth + 1)
        return UNRESOLVED

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        """The class and its (statically found) bases, the class first."""
        out: list[ClassRef] = [cls]
        seen = {id(cls.node)}
        i = 0
        while i < len(out):
            for base in out[i].node.bases:
                ref = self.resolve_class(base, out[i].module)
                if ref is not None and id(ref.node) not in seen:
                    seen.add(id(ref.node))
                    out.append(ref)
            i += 1
        return out

    def text(
        self, expr: ast.expr | None, mod: Module, local: dict[str, ast.expr] | None = None
    ) -> str:
        """Help text: the literal parts, ``{expr}`` for the parts computed at run time."""
        if expr is None:
            return ""
        if isinstance(expr, ast.Constant):
            return str(expr.value) if expr.value is not None else ""
        if isinstance(expr, ast.JoinedStr):
            parts: list[str] = []
            for piece in expr.values:
                if isinstance(piece, ast.Constant):
                    parts.append(str(piece.value))
                elif isinstance(piece, ast.FormattedValue):
                    val = self.value(piece.value, mod, local)
                    plain = isinstance(val, (str, int, float)) and not isinstance(val, bool)
                    if plain or isinstance(val, list):
                        parts.append(str(val))
                    else:
                        parts.append("{" + ast.unparse(piece.value) + "}")
            return "".join(parts)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.text(expr.left, mod, local) + self.text(expr.right, mod, local)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
            return self.text(expr.left, mod, local)
        val = self.value(expr, mod, local)
        if isinstance(val, str):
            return val
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in ("format", "strip", "replace")
        ):
            return self.text(expr.func.value, mod, local)
        return "{" + ast.unparse(expr) + "}"


# --------------------------------------------------------------------------------------------
# Helpers shared by the readers
# --------------------------------------------------------------------------------------------

_DEPRECATED = re.compile(
    r"(^\W*deprecated\b)|(\b(is|are|been|being|now|will be|was)\s+deprecated\b)"
    r"|(\bdeprecated\s*(in favou?r|since|and will|[.:;,)\]]))|(\[deprecated\])",
    re.IGNORECASE,
)
_REPLACEMENT = re.compile(
    r"(?:\buse|replaced by|in favou?r of|superseded by|renamed to|moved to)\s+[`'\"]?"
    r"(--[A-Za-z0-9][\w{},.-]*(?:[= ][A-Za-z0-9_<>{},.-]+)?)",
    re.IGNORECASE,
)


_NOT_VALUES = {
    "instead",
    "to",
    "and",
    "or",
    "for",
    "which",
    "the",
    "with",
    "if",
    "in",
    "as",
    "when",
    "is",
}


def clean_help(text: str) -> str:
    text = re.sub(r"\s+", " ", text.replace("%%", "%")).strip()
    return text if len(text) <= HELP_LEN else text[: HELP_LEN - 1].rstrip() + "…"


def replacement_in(text: str, own: Iterable[str]) -> str | None:
    names = set(own)
    for m in _REPLACEMENT.finditer(re.sub(r"\s+", " ", text)):
        flag = m.group(1).rstrip(".,;:")
        if " " in flag and flag.split(" ", 1)[1].lower() in _NOT_VALUES:
            flag = flag.split(" ")[0]
        if flag.split("=")[0].split(" ")[0] not in names:
            return flag
    return None


def default_text(value: Any) -> str | None:
    if value is UNRESOLVED or value is None:
        return None
    if isinstance(value, (list, dict, tuple)):
        try:
            return json.dumps(value)
        except TypeError:
            return None
    return str(value)


def choice_list(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        value = list(value)
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
        return None
    out: list[str] = []
    for v in value:
        if v is not None and str(v) not in out:
            out.append(str(v))
    return out or None


def type_name_of(expr: ast.expr | None, res: Resolver, mod: Module) -> str:
    """The inventory type for an argparse ``type=`` callable."""
    if expr is None:
        return "str"
    if isinstance(expr, ast.Call):
        fname = ast.unparse(expr.func)
        if fname.endswith("optional_type") and expr.args:
            return type_name_of(expr.args[0], res, mod)
        if fname.endswith("partial") and expr.args:
            return type_name_of(expr.args[0], res, mod)
        return "str"
    name = ast.unparse(expr).split(".")[-1].lower()
    if name in ("int", "float", "str", "bool"):
        return name
    if "json" in name or "dict" in name or name in ("loads",):
        return "json"
    if "float" in name:
        return "float"
    if "int" in name:
        return "int"
    if "bool" in name:
        return "bool"
    return "str"


def function_locals(func: ast.AST) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out.setdefault(target.id, node.value)
    return out


def is_add_argument(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
    )


def flag_from_kwargs(
    names: list[str],
    kw: dict[str, tuple[ast.expr, Module]],
    res: Resolver,
    local: dict[str, ast.expr],
    derived: Flag | None = None,
) -> Flag:
    """An argparse ``add_argument`` call (explicit keywords over dataclass-derived ones)."""
    flag = replace(derived, names=names) if derived is not None else Flag(names=names)
    action_src = ""
    if "action" in kw:
        expr, mod = kw["action"]
        action_val = res.value(expr, mod, local)
        action_src = action_val if isinstance(action_val, str) else ast.unparse(expr)
        flag.negatable = "BooleanOptional" in action_src
        bool_actions = ("store_true", "store_false")
        if action_src in bool_actions or any(
            word in action_src for word in ("BooleanOptional", "StoreTrue", "StoreFalse")
        ):
            flag.type = "bool"
        elif action_src in ("store_const", "count") or "StoreConst" in action_src:
            flag.type = "bool" if "choices" not in kw else "str"
        if "Deprecated" in action_src:
            flag.deprecated = True
        if "type" not in kw and action_src in ("append", "extend"):
            flag.type = "str"
        if derived is not None and "BooleanOptional" not in action_src and flag.type != "bool":
            flag.negatable = False
    if "type" in kw:
        expr, mod = kw["type"]
        flag.type = type_name_of(expr, res, mod)
    if "choices" in kw:
        expr, mod = kw["choices"]
        flag.choices = choice_list(res.value(expr, mod, local))
    if "default" in kw:
        expr, mod = kw["default"]
        flag.default = default_text(res.value(expr, mod, local))
    if "nargs" in kw:
        expr, mod = kw["nargs"]
        val = res.value(expr, mod, local)
        flag.nargs = str(val) if val is not None and val is not UNRESOLVED else None
    if "help" in kw:
        expr, mod = kw["help"]
        flag.help = res.text(expr, mod, local)
    if "deprecated" in kw:
        expr, mod = kw["deprecated"]
        if res.value(expr, mod, local) is True:
            flag.deprecated = True
    for key in ("new_flag", "replacement", "new_name"):
        if key in kw:
            expr, mod = kw[key]
            val = res.value(expr, mod, local)
            if isinstance(val, str):
                flag.replacement = val
    return finish(flag)


def finish(flag: Flag) -> Flag:
    raw = flag.help
    if _DEPRECATED.search(raw):
        flag.deprecated = True
    if flag.deprecated and flag.replacement is None:
        flag.replacement = replacement_in(raw, flag.names)
    if flag.type == "bool" and not flag.negatable:
        flag.nargs = None if flag.nargs in (None, "0") else flag.nargs
    flag.help = clean_help(raw)
    if flag.choices is not None and flag.type == "bool":
        flag.type = "str"
    return flag


def option_strings(
    call: ast.Call, res: Resolver, mod: Module, local: dict[str, ast.expr]
) -> list[str]:
    names: list[str] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            continue
        val = res.value(arg, mod, local)
        if isinstance(val, str) and val.startswith("-") and "{" not in val:
            names.append(val)
    return names


# --------------------------------------------------------------------------------------------
# SGLang
# --------------------------------------------------------------------------------------------


def _annotated_parts(ann: ast.expr) -> tuple[ast.expr, list[ast.expr]] | None:
    """(inner type, metadata) for ``A[T, ...]`` / ``Annotated[T, ...]``."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if not isinstance(ann, ast.Subscript):
        return None
    base = ast.unparse(ann.value).split(".")[-1]
    if base not in ("A", "Annotated"):
        return None
    sl = ann.slice
    if isinstance(sl, ast.Tuple) and sl.elts:
        return sl.elts[0], list(sl.elts[1:])
    return None


@dataclass
class TypeInfo:
    """What a type annotation means for the CLI."""

    atoms: set[str]
    literals: list[Any] | None = None
    elem: str | None = None


def type_info(ann: ast.expr | None, res: Resolver, mod: Module, depth: int = 0) -> TypeInfo:
    info = TypeInfo(atoms=set())
    if ann is None or depth > 10:
        info.atoms.add("other")
        return info
    if isinstance(ann, ast.Constant):
        if ann.value is None:
            info.atoms.add("none")
            return info
        if isinstance(ann.value, str):
            try:
                return type_info(ast.parse(ann.value, mode="eval").body, res, mod, depth + 1)
            except SyntaxError:
                info.atoms.add("other")
                return info
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        a = type_info(ann.left, res, mod, depth + 1)
        b = type_info(ann.right, res, mod, depth + 1)
        return TypeInfo(a.atoms | b.atoms, a.literals or b.literals, a.elem or b.elem)
    if isinstance(ann, ast.Subscript):
        base = ast.unparse(ann.value).split(".")[-1]
        sl = ann.slice
        elts = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if base == "Optional":
            inner = type_info(elts[0], res, mod, depth + 1)
            inner.atoms.add("none")
            return inner
        if base == "Union":
            out = TypeInfo(atoms=set())
            for e in elts:
                sub = type_info(e, res, mod, depth + 1)
                out.atoms |= sub.atoms
                out.literals = out.literals or sub.literals
                out.elem = out.elem or sub.elem
            return out
        if base in ("Annotated", "A"):
            return type_info(elts[0], res, mod, depth + 1)
        if base == "Literal":
            vals = [res.value(e, mod) for e in elts]
            info.atoms.add("literal")
            info.literals = [v for v in vals if v is not UNRESOLVED]
            return info
        if base.lower() in ("list", "sequence", "tuple", "set", "frozenset", "iterable"):
            kind = {"sequence": "list", "iterable": "list", "frozenset": "set"}.get(
                base.lower(), base.lower()
            )
            info.atoms.add(kind)
            elem = type_info(elts[0], res, mod, depth + 1)
            info.elem = simple_type(elem)
            if elem.literals:
                info.literals = elem.literals
            return info
        if base.lower() in ("dict", "mapping"):
            info.atoms.add("dict")
            return info
        if base == "type":
            info.atoms.add("other")
            return info
        return type_info(ann.value, res, mod, depth + 1)
    if isinstance(ann, (ast.Name, ast.Attribute)):
        name = ast.unparse(ann).split(".")[-1]
        builtin = {"bool", "str", "int", "float", "dict", "list", "tuple", "set", "None"}
        if name in builtin:
            info.atoms.add("none" if name == "None" else name)
            return info
        if name in ("Any", "Callable", "Path"):
            info.atoms.add("other" if name != "Path" else "str")
            return info
        if isinstance(ann, ast.Name):
            hit = res.lookup(ann.id, mod)
        else:
            base_obj = res._lookup_expr(ann.value, mod)
            hit = res.lookup(ann.attr, base_obj) if isinstance(base_obj, Module) else None
        if hit is None:
            info.atoms.add("other")
            return info
        target, owner = hit
        if isinstance(target, ClassRef):
            info.atoms.add("class:" + class_kind(target, res))
            return info
        if isinstance(target, ast.expr):
            if isinstance(target, ast.Call) and ast.unparse(target.func).endswith("TypeVar"):
                info.atoms.add("other")
                return info
            return type_info(target, res, owner, depth + 1)
    info.atoms.add("other")
    return info


def class_kind(cls: ClassRef, res: Resolver) -> str:
    for ref in res.mro(cls):
        for dec in ref.node.decorator_list:
            text = ast.unparse(dec)
            if "dataclass" in text or text.split("(")[0].split(".")[-1] == "config":
                return "dataclass"
        for base in ref.node.bases:
            text = ast.unparse(base).split(".")[-1]
            if text in ("BaseModel", "Struct"):
                return "dataclass"
            if "Enum" in text:
                return "enum"
            if text in ("TypedDict",):
                return "dict"
    return "other"


def simple_type(info: TypeInfo) -> str:
    atoms = info.atoms
    if "bool" in atoms:
        return "bool"
    if "literal" in atoms and info.literals:
        first = info.literals[0]
        return (
            "int"
            if isinstance(first, int) and not isinstance(first, bool)
            else ("float" if isinstance(first, float) else "str")
        )
    if "int" in atoms:
        return "int"
    if "float" in atoms:
        return "float"
    if "dict" in atoms or "class:dataclass" in atoms or "class:dict" in atoms:
        return "json"
    return "str"


def sglang_fields(cls: ClassRef, res: Resolver) -> list[Flag]:
    """Flags of ``A[T, "help"]`` / ``A[T, Arg(...)]`` fields (``add_cli_args_from_dataclass``)."""
    flags: list[Flag] = []
    seen: set[str] = set()
    for ref in reversed(res.mro(cls)):
        for stmt in ref.node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            fname = stmt.target.id
            parts = _annotated_parts(stmt.annotation)
            if parts is None or fname in seen:
                continue
            inner, meta = parts
            argkw: dict[str, ast.expr] = {}
            helptext: ast.expr | None = None
            found = False
            for m in meta:
                if isinstance(m, ast.Constant) and isinstance(m.value, str):
                    helptext, found = m, True
                    break
                if isinstance(m, (ast.JoinedStr, ast.BinOp)):
                    helptext, found = m, True
                    break
                if isinstance(m, ast.Call) and ast.unparse(m.func).split(".")[-1] == "Arg":
                    argkw = {k.arg: k.value for k in m.keywords if k.arg}
                    helptext, found = argkw.get("help"), True
                    break
            if not found:
                continue
            mod = ref.module
            if res.value(argkw.get("no_cli"), mod) is True:
                continue
            seen.add(fname)
            cli_name = res.value(argkw.get("cli_name"), mod)
            names = [cli_name if isinstance(cli_name, str) else "--" + fname.replace("_", "-")]
            aliases = res.value(argkw.get("aliases"), mod)
            if isinstance(aliases, list):
                names += [a for a in aliases if isinstance(a, str)]
            info = type_info(inner, res, mod)
            flag = Flag(names=names, help=res.text(helptext, mod))
            flag.default = default_text(res.value(stmt.value, mod)) if stmt.value else None
            choices = choice_list(res.value(argkw["choices"], mod)) if "choices" in argkw else None
            nargs = res.value(argkw.get("nargs"), mod)
            if "action" in argkw:
                action = ast.unparse(argkw["action"])
                flag.type = (
                    "bool"
                    if ("store_true" in action or "StoreTrue" in action)
                    else (simple_type(info))
                )
                flag.negatable = "BooleanOptional" in action
                flag.deprecated = "Deprecated" in action
                akw = res.value(argkw.get("action_kwargs"), mod)
                if isinstance(akw, dict) and isinstance(akw.get("new_flag"), str):
                    flag.replacement = akw["new_flag"]
            elif "literal" in info.atoms and info.literals and not info.atoms & {"list"}:
                flag.type = simple_type(info)
                flag.choices = choices or choice_list(info.literals)
            elif "list" in info.atoms and "type_parser" not in argkw:
                flag.type = info.elem or "str"
                flag.nargs = nargs if isinstance(nargs, str) else "+"
                flag.choices = choices
            elif info.atoms - {"none"} == {"bool"}:
                flag.type = "bool"
            else:
                if "type_parser" in argkw:
                    flag.type = type_name_of(argkw["type_parser"], res, mod)
                else:
                    flag.type = {"int": "int", "float": "float"}.get(simple_type(info), "str")
                flag.choices = choices
                flag.nargs = nargs if isinstance(nargs, str) else None
            flags.append(finish(flag))
    return flags


def read_sglang(res: Resolver) -> list[Flag]:
    mod = res.module("sglang.srt.server_args")
    if mod is None:
        raise RuntimeError("sglang/srt/server_args.py not found")
    flags = list(argparse_calls(mod, res))
    # Dataclass-declared fields: ServerArgs itself (0.5.1x) and its namespaces (0.5.20+).
    classes: list[ClassRef] = []
    for name, node in mod.classes.items():
        if name == "ServerArgs":
            classes.append(ClassRef(node, mod))
    for value in mod.assigns.values():
        if (
            isinstance(value, ast.List)
            and value.elts
            and all(isinstance(e, ast.Name) for e in value.elts)
        ):
            refs = [res.resolve_class(e, mod) for e in value.elts]
            if all(r is not None for r in refs):
                classes += [r for r in refs if r is not None]
    dataclass_flags: list[Flag] = []
    for cls in classes:
        dataclass_flags += sglang_fields(cls, res)
    # add_cli_args_from_dataclass runs first; explicit registrations follow it.
    return dataclass_flags + flags


def argparse_calls(
    mod: Module,
    res: Resolver,
    kwargs_vars: Callable[[ast.AST, Module], dict[str, Any]] | None = None,
) -> Iterator[Flag]:
    """Every ``*.add_argument("--x", ...)`` in the module's functions, in source order."""
    funcs = [
        n for n in ast.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    done: set[int] = set()
    for func in funcs:
        local = function_locals(func)
        kvars = kwargs_vars(func, mod) if kwargs_vars else {}
        for node in ast.walk(func):
            if not is_add_argument(node) or id(node) in done:
                continue
            assert isinstance(node, ast.Call)
            done.add(id(node))
            names = option_strings(node, res, mod, local)
            if not names:
                continue
            kw: dict[str, tuple[ast.expr, Module]] = {}
            derived: Flag | None = None
            for k in node.keywords:
                if k.arg is not None:
                    kw[k.arg] = (k.value, mod)
                else:
                    derived_k, extra = expand_star_kwargs(k.value, kvars, res, mod)
                    derived = derived_k or derived
                    for ek, ev in extra.items():
                        kw.setdefault(ek, ev)
            yield flag_from_kwargs(names, kw, res, local, derived)


def expand_star_kwargs(
    expr: ast.expr, kvars: dict[str, Any], res: Resolver, mod: Module
) -> tuple[Flag | None, dict[str, tuple[ast.expr, Module]]]:
    """``**X["field"]`` (X = get_kwargs(Config)) or ``**{**X["field"], "help": ...}``."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
        key = res.value(expr.slice, mod)
        getter = kvars.get(expr.value.id)
        if getter is not None and isinstance(key, str):
            derived, overrides = getter(key)
            return derived, overrides
        return None, {}
    if isinstance(expr, ast.Dict):
        found: Flag | None = None
        extra: dict[str, tuple[ast.expr, Module]] = {}
        for k, v in zip(expr.keys, expr.values, strict=True):
            if k is None:
                d, e = expand_star_kwargs(v, kvars, res, mod)
                found = d or found
                extra.update(e)
            else:
                key = res.value(k, mod)
                if isinstance(key, str):
                    extra[key] = (v, mod)
        return found, extra
    return None, {}


# --------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------


@dataclass
class ConfigField:
    name: str
    annotation: ast.expr
    value: ast.expr | None
    doc: str
    module: Module


def dataclass_fields(cls: ClassRef, res: Resolver) -> dict[str, ConfigField]:
    out: dict[str, ConfigField] = {}
    for ref in reversed(res.mro(cls)):
        body = ref.node.body
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if "ClassVar" in ast.unparse(stmt.annotation) or "InitVar" in ast.unparse(
                stmt.annotation
            ):
                continue
            doc = ""
            if i + 1 < len(body):
                nxt = body[i + 1]
                if (
                    isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)
                ):
                    doc = nxt.value.value
            out[stmt.target.id] = ConfigField(
                stmt.target.id, stmt.annotation, stmt.value, doc, ref.module
            )
    return out


def vllm_field_flag(cf: ConfigField, res: Resolver) -> Flag:
    """What vLLM's ``get_kwargs`` derives from one config dataclass field."""
    info = type_info(cf.annotation, res, cf.module)
    atoms = info.atoms
    flag = Flag(names=["--" + cf.name.replace("_", "-")], help=cf.doc)
    flag.default = default_text(res.value(cf.value, cf.module)) if cf.value is not None else None
    if any(a == "class:dataclass" for a in atoms):
        flag.type = "json"
    elif atoms == {"bool", "str", "none"}:
        flag.type, flag.nargs = "str", "?"
    elif "bool" in atoms:
        flag.type, flag.negatable = "bool", True
    elif "literal" in atoms and info.literals and not atoms & {"list", "tuple", "set"}:
        flag.type = simple_type(info)
        if "str" not in atoms:
            flag.choices = sorted(choice_list(info.literals) or []) or None
    elif atoms & {"list", "tuple", "set"}:
        flag.type = info.elem or "str"
        if info.elem == "json":
            flag.type = "json"
        flag.nargs = "+"
        if info.literals:
            flag.choices = choice_list(info.literals)
    elif "int" in atoms:
        flag.type = "int"
    elif "float" in atoms:
        flag.type = "float"
    elif "dict" in atoms or "class:dict" in atoms:
        flag.type = "json"
    else:
        flag.type = "str"
    return flag


def vllm_kwargs_vars(
    res: Resolver, mutations_scope: list[ast.AST] | None = None
) -> Callable[[ast.AST, Module], dict[str, Any]]:
    """``X = get_kwargs(SomeConfig)`` in a function → a field-name lookup for ``**X["f"]``."""

    def make(func: ast.AST, mod: Module) -> dict[str, Any]:
        out: dict[str, Any] = {}
        scopes = [func, *(mutations_scope or [])]
        for node in ast.walk(func):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = node.targets[0]
            call = node.value
            if not (isinstance(target, ast.Name) and isinstance(call, ast.Call)):
                continue
            if not ast.unparse(call.func).endswith("get_kwargs") or not call.args:
                continue
            cls = res.resolve_class(call.args[0], mod)
            if cls is None:
                continue
            fields = dataclass_fields(cls, res)
            mutations = collect_mutations(scopes, target.id, res, mod)

            def getter(
                key: str,
                fields: dict[str, ConfigField] = fields,
                mutations: dict[str, dict[str, Any]] = mutations,
            ) -> tuple[Flag | None, dict[str, tuple[ast.expr, Module]]]:
                cf = fields.get(key)
                derived = vllm_field_flag(cf, res) if cf is not None else None
                return derived, mutations.get(key, {})

            out[target.id] = getter
        return out

    return make


def collect_mutations(
    scopes: list[ast.AST], var: str, res: Resolver, mod: Module
) -> dict[str, dict[str, Any]]:
    """``X["field"]["type"] = ...`` after ``X = get_kwargs(...)``: keyword overrides."""
    out: dict[str, dict[str, Any]] = {}
    for scope in scopes:
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
                continue
            inner = target.value
            if not (
                isinstance(inner.value, ast.Name) and inner.value.id in (var, "frontend_kwargs")
            ):
                continue
            fname, key = res.value(inner.slice, mod), res.value(target.slice, mod)
            if isinstance(fname, str) and isinstance(key, str):
                out.setdefault(fname, {})[key] = (node.value, mod)
    return out


def frontend_dataclass_flags(mod: Module, res: Resolver) -> list[Flag]:
    """Classes whose ``add_cli_args`` loops over their own fields (vLLM's FrontendArgs)."""
    parser_fn = mod.functions.get("make_arg_parser")
    if parser_fn is None:
        return []
    used: list[ClassRef] = []
    for node in ast.walk(parser_fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_cli_args"
        ):
            ref = res.resolve_class(node.func.value, mod)
            if ref is not None and ref.node.name not in ("AsyncEngineArgs", "EngineArgs"):
                used.append(ref)
    flags: list[Flag] = []
    for cls in used:
        mro = res.mro(cls)
        loops = [
            n
            for ref in mro
            for n in ast.walk(ref.node)
            if is_add_argument(n)
            and isinstance(n, ast.Call)
            and any(isinstance(a, ast.JoinedStr) for a in n.args)
        ]
        if not loops:
            continue
        customizers: list[ast.AST] = [
            f
            for ref in mro
            for f in ref.node.body
            if isinstance(f, ast.FunctionDef)
            and f.name in ("_customize_cli_kwargs", "add_cli_args")
        ]
        mutations = collect_mutations(customizers, "frontend_kwargs", res, mod)
        for cf in dataclass_fields(cls, res).values():
            derived = vllm_field_flag(cf, res)
            over = mutations.get(cf.name, {})
            names = list(derived.names)
            if "flags" in over:
                extra = res.value(over["flags"][0], over["flags"][1])
                if isinstance(extra, list):
                    names = [*names, *[e for e in extra if isinstance(e, str)]]
            kw = {k: v for k, v in over.items() if k != "flags"}
            flags.append(flag_from_kwargs(names, kw, res, {}, derived))
    return flags


VLLM_MODULES = [
    "vllm.entrypoints.openai.cli_args",
    "vllm.entrypoints.common.cli_args",
    "vllm.engine.arg_utils",
]


def read_vllm(res: Resolver) -> list[Flag]:
    flags: list[Flag] = []
    found = False
    for name in VLLM_MODULES:
        mod = res.module(name)
        if mod is None:
            continue
        found = True
        if name.endswith("cli_args"):
            flags += list(argparse_calls(mod, res))
            flags += frontend_dataclass_flags(mod, res)
        else:
            flags += list(argparse_calls(mod, res, vllm_kwargs_vars(res)))
    if not found:
        raise RuntimeError("vllm/engine/arg_utils.py not found")
    return flags


# --------------------------------------------------------------------------------------------
# transformers serve
# --------------------------------------------------------------------------------------------


def read_transformers(res: Resolver) -> list[Flag]:
    mod = None
    for name in ("transformers.cli.serve", "transformers.commands.serving"):
        mod = res.module(name)
        if mod is not None:
            break
    if mod is None:
        raise RuntimeError("transformers serve command not found")
    flags: list[Flag] = []
    for func in ast.walk(mod.tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        args = func.args
        positional = args.posonlyargs + args.args
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
        defaults += list(args.defaults)
        pairs = list(zip(positional, defaults, strict=True))
        pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
        for arg, default in pairs:
            option: ast.Call | None = None
            inner: ast.expr | None = arg.annotation
            parts = _annotated_parts(arg.annotation) if arg.annotation is not None else None
            if parts is not None:
                inner = parts[0]
                for m in parts[1]:
                    if isinstance(m, ast.Call) and ast.unparse(m.func).endswith("Option"):
                        option = m
            if (
                option is None
                and isinstance(default, ast.Call)
                and ast.unparse(default.func).endswith("Option")
            ):
                option = default
                default = option.args[0] if option.args else None
            if option is None:
                continue
            okw = {k.arg: k.value for k in option.keywords if k.arg}
            decls = [res.value(a, mod) for a in option.args]
            decls = [d for d in decls if isinstance(d, str) and d.startswith("-")]
            info = type_info(inner, res, mod)
            is_bool = info.atoms - {"none"} == {"bool"}
            names: list[str] = []
            negatable = False
            for d in decls:
                for piece in d.split("/"):
                    piece = piece.strip()
                    if piece.startswith("--no-"):
                        negatable = True
                    elif piece:
                        names.append(piece)
            if not names:
                names = ["--" + arg.arg.replace("_", "-")]
                negatable = is_bool
            flag = Flag(names=names, negatable=negatable, help=res.text(okw.get("help"), mod))
            flag.type = "bool" if is_bool else simple_type(info)
            if "literal" in info.atoms:
                flag.choices = choice_list(info.literals)
            flag.default = default_text(res.value(default, mod)) if default is not None else None
            if res.value(okw.get("deprecated"), mod) is True:
                flag.deprecated = True
            flags.append(finish(flag))
    return flags


def read_llamacpp(res: Resolver) -> list[Flag]:
    """llama-server's options from the vendored llama.cpp's ``common/arg.cpp``."""
    text = res.source.read("vendor/llama.cpp/common/arg.cpp")
    if text is None:
        raise RuntimeError("vendor/llama.cpp/common/arg.cpp not in the sdist")
    flags: list[Flag] = []
    for opt in server_options(text):
        negatable = len(opt.negated) == 1 and any(
            opt.negated[0] == "--no-" + n.removeprefix("--") for n in opt.names
        )
        names = opt.names if negatable else [*opt.names, *opt.negated]
        longs = [n for n in names if n.startswith("--")]
        flags.append(
            Flag(
                names=[*longs, *[n for n in names if n not in longs]],
                type=opt.type,
                choices=_cpp_choices(opt.value_hint),
                negatable=negatable,
                help=opt.help[:HELP_LEN],
                replacement=opt.replacement,
                removed=opt.removed,
            )
        )
    return flags


READERS: dict[str, tuple[str, Callable[[Resolver], list[Flag]]]] = {
    "sglang": ("sglang", read_sglang),
    "vllm": ("vllm", read_vllm),
    "transformers": ("transformers", read_transformers),
    "llamacpp": ("llama-cpp-python", read_llamacpp),
}


# --------------------------------------------------------------------------------------------
# Assembly and output
# --------------------------------------------------------------------------------------------


def read_version(engine: str, version: str, cache: Path, keep_wheels: bool) -> list[Flag]:
    package, reader = READERS[engine]
    kept = cache / "src" / f"{package}-{version}"
    if (kept / ".complete").is_file():
        return dedupe(reader(Resolver(DirSource(kept))))
    archive = pip_download(package, version, cache)
    source = ArchiveSource(archive)
    try:
        flags = dedupe(reader(Resolver(source)))
        source.save(kept)
    finally:
        source.close()
    if not keep_wheels:
        archive.unlink(missing_ok=True)
    return flags


def dedupe(flags: list[Flag]) -> list[Flag]:
    """One record per canonical name; a later registration of the same name wins its fields."""
    out: dict[str, Flag] = {}
    for f in flags:
        prev = out.get(f.canonical)
        if prev is not None:
            f.names = [*f.names, *[n for n in prev.names if n not in f.names]]
            f.deprecated = f.deprecated or prev.deprecated
            f.removed = f.removed and prev.removed
            f.replacement = f.replacement or prev.replacement
            if not f.help:
                f.help = prev.help
        out[f.canonical] = f
    # An option string claimed by two records stays with the first.
    claimed: dict[str, str] = {}
    for name, f in out.items():
        keep = []
        for n in f.names:
            if n == name or n not in claimed:
                claimed.setdefault(n, name)
                keep.append(n)
        f.names = keep
    return list(out.values())


def group_across_versions(
    tables: dict[str, list[Flag]], versions: list[str]
) -> dict[str, dict[str, Flag]]:
    """Version → {name in the newest version that has the flag: flag}.

    A flag whose canonical spelling changed (``--tensor-parallel-size`` with alias ``--tp-size``
    becoming ``--tp-size`` with alias ``--tensor-parallel-size``) is one flag: records of
    different versions that share an option string are grouped, newest spelling first.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ver in versions:
        for f in tables[ver]:
            for n in f.names[1:]:
                if n.startswith("--"):
                    parent[find(n)] = find(f.canonical)
            find(f.canonical)
    latest_name: dict[str, str] = {}
    for ver in versions:  # ascending: the newest version's spelling wins
        for f in tables[ver]:
            latest_name[find(f.canonical)] = f.canonical
    out: dict[str, dict[str, Flag]] = {}
    for ver in versions:
        table: dict[str, Flag] = {}
        for f in tables[ver]:
            key = latest_name[find(f.canonical)]
            if key in table:
                continue
            if f.canonical != key and key in f.names:
                f.names = [key, *[n for n in f.names if n != key]]
            table[key] = f
        out[ver] = table
    return out


def build(engine: str, versions: list[str], cache: Path, index: str, keep: bool) -> dict[str, Any]:
    dates = release_dates(READERS[engine][0], index)
    versions = sorted(versions, key=Version)
    tables: dict[str, list[Flag]] = {}
    for ver in versions:
        tables[ver] = read_version(engine, ver, cache, keep)
        print(f"{engine} {ver}: {len(tables[ver])} flags", file=sys.stderr)
    per_version = group_across_versions(tables, versions)
    names = sorted({n for table in per_version.values() for n in table})
    records: list[dict[str, Any]] = []
    for name in names:
        seen = [v for v in versions if name in per_version[v]]
        present = [v for v in seen if not per_version[v][name].removed]
        if not present:
            continue  # only ever a name the parser refuses
        latest = per_version[present[-1]][name]
        latest_aliases = aliases_under(latest, name)
        rec: dict[str, Any] = {
            "name": name,
            "aliases": latest_aliases,
            "type": latest.type,
            "choices": latest.choices,
            "default": latest.default,
            "nargs": latest.nargs,
            "negatable": latest.negatable,
            "help": latest.help,
            "versions": present,
            "deprecated_in": [v for v in present if per_version[v][name].deprecated],
            "replacement": next(
                (
                    per_version[v][name].replacement
                    for v in reversed(seen)
                    if per_version[v][name].replacement
                ),
                None,
            ),
        }
        by_choice = {
            v: per_version[v][name].choices
            for v in present
            if per_version[v][name].choices != latest.choices
        }
        by_type = {
            v: per_version[v][name].type
            for v in present
            if per_version[v][name].type != latest.type
        }
        by_alias = {
            v: found
            for v in present
            if (found := aliases_under(per_version[v][name], name)) != latest_aliases
        }
        if by_choice:
            rec["choices_by_version"] = by_choice
        if by_type:
            rec["type_by_version"] = by_type
        if by_alias:
            rec["aliases_by_version"] = by_alias
        records.append(rec)
    doc = {
        "engine": engine,
        "generated_by": SCRIPT,
        "source": SOURCES[engine],
        "versions": [{"version": v, "released": dates.get(v)} for v in versions],
        "flags": records,
    }
    return relabel_by_date(doc, READERS[engine][0]) if engine in DATE_LABELLED else doc


def aliases_under(flag: Flag, name: str) -> list[str]:
    """Every string a release accepts for the flag recorded as ``name``: its own canonical
    one included where a later release renamed the flag (-nkvo/--no-kv-offload became
    --kv-offload's)."""
    return [n for n in flag.names if n != name]


def relabel_by_date(doc: dict[str, Any], package: str) -> dict[str, Any]:
    """Name each version by the upload date of the package release it was read from
    (``2025.8.15``, which orders like the dates), keeping that release as ``read_from``."""
    label: dict[str, str] = {}
    for entry in doc["versions"]:
        released = entry["released"]
        if released is None:
            raise RuntimeError(f"no upload date for {package} {entry['version']}")
        year, month, day = (int(x) for x in released.split("-"))
        label[entry["version"]] = f"{year}.{month}.{day}"
    doc["versions"] = [
        {
            "version": label[e["version"]],
            "released": e["released"],
            "read_from": f"{package} {e['version']}",
        }
        for e in doc["versions"]
    ]
    # a log cannot be tied to one of these releases: an unstated one may be any of them
    doc["unknown_version"] = "any"
    order = ("engine", "generated_by", "source", "unknown_version", "versions", "flags")
    doc = {k: doc[k] for k in order}
    for rec in doc["flags"]:
        rec["versions"] = [label[v] for v in rec["versions"]]
        rec["deprecated_in"] = [label[v] for v in rec["deprecated_in"]]
        for key in ("choices_by_version", "type_by_version", "aliases_by_version"):
            if key in rec:
                rec[key] = {label[v]: x for v, x in rec[key].items()}
    return doc


class _Dumper(yaml.SafeDumper):
    pass


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(x, (dict, list)) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    flow = "version" in data and "released" in data and len(data) <= 3
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(dict, _represent_dict)


def write(doc: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{doc['engine']}.yaml"
    buf = io.StringIO()
    buf.write(f"# Generated by {SCRIPT}; do not edit by hand.\n")
    yaml.dump(doc, buf, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--engines", nargs="+", choices=sorted(VERSIONS), default=sorted(VERSIONS))
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "wheels")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--index", default="https://pypi.org/simple")
    ap.add_argument("--keep-wheels", action="store_true", help="Do not delete downloaded wheels.")
    args = ap.parse_args(argv)
    for engine in args.engines:
        doc = build(engine, VERSIONS[engine], args.cache, args.index, args.keep_wheels)
        path = write(doc, args.out)
        print(f"wrote {path} ({len(doc['flags'])} flags)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
