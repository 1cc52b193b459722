"""Keep secrets on the machine: tokens, keys and passwords are masked before anything is written.

Three things are masked wherever they appear (argv, environment, server log, store URLs):

* the password of a URL: ``scheme://user:pw@host`` → ``scheme://user:***@host``;
* the value of a field whose *name* says secret, in every spelling a log or a command uses:
  ``--api-key x``, ``--api-key=x``, ``HF_TOKEN=x``, ``api_key='x'``, ``'api_key': 'x'``,
  ``"token": "x"``, ``password: x``, ``Authorization: Bearer x``;
* values shaped like a known token (Hugging Face, OpenAI, GitHub, AWS, a Bearer header).

A name is secret when one of its words (snake, kebab or camel segments) is a secret word:
``hf_token`` and ``apiKey`` are, ``tokenizer_path``, ``max_tokens`` and ``token_usage`` are not.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"

#: Words that make a name secret wherever they stand in it (as whole segments).
#: (``pgpassword`` is PostgreSQL's ``PGPASSWORD``, one word.)
_SECRET_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "pgpassword",
        "credential",
        "credentials",
        "authorization",
        "apikey",
    }
)
#: Adjacent segment pairs that make a name secret (``OPENAI_API_KEY``, ``--private-key``).
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
#: Words that are secret only as the last segment: ``hf_token``, ``auth`` — but not
#: ``token_usage``, ``tokens``, ``tokenizer``.
_SECRET_LAST = frozenset({"token", "auth"})
#: ``<word>_token`` names a vocabulary entry (``eos_token='</s>'``) or counts tokens
#: (SGLang's ``#new-token: 15, #cached-token: 0``), not a credential.
_VOCABULARY = frozenset(
    {"bos", "eos", "pad", "unk", "sep", "cls", "mask", "stop", "special"}
    | {"new", "cached", "num", "max", "total", "input", "output", "prompt", "completion"}
    | {"generated", "first", "next", "per", "last"}
)

#: One segment of a name: ``HFToken`` → ``HF``, ``Token``; ``api_key`` → ``api``, ``key``.
_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

#: ``scheme://user:password@`` — the password runs to the last ``@`` of the authority.
_URL_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'\"]*):[^\s/?#'\"]*@")

#: A field's name and separator, its value captured by a lookahead (so a name that is not
#: secret consumes only itself, and a URL or a field after it is still looked at):
#: ``--flag value`` | [quote]name[quote] ``=`` or ``:`` value.
_FIELD = re.compile(
    r"""(?x)
    (?: (?P<flag>--?[A-Za-z][\w.-]*)\s+(?!-)
      | (?P<q>['"]?)(?P<name>-{0,2}[A-Za-z_][\w.-]*)(?P=q)\s*[:=]\s* )
    (?= (?P<quoted>'[^']*(?:'|$)|"[^"]*(?:"|$))                  # 'x' or "x" (to the end if open)
      | (?P<scheme>(?i:Basic|Bearer|Token|Digest)\s+)?           # Authorization: Basic x
        (?P<bare>[^\s&,;'"()\[\]{}<>]+) )                        # x, up to a delimiter
    """
)
#: Bare values that say "no secret given" and are kept.
_NO_VALUE = frozenset({"None", "null"})

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
    """Whether a flag, variable or key named ``name`` holds a secret."""
    words = [w.lower() for w in _SEGMENT.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)):
        return True
    if not words or words[-1] not in _SECRET_LAST:
        return False
    return len(words) == 1 or words[-2] not in _VOCABULARY


def redact_url(url: str) -> str:
    """A URL fit to print (a ``--store`` URL in headers and errors): its password masked."""
    return redact_text(url)


def _mask_fields(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _FIELD.finditer(text):
        name = m["flag"] or m["name"]
        if m.start() < pos or not is_secret_name(name) or m["bare"] in _NO_VALUE:
            continue
        if m["quoted"]:
            value, quote = m["quoted"], m["quoted"][0]
            masked = quote + MASK + (quote if len(value) > 1 and value.endswith(quote) else "")
        else:
            value = (m["scheme"] or "") + m["bare"]
            masked = (m["scheme"] or "") + MASK
        out += [text[pos : m.end()], masked]
        pos = m.end() + len(value)
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """Mask URL passwords, secret-named fields and secret-looking values in free text."""
    text = _URL_USERINFO.sub(rf"\g<head>:{MASK}@", text)
    text = _SECRET_VALUE.sub(MASK, text)
    return _mask_fields(text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Mask the value after a secret flag (``--api-key X`` or ``--api-key=X``), and any
    secret inside the other arguments."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next and not arg.startswith("--"):  # not when the value is missing
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
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
