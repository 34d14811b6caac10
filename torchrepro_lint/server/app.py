"""`torchrepro-lint server`: the Language Server Protocol over stdio, on pygls.

Diagnostics are pushed (textDocument/publishDiagnostics) after every open, change and save, for
every open document of the project whose findings changed, and always for the edited one; code
actions, hover, and files changed outside the editor (workspace/didChangeWatchedFiles, with
pyproject.toml read again) are served from what was last published.

Notebooks come through notebook document sync (notebook_sync.py): each is linted as the CLI
lints its .ipynb file, and each code cell gets its own diagnostics, code actions and hover.

The analyses run in a thread of their own (analyst.py): this one, the event loop, only takes
notifications and answers requests, so hover and code actions are answered while a project is
analysed. A request waits until the findings of the text it was sent for are published (an
edit's: about 50 ms warm), and is answered from them. A file opened before its project's first
analysis is done first gets the findings that analysis cannot take back (first_findings.py,
found in early_process.py), then the complete set; meanwhile the analysis reports its progress
(window/workDoneProgress), where the client can show it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from torchrepro_lint import __version__
from torchrepro_lint.findings import Finding
from torchrepro_lint.integrations.project_root import session_key
from torchrepro_lint.notebooks import is_notebook
from torchrepro_lint.parsing.lines import line_texts
from torchrepro_lint.server import notebook_sync
from torchrepro_lint.server.actions import FIX_ALL, PythonFile, code_actions
from torchrepro_lint.server.analyst import Analyst, Closed, FilesChanged, NotebookChanged, Opened
from torchrepro_lint.server.convert import diagnostic, from_position
from torchrepro_lint.server.early_process import EarlyProcess
from torchrepro_lint.server.hover import hover

LOG = logging.getLogger(__name__)
WATCHED = ("**/*.py", "**/*.pyi", "**/pyproject.toml")
PROGRESS_TITLE = "torchrepro-lint"


class _Protocol(LanguageServerProtocol):
    """pygls 2.1 logs a request whose params do not match the method's type and never answers
    it, so the client waits forever: answer it with the JSON-RPC error instead."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "method" in data and isinstance(data.get("id"), (int, str)):
                error = types.ResponseError(code=exc.code, message=f"{exc.message} for {data['method']}")
                self._send_response(data["id"], error=error)
            raise


@dataclass
class Shown:
    """What was last published for a URI: `now`, the document's version (a notebook cell: the
    OpenNotebook) it was found for, its text and findings."""

    now: object
    text: str
    findings: list[Finding]
    notebook: notebook_sync.OpenNotebook | None = None


@dataclass
class _Token:
    """A work-done progress: created (asked of the client), begun once it said yes."""

    id: str
    message: str = ""
    percentage: int = 0
    begun: bool = False
    done: bool = False


class _OnTheLoop:
    """The analysis thread's Sink (analyst.py): each call is made on the server's event loop."""

    def __init__(self, server: TorchReproServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop

    def _call(self, function, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(function, *args)
        except RuntimeError:  # the loop is closed: the server is exiting
            pass

    def publish(self, *args, **kwargs) -> None:
        self._call(lambda: self.server.show(*args, **kwargs))

    def unanswered(self, uris) -> None:
        self._call(self.server.unanswered, uris)

    def progress(self, key, message, percentage) -> None:
        self._call(self.server.progress, key, message, percentage)

    def progress_done(self, key) -> None:
        self._call(self.server.progress_done, key)

    def log(self, message, kind="info") -> None:
        self._call(self.server.log, message, kind)


class TorchReproServer(LanguageServer):
    def __init__(self, persistent: bool = True, early: EarlyProcess | None = None) -> None:
        super().__init__(
            "torchrepro-lint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=notebook_sync.SYNC_OPTIONS,
            protocol_cls=_Protocol,
        )
        self.cwd = Path.cwd().resolve()  # (as `check` run from here names files)
        self.persistent = persistent
        self.early = early  # the process finding first findings, or None (then the analyst does)
        self.analyst: Analyst | None = None  # started with the first document
        self.uris: dict[Path, str] = {}  # open documents: resolved path -> the client's URI
        self.notebooks = notebook_sync.OpenNotebooks()  # open notebooks, their cells' URIs
        self.published: dict[str, list] = {}  # URI -> the diagnostics last published
        self.shown: dict[str, Shown] = {}  # URI -> the findings last published, for requests
        self.final: set[str] = set()  # URIs whose complete findings were published
        self._waiting: dict[str, list[asyncio.Future]] = {}  # URI -> requests waiting for its findings
        self._tokens: dict[object, _Token] = {}  # session key -> its analysis's progress
        self._numbers = itertools.count(1)

    def report_server_error(self, error: Exception, source) -> None:
        if source is JsonRpcException:  # a malformed message: answered (see _Protocol) and logged
            return
        super().report_server_error(error, source)

    @property
    def encoding(self) -> str:
        return self.workspace.position_codec.encoding

    def path_of(self, uri: str) -> Path | None:
        path = to_fs_path(uri)
        return Path(path).resolve() if path else None

    def text_path_of(self, uri: str) -> Path | None:
        """The path of a text document the server lints as one: a notebook's JSON text is not
        (its findings are in cells, which come through notebook sync)."""
        path = self.path_of(uri)
        return None if path is None or is_notebook(path) else path

    def post(self, event) -> None:
        if self.analyst is None:
            sink = _OnTheLoop(self, asyncio.get_running_loop())
            self.analyst = Analyst(self.cwd, self.persistent, sink, lambda: self.encoding, first_findings_here=self.early is None)
        self.analyst.post(event)

    # -- what the editor did --------------------------------------------------------------
    def update(self, uri: str) -> None:
        path = self.text_path_of(uri)
        if path is None:
            return
        document = self.workspace.get_text_document(uri)
        self.uris[path] = uri
        self.post(Opened(path, uri, document.source, document.version))
        if uri not in self.final:
            self.first_findings(uri, path, document.source, document.version)

    def first_findings(self, uri: str, path: Path, text: str, version) -> None:
        """Ask the early process for what the project's analysis cannot take back, where its
        first analysis is not done (the analyst finds them itself where there is no process)."""
        early = self.early
        if early is None or not early.alive:
            return
        key = session_key(path)
        if key in self.analyst.warm:
            return
        # The project's progress begins before any first findings come, and ends after the
        # complete set: what a client sees published while no progress is open is complete.
        self.progress(key, "analysing the project", 0)
        on_disk = all(p.is_file() for p in self.uris if p != path)  # (no import finds an unsaved new file)
        loop = asyncio.get_running_loop()

        def reply(found):
            if found is not None:
                try:
                    loop.call_soon_threadsafe(self.first_found, uri, path, version, text, found)
                except RuntimeError:  # the loop is closed: the server is exiting
                    pass

        early.submit(uri, path, text, on_disk, reply)

    def first_found(self, uri: str, path: Path, version, text: str, found: list[Finding]) -> None:
        lines = line_texts(text)
        diagnostics = [diagnostic(f, lines, self.encoding, self.cwd, path) for f in found]
        self.show(uri, version, text, found, diagnostics, final=False, force=True)

    def close_document(self, uri: str) -> None:
        path = self.text_path_of(uri)
        if path is not None and self.uris.get(path) == uri:
            del self.uris[path]
            self.post(Closed(path))
        self.clear(uri)

    def update_notebook(self, uri: str, edited) -> None:
        """Lint the notebook `uri` with its cells as pygls now holds them; `edited`: the URIs
        to publish for even where nothing changed (the notebook's: every cell)."""
        path = self.path_of(uri)
        document = self.workspace.get_notebook_document(notebook_uri=uri)
        if path is None or document is None:
            return  # not a file (an untitled notebook): the project has no place for it
        notebook, gone = self.notebooks.update(uri, path, [self._cell(cell) for cell in document.cells])
        for cell_uri in gone:  # deleted cells: their diagnostics go with them
            self.clear(cell_uri)
        self.post(NotebookChanged(path, notebook, frozenset(edited)))

    def _cell(self, cell: types.NotebookCell) -> notebook_sync.Cell:
        text = self.workspace.text_documents.get(unquote(cell.document))  # pygls keys them unquoted
        if text is None:  # a cell the editor did not send: it only counts in the numbering
            return notebook_sync.Cell(cell.document, notebook_sync.RAW, "")
        kind = notebook_sync.cell_kind(cell.kind, text.language_id)
        return notebook_sync.Cell(cell.document, kind, text.source, text.version)

    def close_notebook(self, uri: str) -> None:
        path = self.path_of(uri)
        notebook = self.notebooks.close(path) if path is not None else None
        if notebook is None:
            return
        for cell in notebook.code_cells:
            self.clear(cell.uri)
        self.post(Closed(path))

    # -- publishing (on the loop: the analyst hands its results here) -----------------------
    def now(self, uri: str):
        """What a URI's findings must have been found for to be current: an open document's
        version, a code cell's notebook as it is now; None for what is not open."""
        path = self.text_path_of(uri)
        if path is not None and self.uris.get(path) == uri:
            return self.workspace.get_text_document(uri).version
        held = self.notebooks.holding(uri)
        if held is not None and held[1].uri in held[0].numbers:
            return held[0]
        return None

    def show(self, uri: str, version, text: str, findings, diagnostics, *, final: bool, force: bool, notebook=None) -> None:
        """Publish `diagnostics`, found for `version` of the document (a cell: for `notebook`),
        unless it was edited or closed since (an analysis of the new text follows), or these are
        first findings and the complete set is already there."""
        now = self.now(uri)
        if now is None or (now is not notebook if notebook is not None else now != version):
            return
        if not final and uri in self.final:
            return
        if final:
            self.final.add(uri)
        self.shown[uri] = Shown(now, text, findings, notebook)
        if force or self.published.get(uri) != diagnostics:
            self.published[uri] = diagnostics
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))
        self._wake(uri)

    def unanswered(self, uris) -> None:
        """No findings will come for these URIs' texts (a broken configuration): requests
        waiting for them are answered with none."""
        for uri in uris:
            now = self.now(uri)
            if now is not None:
                held = self.notebooks.holding(uri)
                text = held[1].text if held is not None else self.workspace.get_text_document(uri).source
                self.shown[uri] = Shown(now, text, [], held[0] if held is not None else None)
            self._wake(uri)

    def clear(self, uri: str) -> None:
        """Forget what was published for `uri`, and tell the editor it has nothing now."""
        self.published.pop(uri, None)
        self.shown.pop(uri, None)
        self.final.discard(uri)
        self._wake(uri)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def _wake(self, uri: str) -> None:
        for future in self._waiting.pop(uri, ()):
            if not future.done():
                future.set_result(None)

    async def shown_now(self, uri: str) -> Shown | None:
        """The findings of the text of `uri` as it is now, once published; None where it is not
        open (or is not a code cell)."""
        while True:
            now = self.now(uri)
            if now is None:
                return None
            shown = self.shown.get(uri)
            if shown is not None and (shown.now is now or not isinstance(now, notebook_sync.OpenNotebook) and shown.now == now):
                return shown
            future = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(uri, []).append(future)
            await future

    # -- progress and messages ------------------------------------------------------------
    def progress(self, key, message: str, percentage: int) -> None:
        window = self.client_capabilities.window if self.client_capabilities is not None else None
        if window is None or not window.work_done_progress:
            return
        token = self._tokens.get(key)
        if token is None:
            token = self._tokens[key] = _Token(f"torchrepro-lint/analysis/{next(self._numbers)}")
            future = self.work_done_progress.create(token.id)
            future.add_done_callback(lambda created, token=token: self._created(token, created))
        token.message, token.percentage = message, percentage
        if token.begun:
            self.work_done_progress.report(token.id, types.WorkDoneProgressReport(message=message, percentage=percentage))

    def _created(self, token: _Token, created) -> None:
        if created.cancelled() or created.exception() is not None:
            return  # the client said no: no progress
        begin = types.WorkDoneProgressBegin(title=PROGRESS_TITLE, message=token.message, percentage=token.percentage, cancellable=False)
        self.work_done_progress.begin(token.id, begin)
        token.begun = True
        if token.done:
            self._end(token)

    def progress_done(self, key) -> None:
        token = self._tokens.pop(key, None)
        if token is not None:
            token.done = True
            if token.begun:
                self._end(token)

    def _end(self, token: _Token) -> None:
        self.work_done_progress.end(token.id, types.WorkDoneProgressEnd(message="findings published"))

    def log(self, message: str, kind: str = "info") -> None:
        if kind == "error":
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            return
        level = types.MessageType.Warning if kind == "warning" else types.MessageType.Info
        self.window_log_message(types.LogMessageParams(type=level, message=message))


def build(persistent: bool = True, early: EarlyProcess | None = None) -> TorchReproServer:
    server = TorchReproServer(persistent, early)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchReproServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.update(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchReproServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.update(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchReproServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.update(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchReproServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close_document(params.text_document.uri)

    # Notebooks: pygls' own handlers keep the notebook and its cells' text in ls.workspace first.
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: TorchReproServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.update_notebook(params.notebook_document.uri, edited={params.notebook_document.uri})

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: TorchReproServer, params: types.DidChangeNotebookDocumentParams) -> None:
        cells = params.change.cells
        edited = {change.document.uri for change in (cells.text_content or [])} if cells is not None else set()
        if cells is not None and cells.structure is not None:
            edited.update(document.uri for document in cells.structure.did_open or [])
        ls.update_notebook(params.notebook_document.uri, edited)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: TorchReproServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.update_notebook(params.notebook_document.uri, edited={params.notebook_document.uri})

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: TorchReproServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.close_notebook(params.notebook_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL]),
    )
    async def code_action(ls: TorchReproServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        shown = await ls.shown_now(uri)
        if shown is None:
            return []
        notebook = shown.notebook
        if notebook is not None:
            cell = notebook.cell(uri)
            text, path = cell.text, notebook.path
            document = notebook_sync.CellEdits(notebook, cell, ls.encoding)
        else:
            text, path = shown.text, ls.path_of(uri)
            document = PythonFile(uri, text, ls.encoding)
        lines = line_texts(text)
        rows = (
            from_position(lines, params.range.start, ls.encoding)[0],
            from_position(lines, params.range.end, ls.encoding)[0],
        )

        def diagnostic_of(finding: Finding) -> types.Diagnostic:
            return diagnostic(finding, lines, ls.encoding, ls.cwd, path)

        return code_actions(document, shown.findings, rows, params.context.only, diagnostic_of)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: TorchReproServer, params: types.HoverParams):
        shown = await ls.shown_now(params.text_document.uri)
        if shown is None:
            return None
        row, column = from_position(line_texts(shown.text), params.position, ls.encoding)
        return hover(shown.findings, row, column)

    @server.feature(types.INITIALIZED)
    def initialized(ls: TorchReproServer, params: types.InitializedParams) -> None:
        workspace = ls.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace is not None else None
        if watched is not None and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED]
            )
            registration = types.Registration(
                id="torchrepro-lint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            ls.client_register_capability(types.RegistrationParams(registrations=[registration]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files_changed(ls: TorchReproServer, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [ls.path_of(change.uri) for change in params.changes]
        ls.post(FilesChanged(tuple(path for path in paths if path is not None and path.name == "pyproject.toml")))

    return server


def main(early: EarlyProcess | None = None) -> int:
    """Serve on stdin/stdout until the client says exit or closes the stream. `early`: the
    process for first findings, forked by the caller before any thread (cli.py does, before
    importing this module); forked here if none was given."""
    import gc

    from torchrepro_lint.memory import RUN_GC_THRESHOLDS

    if early is None:
        early = EarlyProcess.started(Path.cwd().resolve())
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="torchrepro-lint server: %(message)s")
    gc.enable()  # a long-lived process: cycles must be collected, but rarely (see memory.RUN_GC_THRESHOLDS)
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    build(early=early).start_io()
    return 0
