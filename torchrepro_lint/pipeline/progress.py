"""Progress on long runs: one line on a terminal's stderr, rewritten in place as the stages
advance (`parsed 120/315, programs 3/9, checked 40/315`: files parsed, programs interpreted,
files checked), erased at the end.

Only for a person watching: stderr is a terminal, the run is not in CI (whose logs keep every
carriage return as a new line, even where a terminal is emulated), the format is text, and the
run has lasted `DELAY` seconds (a quick run never shows it). Drawn from the pipeline's own calls,
no thread: a stage that does not advance leaves the line as it was.

`Counts` keeps the counts the pipeline reports, and calls `changed()` after each: `Progress`
draws them on the terminal, and the language server sends them to the editor as work-done
progress (server/progress_report.py)."""

from __future__ import annotations

import os
import time

DELAY = 1.0  # seconds before the line first appears
INTERVAL = 0.1  # at most this often redrawn after that
ERASE = "\r\x1b[K"  # back to the line's start, clear to its end


class NoProgress:
    """Nothing shown: pipes, CI, --quiet, machine-readable formats, integrations."""

    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, stage: str, count: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


NO_PROGRESS = NoProgress()


class Counts(NoProgress):
    """The stages' counts, as the pipeline reports them; `changed()` hears of each change."""

    def __init__(self) -> None:
        self.stages: dict[str, list[int]] = {}  # stage -> [done, total], in the order started

    def start(self, stage: str, total: int) -> None:
        self.stages[stage] = [0, total]
        self.changed()

    def advance(self, stage: str, count: int = 1) -> None:
        if stage in self.stages:
            self.stages[stage][0] += count
            self.changed()

    def changed(self) -> None:
        pass

    def line(self) -> str:
        return "torchrepro-lint: " + ", ".join(f"{stage} {done}/{total}" for stage, (done, total) in self.stages.items())


class Progress(Counts):
    def __init__(self, stream, *, delay: float | None = None, interval: float | None = None, clock=time.monotonic) -> None:
        super().__init__()
        self.stream, self.clock = stream, clock
        self.delay = DELAY if delay is None else delay
        self.interval = INTERVAL if interval is None else interval
        self.began = clock()
        self.drawn_at: float | None = None  # when the line was last drawn; None: nothing on it

    def changed(self) -> None:
        self._draw()

    def finish(self) -> None:
        if self.drawn_at is not None:
            self._write(ERASE)
            self.drawn_at = None

    def _draw(self) -> None:
        now = self.clock()
        if now - self.began < self.delay:
            return
        if self.drawn_at is not None and now - self.drawn_at < self.interval:
            return
        self._write(ERASE + self.line()[: self._width() - 1])  # never wraps: a wrapped line cannot be erased
        self.drawn_at = now

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            return 80

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a terminal gone away: the run goes on without progress
            self.stages.clear()


def wanted(stream, environ, *, quiet: bool, output_format: str) -> bool:
    """Whether a run shows progress on `stream` (its stderr)."""
    if quiet or output_format != "text":
        return False
    if environ.get("CI", "").lower() not in ("", "0", "false") or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def for_run(stream, environ, *, quiet: bool, output_format: str) -> NoProgress:
    return Progress(stream) if wanted(stream, environ, quiet=quiet, output_format=output_format) else NO_PROGRESS
