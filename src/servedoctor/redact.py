"""Keep secrets on the machine: tokens and keys are masked before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"

#: Flag or variable names whose value is a secret.
_SECRET_NAME = re.compile(
    r"(?i)(api[-_]?key|token|secret|passw(or)?d|credential|auth|access[-_]?key|private[-_]?key)"
)
#: Secret-looking values wherever they appear (HF, OpenAI, GitHub, AWS, Bearer headers).
_SECRET_VALUE = re.compile(
    r"""(?x)(
        hf_[A-Za-z0-9]{20,}
      | sk-[A-Za-z0-9_-]{16,}
      | gh[pousr]_[A-Za-z0-9]{20,}
      | AKIA[0-9A-Z]{16}
      | (?<=Bearer\s)[A-Za-z0-9._~+/-]{8,}=*
    )"""
)


def is_secret_name(name: str) -> bool:
    bare = name.lstrip("-")
    return bool(_SECRET_NAME.search(bare)) and not bare.lower().endswith(("_tokens", "-tokens"))


def redact_text(text: str) -> str:
    """Mask secret-looking values and ``NAME=value`` pairs whose name says secret."""
    text = _SECRET_VALUE.sub(MASK, text)

    def _pair(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}{MASK}" if is_secret_name(m.group(1)) else m.group(0)

    return re.sub(r"([A-Za-z_][A-Za-z0-9_.-]*)(=)(\S+)", _pair, text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Mask the value after a secret flag (``--api-key X`` or ``--api-key=X``)."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name, _, _value = arg.partition("=")
            out.append(f"{name}={MASK}" if is_secret_name(name) else redact_text(arg))
            continue
        if arg.startswith("-") and is_secret_name(arg):
            mask_next = True
        out.append(redact_text(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else redact_text(v)) for k, v in env.items()}


def redact_lines(lines: Iterable[str]) -> list[str]:
    return [redact_text(line) for line in lines]
