"""A variable the failing code read: the value came from the environment, not the server's
flags. A ``ValueError`` raised where the innermost frame parses ``os.getenv('VLLM_PORT')``
(Kubernetes sets ``VLLM_PORT=tcp://10.0.0.1:8000`` for a Service named ``vllm``) is fixed by
unsetting or correcting that variable, whatever the engine and whatever the variable.
"""

from __future__ import annotations

import re

from servedoctor.logs.model import Frame
from servedoctor.model import REMOVE, Change, Hypothesis

#: Confidence of "the variable the failing line read": a fact from the frame, above the
#: class fallbacks and the raising package's release.
ENV_READ_CONFIDENCE = 0.5

#: Exceptions a parse of a text value raises (``int('tcp://…')``, a bool of 'yes please').
PARSE_ERRORS = frozenset({"ValueError", "TypeError"})

_READ = re.compile(
    r"""\b(?:getenv|environ\.get|environ\.setdefault)\(\s*['"](?P<call>[A-Za-z_][A-Za-z0-9_]{2,})['"]"""
    r"""|\benviron\[\s*['"](?P<item>[A-Za-z_][A-Za-z0-9_]{2,})['"]\s*\]"""
)


def variable_read(frame: Frame) -> str | None:
    """The environment variable the frame's code line reads, if it reads one."""
    m = _READ.search(frame.code)
    return (m.group("call") or m.group("item")) if m else None


def env_read_hypotheses(
    frames: tuple[Frame, ...], *, exc_type: str | None, message: str = ""
) -> list[Hypothesis]:
    """Unset the variable whose value the raising line could not parse."""
    if not frames or str(exc_type or "").rsplit(".", 1)[-1] not in PARSE_ERRORS:
        return []
    variable = variable_read(frames[-1])
    if variable is None:
        return []
    shown = f" (the message shows {message.strip()[:80]!r})" if message.strip() else ""
    return [
        Hypothesis(
            id="ENVREAD.1",
            cause=f"The environment sets {variable} to a value the server cannot parse{shown}: "
            "an orchestrator or a shell profile set it for something else.",
            confidence=ENV_READ_CONFIDENCE,
            changes=(Change(kind="env", name=variable, value=REMOVE),),
            why=f"{exc_type} raised where {frames[-1].func} reads {variable} from the environment",
            references=("https://docs.python.org/3/library/os.html#os.getenv",),
            rule=None,
        )
    ]
