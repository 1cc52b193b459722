"""Does a proposed change match the fix a public thread confirmed? (``eval``'s fix@3)

A flag or variable matches by name (``_``/``-`` alike) or by meaning: both spell the same
knob for the case's engine (``--disable-cuda-graph`` on an old SGLang and
``--cuda-graph-backend-decode disabled`` on the current one). A confirmed value that is a
word (a backend, a dtype) must match too; a number, a path or a network interface need not
(the thread's number, folder or interface suits its machine, ours the user's). A package
matches by its normalised name, an import name by the distribution that owns it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

from servedoctor.engines.adapter import knobs_of, meanings_of
from servedoctor.engines.inventory import inventory
from servedoctor.knowledge.facts import distribution_of_module
from servedoctor.model import REMOVE, Change


def _norm_package(name: str) -> str:
    """PyPI's normalised name; an import name maps to its distribution (flashinfer → -python)."""
    plain = canonicalize_name(name).split("[")[0].strip()
    owner = distribution_of_module(plain.replace("-", "_"))
    return canonicalize_name(owner) if owner else plain


def _canonical_flag(name: str, engine: str | None) -> str:
    inv = inventory(engine) if engine else None
    flag = inv.newest(name) if inv is not None else None
    if flag is not None:
        return flag.name
    return "--" + name.lstrip("-").replace("_", "-").lower()


#: Words engines accept as the same value (vLLM's and SGLang's dtype choices: half = float16;
#: a switch's false/off/no = 0, true/on/yes = 1).
_SAME_VALUE = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32",
               "fp32": "float32", "false": "0", "off": "0", "no": "0", "true": "1", "on": "1",
               "yes": "1"}  # fmt: skip


def _value_word(value: object) -> str:
    word = str(value).strip().lower()
    if word in ("remove", "removed", "drop", "<remove>") or re.match(r"unset\b", word):
        return REMOVE  # a thread's "remove the flag" or "unset the variable" in its own words
    return _SAME_VALUE.get(word, word)


def _is_number(value: str) -> bool:
    return re.fullmatch(r"[-+]?\d[\d_,]*(?:\.\d+)?", value.strip()) is not None


def _is_path(value: str) -> bool:
    """A filesystem path or a search path (``/tmp/triton``, ``/opt/lib:$LD_LIBRARY_PATH``,
    ``build/bin:$LD_LIBRARY_PATH``: folders put before the variable's own)."""
    return (
        re.match(r"^\s*(?:/|~/|\$\{?\w+\}?/|<[^>]*>/?)", value) is not None
        or re.search(r"^[^\s:]+(?::[^\s:]+)*:\$\{?\w+\}?\s*$", value) is not None
    )


#: Linux network interface names (eth0, enp73s0, ens5, ib0, bond0, eno1, wlp2s0)
_INTERFACE = re.compile(r"^(?:eth|en[ops]?|ens|eno|enx|ib|bond|wl[ops]?|br|em|p\d+p)\w*$")


def _is_interface(value: str) -> bool:
    return _INTERFACE.match(value.strip()) is not None


def same_fix(change: Change, fix: Mapping[str, Any], engine: str | None) -> bool:
    kind, name = fix.get("kind"), str(fix.get("name") or "")
    value = fix.get("value")
    if not name or kind not in ("flag", "env", "package"):
        return False
    if kind == "package":
        return change.kind == "package" and _norm_package(change.name) == _norm_package(name)
    same_name = change.kind == kind and (
        _canonical_flag(change.name, engine) == _canonical_flag(name, engine)
        if kind == "flag"
        else change.name == name
    )
    if same_name:
        if value is None or change.value is None or _is_number(str(value)):
            return True
        if _is_path(str(value)) and _is_path(change.value):
            return True  # a folder or file on the thread's machine; ours names one on the user's
        if _is_interface(str(value)) and _is_interface(change.value):
            return True  # likewise a network interface
        if _value_word(change.value) == _value_word(value):
            return True
        # two releases' words for one choice (TRITON_ATTN_VLLM_V1 in 0.10, TRITON_ATTN in 0.11)
        return bool(
            meanings_of(change.name, change.value, engine) & meanings_of(name, str(value), engine)
        )
    shared = knobs_of(change.name, engine) & knobs_of(name, engine)
    return bool(shared)
