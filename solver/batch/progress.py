"""The batch's progress line: trials done / failed / left, elapsed time and an estimate of the
time left (the mean wall time per finished trial so far, times the trials left, over the workers
already in parallel, which the rate of finished trials measures as it is)."""

from __future__ import annotations

import sys
import time


def clock(seconds: float) -> str:
    seconds = int(round(max(seconds, 0)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """`update(done, failed)` after each finished trial; `close()` at the end. On a terminal the
    line redraws in place; otherwise (a log file) a line is written at most every `interval` s."""

    def __init__(self, total: int, skipped: int = 0, stream=None, width: int = 24, interval: float = 5.0,
                 enabled: bool = True):
        self.total, self.skipped = total, skipped
        self.stream = stream if stream is not None else sys.stderr
        self.width, self.interval, self.enabled = width, interval, enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.done = self.failed = 0
        self._last = -float("inf")

    def line(self) -> str:
        finished = self.done + self.failed
        left = self.total - finished
        elapsed = time.monotonic() - self.started
        filled = int(self.width * finished / self.total) if self.total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        estimate = f"~{clock(elapsed / finished * left)} left" if finished else "time left unknown"
        skipped = f", {self.skipped} up to date" if self.skipped else ""
        return (f"[{bar}] {finished}/{self.total}: {self.done} done, {self.failed} failed, {left} left{skipped}; "
                f"{clock(elapsed)} elapsed, {estimate if left else 'finished'}")

    def update(self, done: int, failed: int) -> None:
        self.done, self.failed = done, failed
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + self.line())
            self.stream.flush()
        elif now - self._last >= self.interval:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now

    def close(self) -> None:
        if self.enabled:
            self.stream.write(("\r" if self.tty else "") + self.line() + "\n")
            self.stream.flush()
