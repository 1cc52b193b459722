"""Python tracebacks, thread dumps and C++ backtraces being assembled line by line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servedoctor.logs.model import Event, Frame

TB_HEAD = re.compile(r"Traceback \(most recent call last\)")
#: ``File "...", line N, in f``; better-exceptions and loguru mark the frame that raised
#: with a leading ``>`` or ``→``. A frame of a module being compiled (a ``SyntaxError``, an
#: annotation evaluated at import) has no function: ``File "...", line N`` alone.
FRAME = re.compile(
    r'^\s*(?:[>→]\s*)?File "(?P<file>[^"]+)", line (?P<line>\d+)'
    r"(?:(?:, in | in )(?P<func>\S+)|\s*$)"
)
#: A frame wrapped after its file (narrow terminals, docker's log viewer): ``File "x.py",``
#: then ``line N, in f`` on the next line.
FRAME_HEAD = re.compile(r'^\s*(?:[>→]\s*)?File "(?P<file>[^"]+)",\s*$')
FRAME_TAIL = re.compile(r"^\s*line (?P<line>\d+), in (?P<func>\S+)\s*$")
#: Native frames that report a crash rather than cause it: libc's abort and signal raising,
#: a debugger's wait, a library's own backtrace printer and abort helper, unknown frames.
ABORT_MACHINERY = re.compile(
    r"^(?:\?\?|wait4|waitpid|__\w*wait\w*|raise|abort|gsignal|__GI_\w+|__pthread_kill\w*|"
    r"pthread_kill|__restore_rt|\w*print_backtrace\w*|\w+_abort|std::terminate|__cxa_\w+|"
    r"__gnu_cxx::\w+)(?!\w)"
)
BOX_FRAME = re.compile(r"│\s*(?P<file>[^\s│]+?):(?P<line>\d+) in (?P<func>[\w<>.]+)")
PYSPY_FRAME = re.compile(r"^\s{2,}(?P<func>[\w<>.]+) \((?P<file>[^()\s:]+):(?P<line>\d+)\)\s*$")
#: C++ frames: c10's ``frame #N: f``, glibc's ``N 0x... f``, gdb's ``#N  0x... in f (...)``.
NATIVE_FRAME = re.compile(
    r"^\s*(?:frame #\d+: |\d+\s+0x[0-9a-f]{6,} |#\d+\s+(?:0x[0-9a-f]+ in )?(?=[A-Za-z_:~]|\?\? ))"
    r"(?P<func>.+)$"
)
THREAD_HEAD = re.compile(
    r"^(?:Thread 0x[0-9a-f]+ \(most recent call first\)"
    r"|Thread(?: \d+| 0x[0-9a-fA-F]+)? \((?:active|idle)[^)]*\)|Current thread 0x)"
)
CHAIN = re.compile(
    r"During handling of the above exception|The above exception was the direct cause"
)
EXC = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*\w*(?:Error|Exception|Interrupt|Exit|Failure|"
    r"Resources|Warning|Abort)|KeyError|StopIteration|AssertionError|NotImplementedError|"
    r"(?:[A-Za-z_][\w]*\.)+[A-Z]\w+)(?::\s?(?P<msg>.*))?$"
)
EXC_STANDALONE = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*\w*(?:Error|Exception)):\s?(?P<msg>.+)$"
)
KERNEL_ASSERT = re.compile(
    r"(?P<file>[^\s:]+\.(?:cu|cuh|cpp|h|hpp|py)):(?P<line>\d+): (?P<kernel>[^:]+?):"
    r"(?: block: \[[\d,\s]+\], thread: \[[\d,\s]+\])? "
    r"Assertion [`'](?P<cond>.+?)['`]?(?: failed\.?)?$"
)


@dataclass
class OpenTraceback:
    start: int
    rank: str | None
    header: bool
    chained: bool
    frames: list[Frame] = field(default_factory=list)
    exc_type: str | None = None
    message: list[str] = field(default_factory=list)
    exc_line: int = 0
    last: int = 0
    boxed: bool = False
    stack: bool = False
    native: bool = False
    header_text: str = ""

    def _innermost(self) -> Frame:
        """Stacks print the innermost frame first; tracebacks print it last. A native stack's
        innermost frames that only report the crash (the abort, the printer of the backtrace,
        the debugger's wait) are passed over: the crash is where they were called from."""
        if not self.stack:
            return self.frames[-1]
        if self.native:
            for frame in self.frames:
                if not ABORT_MACHINERY.match(frame.func):
                    return frame
        return self.frames[0]

    def event(self) -> Event:
        text = (
            f"{self.exc_type}: {self.message[0]}"
            if self.exc_type and self.message
            else (self.exc_type or (self._innermost().func if self.frames else "traceback"))
        )
        return Event(
            kind="stack" if self.stack else "traceback",
            line=self.start,
            end_line=self.last,
            text=text,
            rank=self.rank,
            frames=tuple(reversed(self.frames)) if self.stack else tuple(self.frames),
            fields={
                "exc_type": self.exc_type,
                "message": "\n".join(self.message),
                "exc_line": self.exc_line or None,
                "truncated": not self.header,
                "chained": self.chained,
                "header": self.header_text,
            },
        )


MAX_MESSAGE_LINES = 8
MAX_FRAMES = 400
