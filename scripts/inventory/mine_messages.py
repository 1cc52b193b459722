"""Mine flag-naming error and warning messages from released SGLang and vLLM wheels.

The script downloads real wheels from PyPI (``pip download --no-deps``), reads the ``.py``
members straight out of the zip with :mod:`zipfile` and :mod:`ast` (the engine is never
imported or installed), and finds the messages that the engine raises or logs:

* ``raise SomeError(<str>)``
* ``logger.error/warning/critical/exception(<str>, *args)`` (also ``*_once`` variants)
* ``assert cond, <str>``
* ``sys.exit(<str>)``

where ``<str>`` is a literal, an f-string, an implicit or ``+`` concatenation, a ``%``-format,
a ``.format(...)`` call, or a local variable assigned exactly once from one of those.

Each message becomes a ``str.format``-style TEMPLATE (literal braces doubled) and a REGEX with
one named group per interpolation. Only messages that name a configuration field or a flag are
kept; advice ("try increasing `gpu_memory_utilization`") is extracted conservatively.

Output: ``src/servedoctor/knowledge/mined/<engine>.yaml``.

Usage::

    python scripts/inventory/mine_messages.py                 # pinned versions, both engines
    python scripts/inventory/mine_messages.py --auto          # latest + ~1 year older, from PyPI
    python scripts/inventory/mine_messages.py --engine vllm --versions 0.11.1,0.33.0
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import json
import re
import string
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "src" / "servedoctor" / "knowledge" / "mined"
WHEEL_DIR = Path("/tmp/mine-wheels")
GENERATED_BY = "scripts/inventory/mine_messages.py"

# Pinned so that a plain run reproduces the checked-in data; --auto re-picks them from PyPI.
# sglang 0.5.23 (2026-10-30) and 0.5.4 (2025-10-24); vllm 0.33.0 (2026-11-02) and 0.11.1
# (2025-11-19): the latest release and the release nearest to one year before it.
DEFAULT_VERSIONS: dict[str, list[str]] = {
    "sglang": ["0.5.4", "0.5.23"],
    "vllm": ["0.11.1", "0.33.0"],
}

MIN_LITERAL_CHARS = 25
NUMERIC_RE = r"[-+]?\d[\d.,_]*(?:\s*[KMGT]i?B)?"
TEXT_RE = r".*?"
TAIL_RE = r".*"
NUMERIC_HINTS = ("len", "size", "tokens", "num", "count", "memory", "bytes", "fraction", "util")
NUMERIC_EXACT = {"bs", "blocks"}
NOT_NUMERIC = {"sizes", "lens", "lengths", "counts", "numbers", "utils", "utility"}
LOG_METHODS = {
    "error": "logger.error",
    "error_once": "logger.error",
    "warning": "logger.warning",
    "warning_once": "logger.warning",
    "warn": "logger.warning",
    "warn_once": "logger.warning",
    "critical": "logger.critical",
    "fatal": "logger.critical",
    "exception": "logger.exception",
}
SKIP_PARTS = ("/tests/", "/test/", "/benchmarks/", "sglang/multimodal_gen/")

FLAG_IN_TEXT = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)+|[a-z][a-z0-9]{2,})\b")
QUOTED_SNAKE = re.compile(r"[`'\"]([a-z][a-z0-9]*(?:_[a-z0-9]+)+)[`'\"]")
SNAKE_WORD = re.compile(r"(?<![\w-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w-])")


# ---------------------------------------------------------------------------------------------
# Known fields and flags of one engine version
# ---------------------------------------------------------------------------------------------


@dataclass
class Known:
    """Config fields and CLI flags of one engine version."""

    field_flag: dict[str, str | None] = field(default_factory=dict)  # field -> primary flag
    flag_field: dict[str, str] = field(default_factory=dict)  # every flag/alias -> field
    bool_flags: set[str] = field(default_factory=set)

    def add(self, name: str, flag: str | None, *, is_bool: bool = False) -> None:
        if self.field_flag.get(name) is None:
            self.field_flag[name] = flag
        if flag is not None:
            self.flag_field.setdefault(flag, name)
            if is_bool:
                self.bool_flags.add(flag)

    def flag_of(self, name: str) -> str | None:
        return self.field_flag.get(name)


def _str_const(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _snake(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _annotation_is_bool(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "bool"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # bool | None
        sides = [node.left, node.right]
        return any(map(_annotation_is_bool, sides)) and all(
            _annotation_is_bool(x) or (isinstance(x, ast.Constant) and x.value is None)
            for x in sides
        )
    if isinstance(node, ast.Subscript):  # A[bool, ...] / Annotated[bool, ...] / Optional[bool]
        inner = node.slice
        if isinstance(inner, ast.Tuple) and inner.elts:
            return _annotation_is_bool(inner.elts[0])
        return getattr(node.value, "id", "") == "Optional" and _annotation_is_bool(inner)
    return False


def _arg_meta(node: ast.AST | None) -> ast.Call | None:
    """The ``Arg(...)`` call inside an ``A[T, Arg(...)]`` annotation, if any."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
        for elt in node.slice.elts[1:]:
            if isinstance(elt, ast.Call) and getattr(elt.func, "id", None) == "Arg":
                return elt
    return None


def collect_add_argument(tree: ast.AST, known: Known) -> None:
    """``parser.add_argument("--x-y", "--alias", dest=..., action="store_true")``."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        opts = [s for s in (_str_const(a) for a in node.args) if s and s.startswith("--")]
        if not opts:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        is_bool = _str_const(kw.get("action")) in {"store_true", "store_false"} or (
            isinstance(kw.get("action"), ast.Attribute)
            and getattr(kw["action"], "attr", "") == "BooleanOptionalAction"
        )
        primary = opts[0]
        dest = _str_const(kw.get("dest"))
        names = [dest] if dest else []
        names += [_snake(o) for o in opts]
        for name in names:
            known.add(name, primary, is_bool=is_bool)
        for opt in opts:
            known.flag_field.setdefault(opt, names[0])
            if is_bool:
                known.bool_flags.add(opt)


def class_fields(tree: ast.AST) -> Iterator[tuple[str, ast.ClassDef, ast.AnnAssign]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if name.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
                    continue
                yield name, node, stmt


def _is_annotated(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Subscript) and getattr(node.value, "id", "") in {"A", "Annotated"}


def collect_dataclass_flags(
    tree: ast.AST, known: Known, classes: set[str] | None, *, annotated_only: bool = False
) -> None:
    """Dataclass fields that are CLI flags (``--field-name``, or ``Arg(cli_name=...)``).

    With ``annotated_only`` (SGLang) a plain field is a flag only when ``add_argument``
    registered ``--field-name``; SGLang >= 0.5.1x derives flags from ``A[T, ...]`` fields.
    """
    for name, cls, stmt in class_fields(tree):
        if classes is not None and cls.name not in classes:
            continue
        if annotated_only and not _is_annotated(stmt.annotation):
            dashed = "--" + name.replace("_", "-")
            known.add(name, dashed if dashed in known.flag_field else None)
            continue
        meta = _arg_meta(stmt.annotation)
        flag = "--" + name.replace("_", "-")
        aliases: list[str] = []
        if meta is not None:
            kw = {k.arg: k.value for k in meta.keywords if k.arg}
            no_cli = kw.get("no_cli")
            if isinstance(no_cli, ast.Constant) and no_cli.value is True:
                known.add(name, None)
                continue
            flag = _str_const(kw.get("cli_name")) or flag
            alias_list = kw.get("aliases")
            if isinstance(alias_list, ast.List):
                aliases = [s for s in map(_str_const, alias_list.elts) if s]
        is_bool = _annotation_is_bool(stmt.annotation)
        known.add(name, flag, is_bool=is_bool)
        for alias in aliases:
            known.flag_field.setdefault(alias, name)
            if alias.startswith("--"):
                known.add(_snake(alias), flag, is_bool=is_bool)


def collect_known(engine: str, sources: dict[str, str]) -> Known:
    known = Known()
    trees: dict[str, ast.AST] = {}

    def tree(path: str) -> ast.AST | None:
        if path not in trees:
            try:
                trees[path] = ast.parse(sources[path])
            except (SyntaxError, KeyError):
                return None
        return trees[path]

    if engine == "sglang":
        for path in sorted(sources):
            if path == "sglang/srt/server_args.py" or path.startswith(
                "sglang/srt/arg_groups/fields/"
            ):
                t = tree(path)
                if t is None:
                    continue
                collect_add_argument(t, known)
                classes = {"ServerArgs"} if path.endswith("server_args.py") else None
                collect_dataclass_flags(t, known, classes, annotated_only=True)
    else:
        cli_paths = [p for p in sorted(sources) if re.match(r"vllm/entrypoints/.*cli_args\.py$", p)]
        for path in ["vllm/engine/arg_utils.py", *cli_paths]:
            t = tree(path)
            if t is None:
                continue
            collect_add_argument(t, known)
            classes = {"EngineArgs", "AsyncEngineArgs"} if path.endswith("arg_utils.py") else None
            collect_dataclass_flags(t, known, classes)
        for path in sorted(sources):
            if path.startswith("vllm/config/"):
                t = tree(path)
                if t is None:
                    continue
                for name, _cls, stmt in class_fields(t):
                    flag = "--" + name.replace("_", "-")
                    has_flag = flag in known.flag_field
                    known.add(name, flag if has_flag else None)
                    if has_flag and _annotation_is_bool(stmt.annotation):
                        known.bool_flags.add(flag)
    return known


# ---------------------------------------------------------------------------------------------
# Turning string expressions into templates
# ---------------------------------------------------------------------------------------------


@dataclass
class Interp:
    name: str
    numeric: bool


Part = str | Interp


def _ident(text: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")
    name = re.sub(r"_+", "_", name)[:40].strip("_")
    if not name:
        return "value"
    return "v_" + name if name[0].isdigit() else name


def expr_name(node: ast.AST) -> str:
    """A short identifier for an interpolated expression (``self.max_model_len`` -> that)."""
    if isinstance(node, ast.Name):
        return _ident(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            base = expr_name(node.value)
            return base if base.endswith(("type", "name")) else f"{base}_name"
        return _ident(node.attr)
    if isinstance(node, ast.Call):
        func = node.func
        inner = expr_name(node.args[0]) if node.args else None
        if isinstance(func, ast.Name):
            if func.id == "len" and inner:
                return f"len_{inner}"
            if func.id == "type" and inner:
                return f"{inner}_type"
            return inner or _ident(func.id)
        if isinstance(func, ast.Attribute):
            if func.attr in {"join", "format"} and inner:
                return inner
            return _ident(func.attr.removeprefix("get_"))
        return inner or "value"
    if isinstance(node, ast.Subscript):
        key = _str_const(node.slice)
        if key and key.isidentifier():
            return _ident(key)
        return expr_name(node.value)
    if isinstance(node, ast.IfExp):
        return expr_name(node.body)
    if isinstance(node, ast.BinOp):
        return expr_name(node.left)
    if isinstance(node, ast.UnaryOp):
        return expr_name(node.operand)
    if isinstance(node, ast.Starred):
        return expr_name(node.value)
    return "value"


def name_is_numeric(name: str) -> bool:
    for token in name.lower().split("_"):
        if token in NOT_NUMERIC:
            continue
        if token in NUMERIC_EXACT or token.startswith(NUMERIC_HINTS):
            return True
    return False


def _interp(node: ast.AST, spec_numeric: bool = False, forced: bool = False) -> Part:
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    name = expr_name(node)
    numeric = spec_numeric or forced or name_is_numeric(name)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"int", "float", "round"}:
        numeric = True
    return Interp(name, numeric)


def _spec_numeric(spec: str) -> bool:
    return bool(re.search(r"[dfeEgGn%]$|,", spec))


PCT = re.compile(r"%(?:\((\w+)\))?([-#0 +]*)(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


def percent_parts(fmt: str, args: Sequence[ast.AST]) -> list[Part] | None:
    """``"a %s b %(x)d" % args`` -> parts. ``args`` is the flattened right-hand side."""
    parts: list[Part] = []
    pos = 0
    i = 0
    mapping: dict[str, ast.AST] = {}
    if len(args) == 1 and isinstance(args[0], ast.Dict):
        for k, v in zip(args[0].keys, args[0].values, strict=False):
            key = _str_const(k)
            if key:
                mapping[key] = v
    for m in PCT.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group(5)
        if conv == "%":
            parts.append("%")
            continue
        numeric = conv in "diouxXeEfFgG"
        if m.group(1):
            node = mapping.get(m.group(1))
            parts.append(_interp(node, numeric) if node else Interp(m.group(1), numeric))
            continue
        if i >= len(args):
            return None
        parts.append(_interp(args[i], numeric))
        i += 1
    parts.append(fmt[pos:])
    return parts


def format_parts(fmt: str, args: Sequence[ast.AST], kwargs: Mapping[str, ast.AST]) -> list[Part]:
    """``"a {} b {x:.2f}".format(...)`` -> parts."""
    parts: list[Part] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return [fmt]
    for literal, fname, spec, _conv in parsed:
        parts.append(literal)
        if fname is None:
            continue
        base = re.split(r"[.\[]", fname, maxsplit=1)[0]
        node: ast.AST | None
        if base == "":
            node = args[auto] if auto < len(args) else None
            auto += 1
        elif base.isdigit():
            node = args[int(base)] if int(base) < len(args) else None
        else:
            node = kwargs.get(base)
        numeric = _spec_numeric(spec or "")
        if node is None:
            parts.append(Interp(_ident(fname.split(".")[-1]), numeric))
        else:
            parts.append(_interp(node, numeric))
    return parts


@dataclass
class Scope:
    names: dict[str, ast.AST]


def string_parts(node: ast.AST, scope: Scope, depth: int = 0) -> list[Part] | None:
    """Parts of a string-building expression, or None when it is not one."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        out: list[Part] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                inner = _named_string(value, scope, depth)
                if inner is not None:  # f"{msg} To allow ...": the text msg holds
                    out.extend(inner)
                    continue
                spec = ""
                if isinstance(value.format_spec, ast.JoinedStr):
                    spec = "".join(
                        v.value
                        for v in value.format_spec.values
                        if isinstance(v, ast.Constant) and isinstance(v.value, str)
                    )
                out.append(_interp(value.value, _spec_numeric(spec) and value.conversion == -1))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = string_parts(node.left, scope, depth + 1)
        right = string_parts(node.right, scope, depth + 1)
        if left is None and right is None:
            return None
        return (left or [_interp(node.left)]) + (right or [_interp(node.right)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = _str_const(node.left)
        if fmt is None:
            return None
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return percent_parts(fmt, args)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            fmt = _str_const(node.func.value)
            if fmt is None:
                return None
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            return format_parts(fmt, node.args, kwargs)
        return None
    if isinstance(node, ast.Name) and node.id in scope.names:
        return string_parts(scope.names[node.id], scope, depth + 1)
    return None


def _named_string(value: ast.FormattedValue, scope: Scope, depth: int) -> list[Part] | None:
    """The parts of a message a name holds, interpolated whole (no format, no conversion):
    text with words (``msg = f"User-specified …"``), not a key or a value that a name holds
    on one path only (``key = "sliding_window"``)."""
    if value.conversion != -1 or value.format_spec is not None:
        return None
    if not (isinstance(value.value, ast.Name) and value.value.id in scope.names):
        return None
    parts = string_parts(value.value, scope, depth + 1)
    if parts is None or len(literal_text(parts).split()) < 3:
        return None
    return parts


@dataclass
class Found:
    kind: str
    parts: list[Part]
    source: str


def _single_assignments(body: Iterable[ast.stmt]) -> dict[str, ast.AST]:
    """Names assigned exactly once (and never augmented) in a function or module body."""
    seen: dict[str, list[ast.AST]] = {}
    augmented: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    seen.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is not None:
                seen.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            augmented.add(node.target.id)
        elif isinstance(node, ast.For | ast.With | ast.NamedExpr | ast.comprehension):
            pass
        stack.extend(ast.iter_child_nodes(node))
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and k not in augmented}


def _receiver_is_logger(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    low = name.lower()
    return low.endswith("logger") or low in {"log", "_log", "logging"}


def find_messages(source: str, path: str) -> list[Found]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    module_scope = _single_assignments(tree.body)
    found: list[Found] = []

    def visit(body: Iterable[ast.stmt], names: dict[str, ast.AST]) -> None:
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = {**names, **_single_assignments(node.body)}
                visit(node.body, inner)
                continue
            check(node, Scope(names))
            stack.extend(ast.iter_child_nodes(node))

    def add(kind: str, arg: ast.AST, scope: Scope, extra: Sequence[ast.AST] = ()) -> None:
        parts: list[Part] | None
        fmt = _str_const(arg)
        if extra and fmt is not None:
            parts = percent_parts(fmt, list(extra))
        else:
            parts = string_parts(arg, scope)
        if parts:
            found.append(Found(kind, parts, path))

    def check(node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func = node.exc.func
            kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if kind:
                add(kind, node.exc.args[0], scope)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            add("assert", node.msg, scope)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            attr = node.func.attr
            recv = node.func.value
            if attr in LOG_METHODS and _receiver_is_logger(recv):
                add(LOG_METHODS[attr], node.args[0], scope, node.args[1:])
            elif attr == "exit" and isinstance(recv, ast.Name) and recv.id == "sys":
                add("exit", node.args[0], scope)

    visit(tree.body, module_scope)
    return found


# ---------------------------------------------------------------------------------------------
# Template, regex, fields, advice
# ---------------------------------------------------------------------------------------------


def normalize(parts: list[Part]) -> list[Part]:
    """Merge adjacent literals and adjacent interpolations; strip the outer whitespace."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += part
            else:
                out.append(part)
        elif out and isinstance(out[-1], Interp):
            out[-1] = Interp(out[-1].name, False)
        else:
            out.append(Interp(part.name, part.numeric))
    if out and isinstance(out[0], str):
        out[0] = out[0].lstrip()
    if out and isinstance(out[-1], str):
        out[-1] = out[-1].rstrip()
    out = [p for p in out if p != ""]
    seen: dict[str, int] = {}
    used: set[str] = set()
    for i, part in enumerate(out):
        if isinstance(part, Interp):
            name = part.name
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1 or name in used:
                n = max(seen[name], 2)
                while f"{name}_{n}" in used:
                    n += 1
                name = f"{name}_{n}"
            used.add(name)
            out[i] = Interp(name, part.numeric)
    return out


def literal_text(parts: Sequence[Part]) -> str:
    return "".join(p for p in parts if isinstance(p, str))


def make_template(parts: Sequence[Part]) -> str:
    return "".join(
        p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else "{" + p.name + "}"
        for p in parts
    )


def make_pattern(parts: Sequence[Part]) -> str:
    out: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            out.append(
                "".join(
                    r"\s+" if chunk.isspace() else re.escape(chunk)
                    for chunk in re.split(r"(\s+)", part)
                    if chunk
                )
            )
        elif part.numeric:
            out.append(f"(?P<{part.name}>{NUMERIC_RE})")
        else:
            out.append(f"(?P<{part.name}>{TAIL_RE if i == len(parts) - 1 else TEXT_RE})")
    return "".join(out)


def text_view(parts: Sequence[Part]) -> str:
    """Literal text with each interpolation shown as ``{name}`` (for field and advice search)."""
    return "".join(p if isinstance(p, str) else "{" + p.name + "}" for p in parts)


def mentioned(parts: Sequence[Part], known: Known) -> tuple[list[str], list[str]]:
    """Fields and flags the message names."""
    lit = " ".join(p if isinstance(p, str) else " " for p in parts)
    fields: list[str] = []
    flags: list[str] = []

    def add_field(name: str) -> None:
        if name not in fields:
            fields.append(name)
        flag = known.flag_of(name)
        if flag and flag not in flags:
            flags.append(flag)

    for m in FLAG_IN_TEXT.finditer(lit):
        flag = "--" + m.group(1)
        if flag in known.flag_field:
            add_field(known.flag_field[flag])
            if flag not in flags:  # an alias that the text uses
                flags.append(flag)
        elif "-" in m.group(1) and flag not in flags:
            flags.append(flag)
    for m in QUOTED_SNAKE.finditer(lit):
        add_field(m.group(1))
    for m in SNAKE_WORD.finditer(lit):
        if m.group(1) in known.field_flag:
            add_field(m.group(1))
    for part in parts:
        if isinstance(part, Interp) and "_" in part.name and part.name in known.field_flag:
            add_field(part.name)
    return fields, flags


VERBS: dict[str, str] = {
    "increase": r"increas(?:e|ing)|rais(?:e|ing)|bump(?:ing)?(?:\s+up)?",
    "decrease": r"decreas(?:e|ing)|reduc(?:e|ing)|lower(?:ing)?|shrink(?:ing)?",
    "set": r"set(?:ting)?|specify(?:ing)?|provid(?:e|ing)|configur(?:e|ing)",
    "set_flag": r"use|using|pass(?:ing)?|add(?:ing)?|(?:re)?(?:launch|start)(?:ing)?\s+"
    r"(?:the\s+(?:server|engine)\s+)?with|run(?:ning)?\s+with",
    "enable": r"enabl(?:e|ing)|turn(?:ing)?\s+on",
    "disable": r"disabl(?:e|ing)|turn(?:ing)?\s+off",
    "unset": r"unset(?:ting)?|remov(?:e|ing)|omit(?:ting)?",
}
SIZED = (
    r"(?:use|using|set|setting|try|with|pass|passing)\s+a\s+(smaller|lower|larger|higher|bigger)"
)
#: A command-line flag as engines spell theirs (``--max-model-len``).
FLAG_WORD = r"--[a-z][a-z0-9]*(?:-[a-z0-9]+)*"
REF = rf"[`'\"]?({FLAG_WORD}|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b[`'\"]?"
FILLER = (
    r"(?:the\s+|your\s+)?(?:(?:value|number|size)\s+(?:of|for)\s+)?"
    r"(?:(?:flag|argument|option|parameter)\s+)?"
)
ADVICE_RE = re.compile(
    "|".join(
        [rf"\b{SIZED}\s+{FILLER}{REF}"]
        + [rf"\b(?P<{k}>{v})\s+{FILLER}{REF}" for k, v in VERBS.items()]
    ),
    re.IGNORECASE,
)
BLOCKERS = re.compile(
    r"\b(?:when|if|while|since|because|after|before|is|are|was|were|been|be|not|cannot|"
    r"without|only|unless|whether|once|already|will|would|to|auto|automatically|we|has|have|"
    r"had)\b|n't\b",
    re.IGNORECASE,
)
GREATER = re.compile(
    r"\b(?:larger|greater|more|bigger|higher)\s+than\b|\bexceed(?:s|ed|ing)?\b|>=?|"
    r"\bat\s+least\b|\bno\s+less\s+than\b",
    re.IGNORECASE,
)
LESS = re.compile(
    r"\b(?:smaller|less|fewer|lower)\s+than\b|\bbelow\b|\bnot\s+enough\b|<=?|"
    r"\bat\s+most\b|\bno\s+more\s+than\b",
    re.IGNORECASE,
)


GERUND_TRIGGERS = re.compile(
    r"\b(?:try|consider|or|by|recommend(?:ed)?|suggest(?:ed)?|please|either|avoid\w*|"
    r"requires|need|needs|without|via)\b",
    re.IGNORECASE,
)


REQUIREMENT = re.compile(
    r"\b(?:must|should|to|needs?\s+to|has\s+to|have\s+to)\s+(?:be\s+|not\s+)*"
    r"(?:(?:larger|greater|more|bigger|higher|smaller|less|fewer|lower)\s+than|exceed|below|"
    r"at\s+(?:least|most)|no\s+(?:more|less)\s+than|>|<)",
    re.IGNORECASE,
)


SILENCING = re.compile(
    r"(?i)\bto\s+(?:silence|suppress|hide|mute|disable|avoid)\s+(?:this|these|the)\s+"
    r"(?:warning|message|log)"
)


def _blocked(text: str, start: int, verb: str) -> bool:
    """A verb that describes rather than advises ("when using X", "X is not set").

    A gerund ("increasing X") is advice only after "try", "consider", "or", "by", ...;
    otherwise it usually narrates what the engine itself does ("Setting X to 8 for ...").
    """
    sentence = re.split(r"[.;!?\n]", text[:start])[-1]
    if SILENCING.search(sentence):
        return True  # "To silence this warning, specify X": quiets the message, fixes nothing
    clause = re.split(r"[.;:,!?()\n]", text[:start])[-1]
    clause = re.sub(
        r"\b(?:try|need|needs|want|sure|remember|advised|recommended)\s+to\s*$", "", clause
    )
    words = clause.split()[-3:]
    if BLOCKERS.search(" ".join(words)):
        return True
    if verb.lower().endswith("ing"):
        return not GERUND_TRIGGERS.search(" ".join(words[-2:]))
    return False


VALUE_AFTER = re.compile(r"[`'\"]?(?:\s*\(\s*|\s*=\s*|:\s*|\s+)\{(\w+)\}")
TARGET_AFTER = re.compile(
    r"\s*(?:\([^(){}]{0,40}\)\s*)?"
    r"(?:to\s+(?:at\s+(?:most|least)\s+|(?:more|less|fewer)\s+than\s+|be\s+)?|=\s*|\s+)"
    r"\{(\w+)\}"
)


ALSO_REF = re.compile(
    r"[`'\"]?\s*(?:\(\s*or\s+|or\s+|/\s*|,\s*)[`'\"]?"
    rf"({FLAG_WORD}|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b[`'\"]?\)?"
)


def _resolve_ref(ref: str, known: Known) -> tuple[str | None, str | None]:
    """(field, flag) for a ``--flag`` or ``snake_field`` reference."""
    if ref.startswith("--"):
        name = known.flag_field.get(ref)
        return name, ref if name is not None else None
    return ref, known.flag_of(ref)


def advice_matches(text: str) -> Iterator[tuple[re.Match[str], str, str]]:
    """(match, verb kind, reference) for each advice phrase that is not merely descriptive."""
    for m in ADVICE_RE.finditer(text):
        groups = m.groupdict()
        kind = next((k for k in VERBS if groups.get(k)), None)
        ref = next(g for g in reversed(m.groups()) if g is not None)
        if kind is None:
            kind = "decrease" if m.group(1).lower() in {"smaller", "lower"} else "increase"
        verb = m.group(0).split()[0]
        if not _blocked(text, m.start(), verb):
            yield m, kind, ref


def field_groups(parts: Sequence[Part], known: Known, fields: Sequence[str]) -> dict[str, str]:
    """Interpolation group -> field whose CURRENT value it carries.

    A group named like the field (``{max_model_len}``), or a group right after a mention of the
    field that is not an advice target (``--context-length {context_len}``,
    ``max_num_seqs ({max_num_reqs})``). "use --tp-size {n}" states a suggestion, not the value.
    """
    text = text_view(parts)
    names = {p.name for p in parts if isinstance(p, Interp)}
    out = {name: name for name in names if name in fields}
    advised = [(m.start(), m.end()) for m, _kind, _ref in advice_matches(text)]
    mentions = [*FLAG_IN_TEXT.finditer(text), *SNAKE_WORD.finditer(text)]
    for m in mentions:
        if any(a <= m.start() < b for a, b in advised):
            continue
        name, _flag = _resolve_ref(m.group(0), known)
        if name is None or name not in fields:
            continue
        if re.search(r"\bdraft\b", " ".join(text[: m.start()].split()[-2:]), re.IGNORECASE):
            continue  # "the draft model's max_model_len ({n})" is not the flag's value
        after = VALUE_AFTER.match(text, m.end())
        if after and after.group(1) in names and after.group(1) not in out:
            out[after.group(1)] = name
    return out


def value_from(parts: Sequence[Part], group: str, direction: str) -> str | None:
    """The numeric group that states the limit the advised field's value must respect."""
    index = {p.name: i for i, p in enumerate(parts) if isinstance(p, Interp)}
    if group not in index or direction not in {"increase", "decrease"}:
        return None
    me = index[group]
    best: str | None = None
    for other, j in index.items():
        part = parts[j]
        if other == group or not (isinstance(part, Interp) and part.numeric):
            continue
        lo, hi = sorted((me, j))
        between = parts[lo + 1 : hi]
        if any(isinstance(p, Interp) and p.numeric for p in between):
            continue
        text = literal_text(between)
        if len(text) > 160:
            continue
        greater = bool(GREATER.search(text))
        less = bool(LESS.search(text))
        if greater == less:
            continue
        if REQUIREMENT.search(text):  # "X must be greater than Y" states what X is not
            greater, less = less, greater
        field_is_greater = greater if me < j else less
        if (direction == "decrease" and field_is_greater) or (
            direction == "increase" and not field_is_greater
        ):
            if best is not None:
                return None  # ambiguous: say nothing
            best = other
    return best


def extract_advice(
    parts: Sequence[Part],
    known: Known,
    fields: Sequence[str],
    flags: Sequence[str],
    groups: dict[str, str],
) -> list[dict[str, str]]:
    text = text_view(parts)
    numeric = {p.name for p in parts if isinstance(p, Interp) and p.numeric}
    advice: list[dict[str, str]] = []
    for m, kind, ref in advice_matches(text):
        if kind == "set_flag" and not ref.startswith("--"):
            continue  # "use max_model_len" is too vague; "use --max-model-len" is not
        name, flag = _resolve_ref(ref, known)
        if name is None or flag is None or flag not in flags or name not in fields:
            continue
        direction = kind
        if kind in {"set", "set_flag"}:
            direction = "enable" if flag in known.bool_flags and ref.startswith("--") else "set"
        entry = {"field": name, "flag": flag, "direction": direction}
        target = TARGET_AFTER.match(text, m.end())
        if target and target.group(1) in numeric and direction != "enable":
            entry["value_from"] = target.group(1)  # "lower max_num_seqs to at most {n}"
        elif direction in {"increase", "decrease"}:
            for group in (g for g, f in groups.items() if f == name):
                src = value_from(parts, group, direction)
                if src:
                    entry["value_from"] = src
                    break
        _add_advice(advice, entry)
        if direction in {"increase", "decrease", "disable", "unset"}:
            pos = m.end()
            while more := ALSO_REF.match(text, pos):  # "lower --a or --b", "reduce --a/--b"
                pos = more.end()
                name2, flag2 = _resolve_ref(more.group(1), known)
                if name2 in fields and flag2 in flags and name2 and flag2:
                    _add_advice(advice, {"field": name2, "flag": flag2, "direction": direction})
    for entry in literal_settings(text, known, fields, flags):
        _add_advice(advice, entry)
    return advice


#: A flag written with the value to give it, as a user would type it: ``--dtype=half`` or, in
#: quotes, ``--kv-cache-dtype fp8``. The value is literal text of the message (never a
#: ``{group}``), so the message itself states what to set.
LITERAL_SETTING = re.compile(
    rf"(?<![\w-])({FLAG_WORD})=([A-Za-z0-9_.:+-]*[A-Za-z0-9_])"
    rf"|[`'\"]({FLAG_WORD}) ([A-Za-z0-9_.:+-]*[A-Za-z0-9_])[`'\"]"
)


#: Words that make a written-out setting advice ("use --x=y", "requires --x=y", "for example:
#: --x=y", "re-run with --x=y"); without one it names the setting that failed ("--x=y is only
#: available on ROCm").
SETTING_CUE = re.compile(
    r"\b(?:use|using|set|setting|pass|passing|try|specify|specifying|requires?|required|"
    r"for example|eg|such as|switch(?:ing)? to|(?:re-?)?(?:run|launch|start)\w*(?:\s+\w+){0,3}"
    r"\s+with)\b",
    re.IGNORECASE,
)
NEGATION = re.compile(r"\b(?:not|without|omit\w*|remov\w*|unset\w*|instead of|no longer)\b|n't\b",
                      re.IGNORECASE)  # fmt: skip


def _advised_setting(text: str, start: int) -> bool:
    """Is the setting written at ``start`` advice, by a cue earlier in its own clause?"""
    before = re.sub(r"\be\.g\.", "eg", text[:start], flags=re.IGNORECASE)
    clause = re.split(r"[.;!?\n]", before)[-1]
    cues = list(SETTING_CUE.finditer(clause))
    if not cues:
        return False
    cue = cues[-1]
    if len(clause) - cue.end() > 60 or NEGATION.search(clause[cue.start() :]):
        return False
    offset = len(before) - len(clause)
    return not _blocked(before, offset + cue.start(), cue.group(0).split()[0])


def literal_settings(
    text: str, known: Known, fields: Sequence[str], flags: Sequence[str]
) -> list[dict[str, str]]:
    """``--flag=value`` written out as advice in the message: the engine's own spelling and
    value."""
    out: list[dict[str, str]] = []
    for m in LITERAL_SETTING.finditer(text):
        flag, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        if not _advised_setting(text, m.start()):
            continue
        name, flag_ok = _resolve_ref(flag, known)
        if name is None or flag_ok is None or flag_ok not in flags or name not in fields:
            continue
        if flag_ok in known.bool_flags and value.lower() not in {"false", "true", "0", "1"}:
            continue
        out.append({"field": name, "flag": flag_ok, "direction": "set", "value": value})
    return out


def _add_advice(advice: list[dict[str, str]], entry: dict[str, str]) -> None:
    """Append unless the flag already has this advice; "enable" beats a plain "set"."""
    for i, old in enumerate(advice):
        if old["flag"] != entry["flag"]:
            continue
        if old["direction"] == entry["direction"]:
            if ("value_from" in entry or "value" in entry) and not (
                "value_from" in old or "value" in old
            ):
                advice[i] = entry
            return
        if {old["direction"], entry["direction"]} == {"set", "enable"}:
            if entry["direction"] == "enable":
                advice[i] = entry
            return
    advice.append(entry)


@dataclass
class Message:
    key: str
    template: str
    pattern: str
    kind: str
    fields: list[str]
    flags: list[str]
    value_groups: dict[str, str]
    advice: list[dict[str, str]]
    source: str
    versions: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "template": self.template,
            "pattern": self.pattern,
            "kind": self.kind,
            "fields": self.fields,
            "flags": self.flags,
            "value_groups": dict(sorted(self.value_groups.items())),  # stable across runs
            "advice": self.advice,
            "source": self.source,
            "versions": self.versions,
        }


def build_message(engine: str, found: Found, known: Known, version: str) -> Message | None:
    parts = normalize(found.parts)
    interps = [p for p in parts if isinstance(p, Interp)]
    if len(literal_text(parts).strip()) < MIN_LITERAL_CHARS:
        return None
    if len(parts) == 1 and interps:
        return None
    fields, flags = mentioned(parts, known)
    if not fields and not flags:
        return None
    template = make_template(parts)
    pattern = make_pattern(parts)
    re.compile(pattern)
    groups = field_groups(parts, known, fields)
    value_groups = {
        group: flag for group, name in groups.items() if (flag := known.flag_of(name)) is not None
    }
    advice = extract_advice(parts, known, fields, flags, groups)
    key = f"{engine}:{hashlib.sha1(template.encode()).hexdigest()[:8]}"
    return Message(
        key=key,
        template=template,
        pattern=pattern,
        kind=found.kind,
        fields=fields,
        flags=flags,
        value_groups=value_groups,
        advice=advice,
        source=found.source,
        versions=[version],
    )


# ---------------------------------------------------------------------------------------------
# Wheels
# ---------------------------------------------------------------------------------------------


def download_wheel(engine: str, version: str, wheel_dir: Path) -> Path:
    def existing() -> Path | None:
        hits = sorted(wheel_dir.glob(f"{engine}-{version}-*.whl"))
        return hits[0] if hits else None

    hit = existing()
    if hit:
        return hit
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["-d", str(wheel_dir), f"{engine}=={version}"]
    if subprocess.run(cmd, check=False).returncode != 0 or existing() is None:
        platform = ["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_34_x86_64"]
        cmd += [*platform, "--python-version", "3.12", "--implementation", "cp"]
        subprocess.run(cmd, check=True)
    hit = existing()
    if hit is None:
        raise SystemExit(f"no wheel for {engine}=={version} in {wheel_dir}")
    return hit


def read_sources(wheel: Path, engine: str) -> dict[str, str]:
    sources: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not (name.startswith(f"{engine}/") and name.endswith(".py")):
                continue
            if any(part in "/" + name for part in SKIP_PARTS):
                continue
            if Path(name).name.startswith("test_"):
                continue
            sources[name] = zf.read(name).decode("utf-8", errors="replace")
    return sources


def pick_versions(engine: str, today: dt.date | None = None) -> list[str]:
    """Latest final release and the final release nearest to one year before it (PyPI JSON)."""
    with urllib.request.urlopen(f"https://pypi.org/pypi/{engine}/json", timeout=60) as resp:
        data = json.load(resp)
    dates: dict[str, dt.date] = {}
    for ver, files in data["releases"].items():
        v = Version(ver)
        if v.is_prerelease or v.is_devrelease or not files:
            continue
        dates[ver] = min(dt.date.fromisoformat(f["upload_time"][:10]) for f in files)
    latest = max(dates, key=Version)
    target = dates[latest] - dt.timedelta(days=365)
    older = min(dates, key=lambda v: (abs((dates[v] - target).days), Version(v)))
    return sorted({older, latest}, key=Version)


def mine(engine: str, versions: Sequence[str], wheel_dir: Path) -> dict[str, Any]:
    merged: dict[str, Message] = {}
    stats: dict[str, dict[str, int]] = {}
    for version in versions:
        wheel = download_wheel(engine, version, wheel_dir)
        sources = read_sources(wheel, engine)
        known = collect_known(engine, sources)
        per_version: dict[str, Message] = {}
        for path in sorted(sources):
            for found in find_messages(sources[path], path):
                msg = build_message(engine, found, known, version)
                if msg is None:
                    continue
                prev = per_version.get(msg.key)
                if prev is None:
                    per_version[msg.key] = msg
                else:
                    _merge(prev, msg)
        stats[version] = {
            "files": len(sources),
            "known_fields": len(known.field_flag),
            "known_flags": len(known.flag_field),
            "messages": len(per_version),
            "with_advice": sum(1 for m in per_version.values() if m.advice),
            "with_value_from": sum(
                1 for m in per_version.values() if any("value_from" in a for a in m.advice)
            ),
        }
        for key, msg in per_version.items():
            if key in merged:
                _merge(merged[key], msg)
            else:
                merged[key] = msg
        print(f"{engine} {version}: {stats[version]}", file=sys.stderr)
    return {
        "engine": engine,
        "generated_by": GENERATED_BY,
        "versions": list(versions),
        "stats": stats,
        "messages": [merged[k].as_dict() for k in sorted(merged)],
    }


def _merge(into: Message, other: Message) -> None:
    for name in other.fields:
        if name not in into.fields:
            into.fields.append(name)
    for flag in other.flags:
        if flag not in into.flags:
            into.flags.append(flag)
    for group, flag in other.value_groups.items():
        into.value_groups.setdefault(group, flag)
    for entry in other.advice:
        _add_advice(into.advice, entry)
    for version in other.versions:
        if version not in into.versions:
            into.versions.append(version)
    into.versions.sort(key=Version)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["sglang", "vllm", "all"], default="all")
    parser.add_argument("--versions", help="comma-separated versions (only with one --engine)")
    parser.add_argument("--auto", action="store_true", help="pick versions from PyPI dates")
    parser.add_argument("--wheel-dir", type=Path, default=WHEEL_DIR)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    engines = ["sglang", "vllm"] if args.engine == "all" else [args.engine]
    if args.versions and len(engines) != 1:
        parser.error("--versions needs a single --engine")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for engine in engines:
        if args.versions:
            versions = sorted(args.versions.split(","), key=Version)
        elif args.auto:
            versions = pick_versions(engine)
        else:
            versions = DEFAULT_VERSIONS[engine]
        data = mine(engine, versions, args.wheel_dir)
        out = args.out_dir / f"{engine}.yaml"
        with out.open("w", encoding="utf-8") as fh:
            fh.write(f"# Generated by {GENERATED_BY}; do not edit by hand.\n")
            yaml.safe_dump(data, fh, sort_keys=False, allow_unicode=True, width=100000)
        print(f"wrote {out} ({len(data['messages'])} messages)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
