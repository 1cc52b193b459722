"""Read llama-server's options from llama.cpp's ``common/arg.cpp`` (a static read of the C++).

llama.cpp declares every option of every tool in one place::

    add_opt(common_arg(
        {"-c", "--ctx-size"}, "N",
        string_format("size of the prompt context (default: %d)", params.n_ctx),
        [](common_params & params, int value) { params.n_ctx = value; }
    ).set_examples({LLAMA_EXAMPLE_COMMON, LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_CTX_SIZE"));

The option strings, the value hint, the handler's parameter type, the examples (tools) it is
offered to and its environment variable are all literal, so a small tokenizer reads them
without compiling anything. An option whose handler calls ``arg_removed("use --x")`` is a
removed option: the parser still knows it only to refuse it, so it is returned with
``removed`` set and the spelling the message points to as its replacement.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

#: the tool whose options are read; options tagged only for other tools are left out
SERVER_EXAMPLE = "LLAMA_EXAMPLE_SERVER"
COMMON_EXAMPLE = "LLAMA_EXAMPLE_COMMON"

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: a flag named in prose; not a pattern of flags (``--spec-ngram-*-size-n``)
_FLAG = re.compile(r"(?<![\w*-])(--?[A-Za-z][\w-]*\w)(?![\w*-])")


@dataclass
class CppOption:
    """One ``common_arg`` as the source declares it."""

    names: list[str]
    negated: list[str] = field(default_factory=list)
    value_hint: str | None = None
    help: str = ""
    type: str = "bool"
    examples: list[str] = field(default_factory=lambda: [COMMON_EXAMPLE])
    excludes: list[str] = field(default_factory=list)
    env: str | None = None
    removed: bool = False
    replacement: str | None = None

    @property
    def for_server(self) -> bool:
        offered = SERVER_EXAMPLE in self.examples or COMMON_EXAMPLE in self.examples
        return offered and SERVER_EXAMPLE not in self.excludes


def _code(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """Each character of C++ code from ``start`` with its index, string and character
    literals and line comments skipped."""
    i = start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            m = _STRING.match(text, i)
            i = m.end() if m else i + 1
        elif ch == "'":
            end = text.find("'", i + 2 if text[i + 1 : i + 2] == "\\" else i + 1)
            i = (end + 1) if end > 0 else i + 1
        elif text.startswith("//", i):
            nl = text.find("\n", i)
            i = nl if nl > 0 else len(text)
        else:
            yield i, ch
            i += 1


def _closing(text: str, start: int) -> int:
    """Index of the bracket that closes the one at ``start``."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    for i, ch in _code(text, start):
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
    raise ValueError(f"unbalanced bracket at {start}")


def _split_top(text: str) -> list[str]:
    """Split a call's arguments at its top-level commas."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in _code(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _strings(text: str) -> list[str]:
    return [m.group(1) for m in _STRING.finditer(text)]


def _literal(expr: str) -> str:
    """The text of a string argument: adjacent literals joined; a ``string_format`` call's
    format string; anything else computed at run time gives ''."""
    expr = expr.strip()
    if expr.startswith('"'):
        return "".join(_strings(expr))
    if expr.startswith(("string_format(", "std::string(")):
        open_at = expr.index("(")
        first = _split_top(expr[open_at + 1 : _closing(expr, open_at)])
        return "".join(_strings(first[0])) if first else ""
    return ""


def _handler_type(handler: str) -> str:
    params = re.match(r"\[[^\]]*\]\s*\(([^)]*)\)", handler)
    if params is None:
        return "str"
    args = params.group(1)
    if re.search(r"\bint\s+\w+\s*$", args):
        return "int"
    if re.search(r"\bbool\s+\w+\s*$", args):
        return "bool"
    if "," not in args:
        return "bool"  # (common_params & params): a switch
    return "str"


def choices(hint: str | None) -> list[str] | None:
    """``[on|off|auto]``, ``{none,layer,row}``, ``<0|1>`` → their words; other hints → None."""
    if not hint or "..." in hint or "=" in hint:
        return None
    body = hint.strip()
    if body[:1] in "[{<" and body[-1:] in "]}>":
        body = body[1:-1]
    elif "|" not in body:
        return None
    words = [w.strip() for w in re.split(r"[|,]", body)]
    if len(words) < 2 or not all(re.fullmatch(r"[\w.+-]+", w) for w in words):
        return None
    return words


def _chain(text: str) -> dict[str, list[str]]:
    """The ``.set_examples({...}).set_env("X")`` calls after a ``common_arg(...)``."""
    calls: dict[str, list[str]] = {}
    for m in re.finditer(r"\.(set_\w+)\s*\(", text):
        open_at = m.end() - 1
        args = text[open_at + 1 : _closing(text, open_at)]
        calls[m.group(1)] = re.findall(r"LLAMA_EXAMPLE_\w+", args) or _strings(args) or [""]
    return calls


def _option(args: list[str], chain: dict[str, list[str]]) -> CppOption | None:
    if not args or not args[0].startswith("{"):
        return None
    names = _strings(args[0])
    if not names:
        return None
    handler = args[-1]
    opt = CppOption(names=names)
    middle = args[1:-1]
    if middle and middle[0].startswith("{"):  # {"--mmap"}, {"--no-mmap"}: a negatable switch
        opt.negated = _strings(middle[0])
        middle = middle[1:]
    elif len(middle) >= 2:  # a value hint (two for a two-value option) before the help
        opt.value_hint = _literal(middle[0]) or None
        middle = middle[-1:]
        opt.type = _handler_type(handler)
        if opt.type == "bool":
            opt.type = "str"
    opt.help = " ".join(_literal(middle[0]).replace("\\n", " ").split()) if middle else ""
    if "set_examples" in chain:
        opt.examples = chain["set_examples"]
    opt.excludes = chain.get("set_excludes", [])
    env = chain.get("set_env")
    opt.env = env[0] if env and env[0] else None
    removed = re.search(r"arg_removed\s*\(", handler)
    if removed is not None:
        opt.removed = True
        note = " ".join(_strings(handler[removed.end() :]))
        flag = _FLAG.search(note)
        opt.replacement = flag.group(1) if flag else None
    if "set_preset_only" in chain:
        return None
    return opt


def read_options(source: str) -> list[CppOption]:
    """Every ``add_opt(common_arg(...)...)`` in ``arg.cpp``, in the order declared."""
    out: list[CppOption] = []
    for m in re.finditer(r"\badd_opt\s*\(\s*common_arg\s*\(", source):
        outer = source.index("(", m.start())
        inner = m.end() - 1
        try:
            outer_end = _closing(source, outer)
            inner_end = _closing(source, inner)
        except ValueError:
            continue
        args = _split_top(source[inner + 1 : inner_end])
        opt = _option(args, _chain(source[inner_end + 1 : outer_end]))
        if opt is not None:
            out.append(opt)
    return out


def server_options(source: str) -> list[CppOption]:
    """The options llama-server accepts (or refuses by name, for removed ones)."""
    return [o for o in read_options(source) if o.for_server]
