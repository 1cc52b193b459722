"""Keep transcribing a server's log after servedoctor leaves (``--keep-running``).

``python -m servedoctor.launch.relay RAW LOG OFFSET PGID`` follows the server's private raw
log (``logtail.py``) from OFFSET, where the supervisor's transcript stopped, and appends it,
secrets masked, to LOG. When no process of the group PGID is left it writes the last line,
and deletes the raw file once everything in it is in LOG.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from servedoctor.launch.logtail import LogTail, TailLine

_POLL_S = 0.2


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def relay(raw: Path, log: Path, offset: int, pgid: int) -> None:
    lines: queue.Queue[Sequence[TailLine]] = queue.Queue()
    tail = LogTail(raw, log, lines, offset=offset)
    tail.start()
    while _group_alive(pgid) and tail.error is None:
        time.sleep(_POLL_S)
        while not lines.empty():
            lines.get_nowait()  # nobody parses: the lines are only written
    tail.finish(lambda batch: None)


if __name__ == "__main__":
    raw, log, offset, pgid = sys.argv[1:5]
    relay(Path(raw), Path(log), int(offset), int(pgid))
