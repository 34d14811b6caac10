"""`torchrepro-lint server`: the Language Server Protocol over stdio, on pygls.

Diagnostics are pushed (textDocument/publishDiagnostics) after every open, change and save, for
every open document of the project whose findings changed, and always for the edited one; code
actions, hover, and files changed outside the editor (workspace/didChangeWatchedFiles, with
pyproject.toml read again) are served from the model that session.py keeps in memory.

Each notification is analysed when it arrives, in the server's one thread: a request that
comes meanwhile waits for that analysis, so it always sees findings of the text it was sent for.
"""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from torchrepro_lint import __version__
from torchrepro_lint.config import ConfigError
from torchrepro_lint.findings import Finding
from torchrepro_lint.server.actions import FIX_ALL, code_actions
from torchrepro_lint.server.convert import diagnostic, from_position, physical_lines
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
            protocol_cls=_Protocol,
        )
        self.model = Workspace(persistent=persistent)
        self.uris: dict[Path, str] = {}  # open documents: resolved path -> the client's URI
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

    # -- publishing ------------------------------------------------------------------------
    def refresh(self, session: ProjectSession, edited: str | None = None) -> None:
        """Analyse the project and publish what changed (and always for the edited URI)."""
        try:
            analysis = session.analyse()
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
                continue
            found = analysis.findings.get(path, [])
            converted = self._converted.get(uri)
            if converted is not None and converted[0] is text and converted[1] == found:
                diagnostics = converted[2]  # most open files: same text, same findings
            else:
                lines = physical_lines(text)
                diagnostics = [diagnostic(f, lines, self.encoding, session.cwd, path) for f in found]
                self._converted[uri] = (text, found, diagnostics)
            if uri == edited or self.published.get(uri) != diagnostics:
                self.published[uri] = diagnostics
                version = self.workspace.get_text_document(uri).version
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
                )

    def findings_at(self, uri: str) -> tuple[ProjectSession | None, list[Finding], str]:
        """The current findings of an open document and its text."""
        path = self.path_of(uri)
        session = self.model.session_holding(path) if path is not None else None
        if session is None or session.last is None:
            return None, [], ""
        return session, session.last.findings.get(path, []), session.buffers[path]

    def update(self, uri: str) -> None:
        path = self.path_of(uri)
        if path is None:
            return
        document = self.workspace.get_text_document(uri)
        session = self.model.session_holding(path) or self.model.open(path, document.source)
        session.buffers[path] = document.source
        self.uris[path] = uri
        self.refresh(session, edited=uri)


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
        path = ls.path_of(uri)
        session = ls.model.close(path) if path is not None else None
        ls.uris.pop(path, None)
        ls.published.pop(uri, None)
        ls._converted.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if session is not None and session.buffers:  # the file on disk replaces the buffer
            ls.refresh(session)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL]),
    )
    def code_action(ls: TorchReproServer, params: types.CodeActionParams):
        session, findings, text = ls.findings_at(params.text_document.uri)
        if session is None:
            return []
        lines = physical_lines(text)
        rows = (
            from_position(lines, params.range.start, ls.encoding)[0],
            from_position(lines, params.range.end, ls.encoding)[0],
        )
        path = ls.path_of(params.text_document.uri)

        def diagnostic_of(finding: Finding) -> types.Diagnostic:
            return diagnostic(finding, lines, ls.encoding, session.cwd, path)

        return code_actions(params.text_document.uri, text, findings, rows, ls.encoding, params.context.only, diagnostic_of)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: TorchReproServer, params: types.HoverParams):
        session, findings, text = ls.findings_at(params.text_document.uri)
        if session is None:
            return None
        row, column = from_position(physical_lines(text), params.position, ls.encoding)
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
    from torchrepro_lint.cli import RUN_GC_THRESHOLDS

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="torchrepro-lint server: %(message)s")
    gc.enable()  # a long-lived process: cycles must be collected, but rarely (see cli.RUN_GC_THRESHOLDS)
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    build().start_io()
    return 0
