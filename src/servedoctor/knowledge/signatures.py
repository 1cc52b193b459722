"""Whose log is this? Each engine's own words, mined from its released source.

``scripts/inventory/mine_signatures.py`` reads every message SGLang, vLLM and LMDeploy raise
or log, across their releases, and keeps the runs of words that only that engine prints
(not another engine, not torch, transformers or the other libraries they all run on). A
log excerpt that names no engine but prints such a run is that engine's: a one-line
``The model's max seq len (…) is larger than the maximum number of tokens that can be
stored in KV cache`` is vLLM's, so its changes can be spelled for vLLM. A variable of an
engine's own prefix named in the log (``VLLM_USE_V1``, ``SGLANG_ENABLE_JIT_DEEPGEMM``) counts
as that engine's word too.

Words are compared, not characters: a message wrapped over lines when it was pasted, or
printed with other spacing or punctuation, still reads as the same run of words.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "mined" / "signatures.json"
#: Signatures are looked up by their first words, then compared whole.
KEY_WORDS = 3
_WORD = re.compile(r"[a-z0-9_]+")
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")

Run = tuple[str, ...]


def words_of(text: str) -> list[str]:
    """Lower-cased alphanumeric words, as the signatures were mined."""
    return _WORD.findall(text.lower())


@cache
def _data() -> dict[str, Any]:
    if not DATA.is_file():
        return {}
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    engines: dict[str, Any] = data.get("engines", {})
    return engines


@cache
def _prefixes() -> tuple[tuple[str, str], ...]:
    """(prefix, engine) for each engine's own environment variables."""
    return tuple(
        (str(prefix), str(engine))
        for engine, entry in _data().items()
        for prefix in entry.get("env_prefixes", [])
    )


@dataclass(frozen=True, slots=True)
class Signature:
    engine: str
    run: Run
    first: int  # the first and last of the engine's mined releases that print it
    last: int


@cache
def _index() -> dict[Run, tuple[Signature, ...]]:
    """First words of a signature → the signatures that start with them."""
    index: dict[Run, list[Signature]] = {}
    for engine, entry in _data().items():
        for text, first, last in entry.get("signatures", []):
            run = tuple(str(text).split())
            if len(run) >= KEY_WORDS:
                found = Signature(str(engine), run, int(first), int(last))
                index.setdefault(run[:KEY_WORDS], []).append(found)
    return {key: tuple(found) for key, found in index.items()}


def signatures_in(lines: Iterable[str]) -> set[Signature]:
    """The distinct signatures these lines print (a message wrapped over lines included)."""
    text = "\n".join(lines)
    tokens = words_of(text)
    index = _index()
    seen: set[Signature] = set()
    for name in set(_VARIABLE.findall(text)):
        for prefix, engine in _prefixes():
            if name.startswith(prefix):
                newest = len(_data()[engine].get("releases", [])) - 1
                seen.add(Signature(engine, (name.lower(),), 0, newest))
    for i in range(len(tokens) - KEY_WORDS + 1):
        for signature in index.get(tuple(tokens[i : i + KEY_WORDS]), ()):
            if tuple(tokens[i : i + len(signature.run)]) == signature.run:
                seen.add(signature)
    return seen


def engines_in(lines: Iterable[str]) -> Counter[str]:
    """How many distinct signatures of each engine these lines print."""
    return Counter(s.engine for s in signatures_in(lines))


def engine_of_text(lines: Iterable[str]) -> str | None:
    """The engine whose own messages these lines print most, if one prints more than any."""
    ranked = engines_in(lines).most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def release_range(lines: Iterable[str], engine: str) -> tuple[str, str] | None:
    """The oldest and newest of ``engine``'s mined releases that print every one of its
    messages these lines print, when the newest is older than its newest release (a message
    later releases dropped or reworded); None when the lines say nothing of the release, or
    disagree."""
    releases = _data().get(engine, {}).get("releases", [])
    mine = [s for s in signatures_in(lines) if s.engine == engine]
    if not mine or not releases:
        return None
    first, last = max(s.first for s in mine), min(s.last for s in mine)
    if first > last or last >= len(releases) - 1:
        return None
    return str(releases[first]), str(releases[last])


def release_bound(lines: Iterable[str], engine: str) -> str | None:
    """The newest release that prints these lines (``release_range``'s upper end)."""
    found = release_range(lines, engine)
    return found[1] if found else None
