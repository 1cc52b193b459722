"""How a run is stopped from outside: SIGINT, SIGTERM, SIGHUP and a closed output pipe."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType


def output_closed(fds: Sequence[int] = (1, 2)) -> bool:
    """Whether stdout or stderr is a pipe whose reader has gone (the next write fails)."""
    poller = select.poll()
    for fd in fds:
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                poller.register(fd, 0)  # errors are reported whatever the mask
    return any(event & select.POLLERR for _, event in poller.poll(0))


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP end the run like Ctrl-C; while :meth:`held`, they wait."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.count = 0  # signals received
        self.last: int | None = None  # the last signal received
        self._holding = False
        self._pending = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.last = signum
        if self._holding:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread can handle signals
            return
        previous = {sig: signal.signal(sig, self._handler) for sig in self.SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def held(self, *, reraise: bool = True) -> Iterator[None]:
        """Signals arriving inside wait until the end (``reraise``) or are only counted."""
        self._holding, self._pending = True, False
        try:
            yield
        finally:
            self._holding = False
        if self._pending and reraise:
            raise KeyboardInterrupt

    def hurry(self) -> Callable[[], bool]:
        """True once a further signal arrives (a second Ctrl-C: skip the grace period)."""
        seen = self.count
        return lambda: self.count > seen
