"""`torchrepro-lint server`: the Language Server Protocol over stdio, on pygls.

Diagnostics are pushed (textDocument/publishDiagnostics) after every open, change and save, for
every open document of the project whose findings changed, and always for the edited one; code
actions, hover, and files changed outside the editor (workspace/didChangeWatchedFiles, with
pyproject.toml read again) are served from the model that session.py keeps in memory.

Notebooks come through notebook document sync (notebook_sync.py): each is linted as the CLI
lints its .ipynb file, and each code cell gets its own diagnostics, code actions and hover.

Each notification is analysed when it arrives, in the server's one thread: a request that
comes meanwhile waits for that analysis, so it always sees findings of the text it was sent for.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Collection
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from torchrepro_lint import __version__
from torchrepro_lint.config import ConfigError
from torchrepro_lint.findings import Finding
from torchrepro_lint.notebooks import is_notebook
from torchrepro_lint.server import notebook_sync
from torchrepro_lint.server.actions import FIX_ALL, PythonFile, code_actions
from torchrepro_lint.parsing.lines import line_texts
from torchrepro_lint.server.convert import diagnostic, from_position
from torchrepro_lint.server.hover import hover
from torchrepro_lint.server.session import ProjectSession, Workspace

LOG = logging.getLogger(__name__)
WATCHED = ("**/*.py", "**/*.pyi", "**/pyproject.toml")
FREEZE_AFTER_PARSING = 20  # files parsed by one analysis


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


class TorchReproServer(LanguageServer):
    def __init__(self, persistent: bool = True) -> None:
        super().__init__(
            "torchrepro-lint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=notebook_sync.SYNC_OPTIONS,
            protocol_cls=_Protocol,
        )
        self.model = Workspace(persistent=persistent)
        self.uris: dict[Path, str] = {}  # open documents: resolved path -> the client's URI
        self.notebooks = notebook_sync.OpenNotebooks()  # open notebooks, their cells' URIs
        self.published: dict[str, list] = {}  # URI -> the diagnostics last published
        self._converted: dict[str, tuple] = {}  # URI -> (text, findings, their diagnostics)
        self._config_errors: set[str] = set()

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

    # -- publishing ------------------------------------------------------------------------
    def refresh(self, session: ProjectSession, edited: Collection[str] = ()) -> None:
        """Analyse the project and publish what changed, and always for the `edited` URIs (of
        documents, of notebook cells, or of a notebook: then for each of its cells)."""
        try:
            analysis = session.analyse(open_only=True)
        except ConfigError as exc:
            message = f"torchrepro-lint: {exc}; no findings until it is fixed"
            if message not in self._config_errors:
                self._config_errors.add(message)
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            return
        self._config_errors.clear()
        if analysis.statistics.parsed >= FREEZE_AFTER_PARSING:
            # A (nearly) cold analysis leaves a large heap that lives as long as the server: move
            # it out of the collector's way, or every later full collection walks it all again.
            gc.collect()
            gc.freeze()
        for error in analysis.errors:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=f"torchrepro-lint: {error}"))
        for path, text in session.buffers.items():
            uri = self.uris.get(path)
            if uri is None:
                notebook = self.notebooks.get(path)
                if notebook is not None:
                    self.publish_cells(session, notebook, analysis.findings.get(path, []), edited)
                continue
            found = analysis.findings.get(path, [])
            converted = self._converted.get(uri)
            if converted is not None and converted[0] is text and converted[1] == found:
                diagnostics = converted[2]  # most open files: same text, same findings
            else:
                lines = line_texts(text)
                diagnostics = [diagnostic(f, lines, self.encoding, session.cwd, path) for f in found]
                self._converted[uri] = (text, found, diagnostics)
            if uri in edited or self.published.get(uri) != diagnostics:
                self.published[uri] = diagnostics
                version = self.workspace.get_text_document(uri).version
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
                )

    def publish_cells(self, session: ProjectSession, notebook, found: list[Finding], edited: Collection[str]) -> None:
        """Each code cell's diagnostics, at the cell's URI, where they changed."""
        for cell in notebook.code_cells:
            lines = line_texts(cell.text)
            in_cell = notebook.findings_in(cell, found)
            diagnostics = [diagnostic(f, lines, self.encoding, session.cwd, notebook.path) for f in in_cell]
            if notebook.uri in edited or cell.uri in edited or self.published.get(cell.uri) != diagnostics:
                self.published[cell.uri] = diagnostics
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=diagnostics, version=cell.version)
                )

    def clear(self, uri: str) -> None:
        """Forget what was published for `uri`, and tell the editor it has nothing now."""
        self.published.pop(uri, None)
        self._converted.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def findings_at(self, uri: str) -> tuple[ProjectSession | None, list[Finding], str]:
        """The current findings of an open document and its text."""
        path = self.text_path_of(uri)
        session = self.model.session_holding(path) if path is not None else None
        if session is None or session.last is None:
            return None, [], ""
        return session, session.last.findings.get(path, []), session.buffers[path]

    def update(self, uri: str) -> None:
        path = self.text_path_of(uri)
        if path is None:
            return
        document = self.workspace.get_text_document(uri)
        session = self.model.session_holding(path) or self.model.open(path, document.source)
        session.buffers[path] = document.source
        self.uris[path] = uri
        self.refresh(session, edited={uri})

    def update_notebook(self, uri: str, edited: Collection[str]) -> None:
        """Lint the notebook `uri` with its cells as pygls now holds them; `edited`: the URIs
        to publish for even where nothing changed (the notebook's: every cell)."""
        path = self.path_of(uri)
        document = self.workspace.get_notebook_document(notebook_uri=uri)
        if path is None or document is None:
            return  # not a file (an untitled notebook): the project has no place for it
        notebook, gone = self.notebooks.update(uri, path, [self._cell(cell) for cell in document.cells])
        for cell_uri in gone:  # deleted cells: their diagnostics go with them
            self.clear(cell_uri)
        session = self.model.session_holding(path) or self.model.open(path, notebook.text)
        session.buffers[path] = notebook.text
        self.refresh(session, edited=edited)

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
        session = self.model.close(path)
        if session is not None and session.buffers:  # the file on disk replaces the notebook
            self.refresh(session)

    def cell_findings(self, uri: str):
        """(notebook, cell, the cell's findings, the session) for a code cell's URI, or None."""
        held = self.notebooks.holding(uri)
        if held is None:
            return None
        notebook, cell = held
        session = self.model.session_holding(notebook.path)
        if session is None or session.last is None:
            return None
        return notebook, cell, notebook.findings_in(cell, session.last.findings.get(notebook.path, [])), session


def build(persistent: bool = True) -> TorchReproServer:
    server = TorchReproServer(persistent)

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
        uri = params.text_document.uri
        path = ls.text_path_of(uri)
        session = ls.model.close(path) if path is not None else None
        ls.uris.pop(path, None)
        ls.clear(uri)
        if session is not None and session.buffers:  # the file on disk replaces the buffer
            ls.refresh(session)

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
    def code_action(ls: TorchReproServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        in_cell = ls.cell_findings(uri)
        if in_cell is not None:
            notebook, cell, findings, session = in_cell
            text, path = cell.text, notebook.path
            document = notebook_sync.CellEdits(notebook, cell, ls.encoding)
        else:
            session, findings, text = ls.findings_at(uri)
            if session is None:
                return []
            path = ls.path_of(uri)
            document = PythonFile(uri, text, ls.encoding)
        lines = line_texts(text)
        rows = (
            from_position(lines, params.range.start, ls.encoding)[0],
            from_position(lines, params.range.end, ls.encoding)[0],
        )

        def diagnostic_of(finding: Finding) -> types.Diagnostic:
            return diagnostic(finding, lines, ls.encoding, session.cwd, path)

        return code_actions(document, findings, rows, params.context.only, diagnostic_of)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: TorchReproServer, params: types.HoverParams):
        in_cell = ls.cell_findings(params.text_document.uri)
        if in_cell is not None:
            _, cell, findings, _ = in_cell
            text = cell.text
        else:
            session, findings, text = ls.findings_at(params.text_document.uri)
            if session is None:
                return None
        row, column = from_position(line_texts(text), params.position, ls.encoding)
        return hover(findings, row, column)

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
        for change in params.changes:
            path = ls.path_of(change.uri)
            if path is not None and path.name == "pyproject.toml":
                for session in ls.model.sessions.values():
                    if session.pyproject == path or session.root == path.parent:
                        session.forget_config()
        # Files on disk are re-read by their stat; every project with open files is analysed again.
        for session in list(ls.model.sessions.values()):
            session.files_changed()
            ls.refresh(session)

    return server


def main() -> int:
    """Serve on stdin/stdout until the client says exit or closes the stream."""
    from torchrepro_lint.memory import RUN_GC_THRESHOLDS

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="torchrepro-lint server: %(message)s")
    gc.enable()  # a long-lived process: cycles must be collected, but rarely (see memory.RUN_GC_THRESHOLDS)
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    build().start_io()
    return 0
