"""The effective configuration a server prints at startup, as a dict.

Understands SGLang's ``server_args=ServerArgs(...)`` repr and newer ``server_args={...}``,
vLLM's ``non-default args: {...}``, ``Initializing a V1 LLM engine (vX) with config:
k=v, ...`` and ``AsyncEngineArgs(...)`` (printed by servers that embed vLLM). Values are
Python literals where they can be read safely (``ast.literal_eval``, never ``eval``);
anything else (``torch.bfloat16``, ``<object at 0x..>``, enum reprs) is kept as its source
text. Truncated or odd lines fall back to a tolerant splitter.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

__all__ = ["parse_effective_config", "parse_kv_text"]

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"server_args=ServerArgs\((?P<body>.*)\)?\s*$"), "call"),
    (re.compile(r"server_args=(?P<body>\{.*\}?)\s*$"), "dict"),
    (re.compile(r"non-default args: (?P<body>\{.*\}?)\s*$"), "dict"),
    (re.compile(r"Initializing a V1 LLM engine \(v\S+\) with config: (?P<body>.*)$"), "kv"),
    (re.compile(r"Initializing an LLM engine \(v\S+\) with config: (?P<body>.*)$"), "kv"),
    # vLLM's settings class printed whole by a server that embeds it (Ray Serve, Dynamo)
    (re.compile(r"\b(?:Async)?EngineArgs\((?P<body>\w+=.*)\)?\s*$"), "call"),
)
_OPEN, _CLOSE = "([{", ")]}"


def parse_effective_config(line_text: str) -> dict[str, Any] | None:
    """The config dict a config-dump line carries, or ``None`` if it is not one."""
    for regex, kind in _PATTERNS:
        m = regex.search(line_text)
        if not m:
            continue
        body = m.group("body").rstrip()
        if kind == "call":
            return _parse_call(body)
        if kind == "dict":
            return _parse_dict(body)
        return parse_kv_text(body)
    return None


def _parse_call(body: str) -> dict[str, Any]:
    text = body if body.endswith(")") else body + ")"
    try:
        node = ast.parse("ServerArgs(" + text, mode="eval").body
    except SyntaxError:
        return parse_kv_text(body.removesuffix(")"))
    if not isinstance(node, ast.Call):
        return parse_kv_text(body)
    return {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg is not None}


def _parse_dict(body: str) -> dict[str, Any]:
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(body)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    inner = body.strip()
    inner = inner[1:] if inner.startswith("{") else inner
    inner = inner[:-1] if inner.endswith("}") else inner
    out: dict[str, Any] = {}
    for part in _split_top(inner):
        key, sep, raw = part.partition(":")
        if sep:
            out[_literal(key.strip()) if key.strip() else key] = _literal(raw.strip())
    return {str(k): v for k, v in out.items()}


def parse_kv_text(body: str) -> dict[str, Any]:
    """``a=1, b='x', c={...}`` → dict, splitting only at top-level commas."""
    out: dict[str, Any] = {}
    for part in _split_top(body):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if sep and re.fullmatch(r"[A-Za-z_][\w.]*", key):
            out[key] = _literal(raw.strip())
    return out


def _value(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.unparse(node)


def _literal(raw: str) -> Any:
    if raw in {"true", "false"}:
        return raw == "true"
    if raw == "null":
        return None
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and quotes; unbalanced input is tolerated."""
    parts: list[str] = []
    depth, quote, start, escaped = 0, "", 0, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _OPEN or ch == "<":
            depth += 1
        elif ch in _CLOSE or ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]
