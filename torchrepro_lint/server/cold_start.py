"""A project's first analysis, where the disk cache holds little of it, as `check` runs it: in
processes of their own (the shards, `--jobs`), in a child of the server that writes the cache
of the files as saved and hands back their findings; the server then takes its own model from
that cache (0.5-0.9 s on pytorch-image-models, against 17 s of a cold analysis in its thread,
where `check` takes 10-11 s on two cores).

Why a child: the shards fork, and share out the project's trees between processes, so the main
process of a sharded run keeps none of what the server keeps between edits (trees, IR layouts,
the interpreter's recordings): its next edit took 11.6 s instead of 0.1 s. The child's run is
thrown away; the server's own analysis, reading what the child wrote, keeps everything.

The child is forked from the analysis thread while the server has other threads (its event
loop, pygls' reader of stdin), which may hold locks at that moment: it touches none of theirs.
It writes nothing to the editor's pipes (its stdin and stdout are /dev/null, and its Python
streams are new objects, whose locks no other thread holds), leaves with `os._exit` (no
finalization, no flush), and talks to the server through a pipe of its own: the pipeline's
counts (pipeline/progress.py) as they change, then the findings. A child that dies hands back
nothing: the server then analyses in its thread, as before.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import warnings

from torchrepro_lint.config import ConfigError
from torchrepro_lint.pipeline.progress import INTERVAL, Counts

MIN_FILES = 24  # fewer files: no shards (pipeline/shards/protocol.py's MIN_FILES), nothing to gain


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worth_it(session) -> bool:
    """Whether `session`'s first analysis goes to a child: one that persists to a disk cache
    holding the IR of fewer than half its files, with enough files to share out."""
    if not sys.platform.startswith("linux") or cores() < 2 or session.standalone or not session.persistent:
        return False  # (macOS: a fork with threads may trip its system libraries; Windows: no fork)
    try:
        config = session.config()
    except ConfigError:
        return False  # (the analysis says why)
    disk = session.cache.disk if session.cache is not None else None
    if disk is None:
        return False
    files = session.files(config)
    return len(files) >= MIN_FILES and _ir_entries(disk.namespace / "ir") < len(files) // 2


def _ir_entries(directory) -> int:
    try:
        return sum(len(os.listdir(entry.path)) for entry in os.scandir(directory) if entry.is_dir())
    except OSError:
        return 0


class _Sent(Counts):
    """The child's progress: the counts, sent to the server at most every INTERVAL seconds."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream, self._sent = stream, 0.0

    def changed(self) -> None:
        now = time.monotonic()
        if now - self._sent >= INTERVAL:
            self._sent = now
            _send(self.stream, ("progress", {stage: list(counts) for stage, counts in self.stages.items()}))


def _send(stream, message) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def analyse_in_child(session, texts: dict, progress) -> tuple | None:
    """`session` analysed in a forked child with `texts` (path -> text as saved) as its open
    buffers, on every core: (findings by path, errors, statistics), or None where the child gave
    nothing. `progress` (a pipeline/progress.py Counts) hears of the child's counts."""
    jobs = cores()
    reading, writing = os.pipe()
    with warnings.catch_warnings():  # (Python 3.12 warns of a fork with threads: see above)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(reading)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            sys.stdin = sys.stdout = sys.stderr = open(os.devnull, "w")  # new objects, new locks
            stream = os.fdopen(writing, "wb")
            session.buffers = dict(texts)
            analysis = session.analyse(open_only=True, progress=_Sent(stream), jobs=jobs)
            _send(stream, ("done", analysis.findings, analysis.errors, analysis.statistics))
            code = 0
        finally:
            os._exit(code)
    os.close(writing)
    found = None
    with os.fdopen(reading, "rb") as stream:
        while True:
            try:
                message = pickle.load(stream)
            except Exception:  # the end of the pipe (EOFError), or a child that died mid-message
                break
            if message[0] == "progress" and progress is not None:
                progress.stages = message[1]
                progress.changed()
            elif message[0] == "done":
                found = message[1:]
    os.waitpid(pid, 0)
    return found
