"""Keep writing a server's output to its log after servedoctor leaves (``--keep-running``).

``python -m servedoctor.launch.relay LOG`` reads its stdin (the server's output pipe, handed
over by the supervisor) and appends it, secrets masked, to LOG until the server closes it.
"""

from __future__ import annotations

import os
import sys

from servedoctor.launch.rundir import LineSplitter, redact_bytes


def relay(fd: int, log_path: str) -> None:
    split = LineSplitter()
    with open(log_path, "ab") as log:
        while True:
            try:
                data = os.read(fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
            log.write(b"".join(redact_bytes(p) for p in split.feed(data)))
            log.flush()
        log.write(b"".join(redact_bytes(p) for p in split.flush()))


if __name__ == "__main__":
    relay(sys.stdin.fileno(), sys.argv[1])
