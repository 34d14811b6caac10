"""The language server's analyses, in a thread of their own, so that the server's event loop
answers hover, code actions and edits while a project is analysed (the first analysis of
pytorch-image-models, with no cache, takes 13 s). No pygls here: app.py posts what the editor
did (`post`) and is told what to publish (`Sink`), on its own thread.

The thread owns the Workspace and its sessions: nothing else touches them. What the editor did
meanwhile waits as events, and an analysis takes every event that came before it: ten
keystrokes typed during an analysis make one analysis of the last text, not ten. Its results
carry the version of each document they were computed for; app.py drops those of a document
edited since (the next analysis has its text), so stale work is superseded, never shown.

A session's first analysis (and the first after its configuration changed) reports its progress
(`Reported`, on the pipeline's own counts: pipeline/progress.py) until one ends with no event
waiting; its documents' first findings come meanwhile from early_process.py, or, without that
process, from this thread just before the analysis (first_findings.py). Where the disk cache
holds little of the project, that analysis is first done as `check` does it, on every core, in
a child (cold_start.py), whose findings are published; the session's own analysis then reads
the cache the child wrote.
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from torchrepro_lint.config import ConfigError
from torchrepro_lint.findings import Finding
from torchrepro_lint.parsing.lines import line_texts
from torchrepro_lint.pipeline.progress import INTERVAL, Counts
from torchrepro_lint.server import cold_start
from torchrepro_lint.server.convert import diagnostic

if TYPE_CHECKING:  # (the linter itself is imported by the thread: the server starts without it)
    from torchrepro_lint.server.session import ProjectSession, Workspace

FREEZE_AFTER_PARSING = 20  # files parsed, or cache entries read from disk, by one analysis


# -- what the editor did ------------------------------------------------------------------------
@dataclass(frozen=True)
class Opened:
    """A text document opened, changed or saved: its text now."""

    path: Path
    uri: str
    text: str
    version: int | None


@dataclass(frozen=True)
class Closed:
    path: Path


@dataclass(frozen=True)
class NotebookChanged:
    """A notebook opened, changed or saved (notebook_sync.OpenNotebook, as it is now); `edited`:
    the URIs to publish for even where nothing changed."""

    path: Path
    notebook: object
    edited: frozenset


@dataclass(frozen=True)
class FilesChanged:
    """The editor saw files change on disk; `pyprojects`: the pyproject.toml files among them."""

    pyprojects: tuple


class Sink(Protocol):
    """What app.py does with an analysis (each call is handed to its event loop)."""

    def publish(self, uri: str, version, text: str, findings: list, diagnostics: list, *, final: bool, force: bool, notebook=None) -> None: ...

    def unanswered(self, uris: list[str]) -> None: ...

    def progress(self, key, message: str, percentage: int) -> None: ...

    def progress_done(self, key) -> None: ...

    def log(self, message: str, kind: str = "info") -> None:
        """kind: "info" or "warning" (logged), "error" (shown to the user)."""


class Reported(Counts):
    """A session's analysis as work-done progress: the pipeline's counts (files parsed, programs
    run, files checked), sent at most every `INTERVAL` seconds."""

    WEIGHTS = {"parsed": 50, "programs": 45, "checked": 5}  # of a cold analysis's time, roughly

    def __init__(self, sink: Sink, key) -> None:
        super().__init__()
        self.sink, self.key = sink, key
        self.percentage = 0
        self._sent = 0.0
        sink.progress(key, "analysing the project", 0)

    def start(self, stage: str, total: int) -> None:
        if stage == "parsed":  # a run after one that was superseded: counted anew
            self.stages.clear()
        super().start(stage, total)

    def changed(self) -> None:
        now = time.monotonic()
        if now - self._sent >= INTERVAL:
            self._sent = now
            self.sink.progress(self.key, self.message(), self.current_percentage())

    def message(self) -> str:
        """"analysing 120/315 files", then the programs, then the open files checked."""
        parts = []
        for stage, words in (("parsed", "analysing {}/{} files"), ("programs", "programs {}/{}"), ("checked", "checking {}/{} open files")):
            if stage in self.stages:
                parts.append(words.format(*self.stages[stage]))
        return ", ".join(parts) or "analysing the project"

    def current_percentage(self) -> int:
        done = sum(weight * _fraction(self.stages.get(stage)) for stage, weight in self.WEIGHTS.items())
        self.percentage = max(self.percentage, min(99, int(done)))  # never back (LSP), 100 at the end
        return self.percentage


def _fraction(counts) -> float:
    if counts is None:
        return 0.0
    done, total = counts
    return 1.0 if total <= 0 else min(1.0, done / total)


class _Held(Counts):
    """A progress whose counts are done (the child's): later counts change nothing shown."""

    def __init__(self, reported: Reported) -> None:
        super().__init__()
        self.key = reported.key


class Analyst:
    """The analysis thread: `post` an event, and it analyses the sessions the events touched."""

    def __init__(self, cwd: Path, persistent: bool, sink: Sink, encoding, *, first_findings_here: bool = False) -> None:
        self.cwd, self.persistent, self.sink, self.encoding = cwd, persistent, sink, encoding
        self.model: Workspace | None = None  # made by the thread, which alone touches it
        self.first_findings_here = first_findings_here  # (no early process: see early_process.py)
        self.documents: dict[Path, tuple[str, int | None]] = {}  # open text documents: path -> (URI, version)
        self.notebooks: dict[Path, object] = {}  # open notebooks: path -> OpenNotebook analysed
        self.warm: set = set()  # keys of the sessions whose first analysis is done (read by app.py)
        self._events: list = []
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._reported: dict[ProjectSession, Reported] = {}
        self._converted: dict[str, tuple] = {}  # URI -> (text, findings, their diagnostics)
        self._config_errors: set[str] = set()
        self._first: set[Path] = set()  # documents to find first findings of here, before an analysis
        self.idle = threading.Event()  # set while no event waits and no analysis runs (tests)

    def post(self, event) -> None:
        with self._lock:
            self._events.append(event)
            self.idle.clear()
            self._lock.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="torchrepro-lint analyses")
                self._thread.start()

    def _pending(self) -> bool:
        with self._lock:
            return bool(self._events)

    def _take(self) -> list:
        with self._lock:
            while not self._events:
                self.idle.set()
                self._lock.wait()
            events, self._events = self._events, []
            return events

    def _run(self) -> None:
        from torchrepro_lint.server.session import Workspace

        self.model = Workspace(self.cwd, persistent=self.persistent)
        while True:
            events = self._take()
            try:
                dirty, edited = self._apply(events)
            except Exception as exc:  # a bug must not end the thread: every request would wait
                self._failed(exc, self.model.sessions.values())
                continue
            for session, reported in list(self._reported.items()):
                if session not in dirty:  # held open for a run that no event needed after all
                    self._done(session, reported)
            for session in dirty:
                try:
                    self._analyse(session, edited)
                except Exception as exc:
                    self._failed(exc, [session])

    def _failed(self, exc: Exception, sessions) -> None:
        self.sink.log(f"torchrepro-lint: internal error: {type(exc).__name__}: {exc}", "error")
        for session in list(sessions):
            self.sink.unanswered(self._uris_of(session))
            reported = self._reported.get(session)
            if reported is not None:
                self._done(session, reported)

    # -- events ---------------------------------------------------------------------------
    def _apply(self, events: list) -> tuple[list[ProjectSession], set[str]]:
        dirty: dict[ProjectSession, None] = {}
        edited: set[str] = set()
        for event in events:
            if isinstance(event, Opened):
                session = self.model.session_holding(event.path) or self.model.open(event.path, event.text)
                session.buffers[event.path] = event.text
                self.documents[event.path] = (event.uri, event.version)
                if self.first_findings_here and not session.warm:
                    self._first.add(event.path)
                dirty[session] = None
                edited.add(event.uri)
            elif isinstance(event, NotebookChanged):
                notebook = event.notebook
                session = self.model.session_holding(event.path) or self.model.open(event.path, notebook.text)
                session.buffers[event.path] = notebook.text
                self.notebooks[event.path] = notebook
                dirty[session] = None
                edited.update(event.edited)
            elif isinstance(event, Closed):
                self.documents.pop(event.path, None)
                self.notebooks.pop(event.path, None)
                self._first.discard(event.path)
                session = self.model.close(event.path)
                if session is not None and session.buffers:  # the file on disk replaces the buffer
                    dirty[session] = None
                elif session is not None:  # nothing open: its progress, if any, ends
                    self.warm.discard(session.key)
                    reported = self._reported.get(session)
                    if reported is not None:
                        self._done(session, reported)
            elif isinstance(event, FilesChanged):
                for path in event.pyprojects:
                    for session in self.model.sessions.values():
                        if session.pyproject == path or session.root == path.parent:
                            session.forget_config()
                # Files on disk are re-read by their stat; every project with open files is analysed again.
                for session in self.model.sessions.values():
                    session.files_changed()
                    dirty[session] = None
        return [s for s in dirty if s.buffers], edited

    # -- an analysis ----------------------------------------------------------------------
    def _analyse(self, session: ProjectSession, edited: set[str]) -> None:
        reported = self._reported.get(session)
        if reported is None and not session.warm:
            reported = self._reported[session] = Reported(self.sink, session.key)
        if self._first:
            self._first_findings_here(session)
        first = reported is not None  # (the model is built: say from what)
        if reported is not None and cold_start.worth_it(session):
            complete = self._analyse_in_child(session, reported, edited)
            if complete and not self._pending():
                # Every open document was as saved: the child's findings are the complete set,
                # and the progress ends with them (the analysis below builds the model that
                # edits need, and finds the same again: lsp_compare.py)
                self._done(session, reported)
                reported = None
            elif complete is not None:
                reported = self._reported[session] = _Held(reported)  # (its counts were the child's)
        started = time.perf_counter()
        reads_before = session.cache.disk_reads if session.cache is not None else 0
        try:
            analysis = session.analyse(open_only=True, progress=reported)
        except ConfigError as exc:
            message = f"torchrepro-lint: {exc}; no findings until it is fixed"
            if message not in self._config_errors:
                self._config_errors.add(message)
                self.sink.log(message, "error")
            self.sink.unanswered(self._uris_of(session))
            if reported is not None:
                self._done(session, reported)
            return
        self._config_errors.clear()
        reads = (session.cache.disk_reads if session.cache is not None else 0) - reads_before
        for error in analysis.errors:
            self.sink.log(f"torchrepro-lint: {error}", "warning")
        self._publish(session, analysis.findings, edited, session.buffers)
        self.warm.add(session.key)
        if first:
            statistics = analysis.statistics
            self.sink.log(
                f"torchrepro-lint: analysed {statistics.files} files of {session.root} in "
                f"{time.perf_counter() - started:.1f} s: {statistics.parsed} parsed, "
                f"{reads} entries read from the cache on disk"
            )
        if reported is not None and not self._pending():  # else the next analysis goes on under the same progress
            self._done(session, reported)
        if analysis.statistics.parsed + reads >= FREEZE_AFTER_PARSING:
            # (Once published.) A (nearly) cold analysis, or one that took the model from the
            # disk cache, leaves a large heap that lives as long as the server: move it out of the
            # collector's way, or every later full collection walks it all again (an edit of
            # timm's train.py took 50 ms instead of 35 after a start from the cache).
            gc.collect()
            gc.freeze()

    def _analyse_in_child(self, session: ProjectSession, reported: Reported, edited: set[str]) -> bool | None:
        """A cold first analysis by `check`'s shards, in a child (cold_start.py): its findings
        published for the documents as saved; the session's own analysis, next, reads the cache
        it wrote. Whether they were every open document's (all as saved); None where the child
        gave nothing."""
        started = time.perf_counter()
        texts = session.as_saved()
        found = cold_start.analyse_in_child(session, texts, reported)
        if found is None:
            return None
        findings, errors, statistics = found
        for error in errors:
            self.sink.log(f"torchrepro-lint: {error}", "warning")
        saved = {path: text for path, text in session.buffers.items() if texts.get(path) == text}
        self._publish(session, findings, edited, saved)
        self.sink.log(
            f"torchrepro-lint: analysed {statistics.files} files of {session.root} in {time.perf_counter() - started:.1f} s "
            f"in {1 + statistics.workers} processes: {statistics.parsed} parsed; written to the cache on disk"
        )
        return len(saved) == len(session.buffers)

    def _done(self, session: ProjectSession, reported: Reported) -> None:
        if self._reported.get(session) is reported:
            del self._reported[session]
            self.sink.progress_done(reported.key)

    def _publish(self, session: ProjectSession, findings: dict, edited: set[str], buffers: dict) -> None:
        """The complete findings (path -> findings) of `buffers` (path -> the text they are of)."""
        for path, text in buffers.items():
            found = findings.get(path, [])
            notebook = self.notebooks.get(path)
            if notebook is not None:
                self._publish_cells(session, notebook, found, edited)
                continue
            document = self.documents.get(path)
            if document is None:
                continue
            uri, version = document
            diagnostics = self.diagnostics(session, path, uri, text, found)
            self.sink.publish(uri, version, text, found, diagnostics, final=True, force=uri in edited)

    def diagnostics(self, session: ProjectSession, path: Path, uri: str, text: str, found: list[Finding]) -> list:
        converted = self._converted.get(uri)
        if converted is not None and converted[0] is text and converted[1] == found:
            return converted[2]  # most open files: same text, same findings
        lines = line_texts(text)
        diagnostics = [diagnostic(f, lines, self.encoding(), session.cwd, path) for f in found]
        self._converted[uri] = (text, found, diagnostics)
        return diagnostics

    def _publish_cells(self, session: ProjectSession, notebook, found: list[Finding], edited: set[str]) -> None:
        """Each code cell's diagnostics, at the cell's URI."""
        for cell in notebook.code_cells:
            lines = line_texts(cell.text)
            in_cell = notebook.findings_in(cell, found)
            diagnostics = [diagnostic(f, lines, self.encoding(), session.cwd, notebook.path) for f in in_cell]
            force = notebook.uri in edited or cell.uri in edited
            self.sink.publish(cell.uri, cell.version, cell.text, in_cell, diagnostics, final=True, force=force, notebook=notebook)

    def _uris_of(self, session: ProjectSession) -> list[str]:
        uris = []
        for path in session.buffers:
            if path in self.documents:
                uris.append(self.documents[path][0])
            elif path in self.notebooks:
                uris += [cell.uri for cell in self.notebooks[path].code_cells]
        return uris

    def _first_findings_here(self, session: ProjectSession) -> None:
        """Without the early process: the first findings of the documents opened or edited
        since, found here before the analysis (which then starts that much later)."""
        from torchrepro_lint.server.first_findings import first_findings

        try:
            config = session.config()
        except ConfigError:
            return  # (the analysis says why)
        for path in [p for p in self._first if p in session.buffers and p in self.documents]:
            self._first.discard(path)
            uri, version = self.documents[path]
            text = session.buffers[path]
            on_disk = all(p.is_file() for p in session.buffers if p.suffix != ".ipynb")
            found = first_findings(config, session.display(path), text, on_disk)
            if found is not None:
                lines = line_texts(text)
                diagnostics = [diagnostic(f, lines, self.encoding(), session.cwd, path) for f in found]
                self.sink.publish(uri, version, text, found, diagnostics, final=False, force=True)
