"""The server's event loop while a project's first analysis runs (server/app.py): in-process, with
the analysis held until the test lets it go, a stand-in for the early process that answers at
once, and what the server sends recorded instead of written. So what comes first is decided by
the test, not by timing: while the analysis is held, the first findings are published, hover and
code actions are answered from them, and an edit gets its own; let go, the analysis of the first
text is superseded and the complete set of the last one published, under one progress."""

from __future__ import annotations

import asyncio
import shutil
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls.workspace import Workspace as PyglsWorkspace  # noqa: E402
from pytest_lsp import client_capabilities  # noqa: E402

from torchrepro_lint.server import app  # noqa: E402
from torchrepro_lint.server.early_process import answer  # noqa: E402
from torchrepro_lint.server.analyst import Analyst  # noqa: E402
from torchrepro_lint.server.session import Workspace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GUARD = 120  # seconds: only a hang ever reaches it


class InlineEarly:
    """early_process.EarlyProcess's stand-in: answers on the spot (the analysis is held then)."""

    alive = True

    def __init__(self, cwd: Path) -> None:
        self.workspace = Workspace(cwd, persistent=False)

    def submit(self, key, path, text, buffers_on_disk, reply) -> bool:
        reply(answer(self.workspace, path, text, buffers_on_disk))
        return True


class Sent:
    """What the server sends, in order; `until(condition)` waits for it on the loop."""

    def __init__(self, server: app.TorchReproServer) -> None:
        self.messages: list[tuple] = []
        self.created: list[Future] = []
        self.changed = asyncio.Event()
        server.text_document_publish_diagnostics = lambda params: self._add(
            ("publish", params.uri, params.version, sorted(d.code for d in params.diagnostics))
        )
        server.window_log_message = lambda params: self._add(("log", params.message))
        server.window_show_message = lambda params: self._add(("show", params.message))
        sent = self

        class Progress:
            def create(self, token):
                sent._add(("create", token))
                future = Future()
                sent.created.append(future)
                return future

            def begin(self, token, value):
                sent._add(("begin", token, value.title))

            def report(self, token, value):
                sent._add(("report", token, value.message))

            def end(self, token, value):
                sent._add(("end", token))

        server.protocol.progress = Progress()

    def _add(self, message: tuple) -> None:
        self.messages.append(message)
        self.changed.set()

    def of(self, kind: str) -> list[tuple]:
        return [m for m in self.messages if m[0] == kind]

    async def until(self, condition) -> None:
        async def wait():
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), GUARD)


@pytest.fixture
def demo(tmp_path: Path, monkeypatch) -> Path:
    project = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", project)
    monkeypatch.chdir(project)
    return project.resolve()


@pytest.fixture
def held(monkeypatch) -> threading.Event:
    """Every analysis (and the progress it reports) waits until the event is set."""
    release = threading.Event()
    analyse = Analyst._analyse

    def waiting(self, *args):
        assert release.wait(GUARD)
        return analyse(self, *args)

    monkeypatch.setattr(Analyst, "_analyse", waiting)
    return release


class Dead:
    """An early process that died: no first findings."""

    alive = False


def started(demo: Path, early=None) -> tuple[app.TorchReproServer, Sent]:
    server = app.build(persistent=False, early=early or InlineEarly(demo))
    sent = Sent(server)
    server.protocol.client_capabilities = client_capabilities("visual-studio-code")
    server.protocol._workspace = PyglsWorkspace(demo.as_uri(), types.TextDocumentSyncKind.Incremental, [], "utf-16")
    return server, sent


def deliver(server: app.TorchReproServer, builtin, params) -> None:
    """A notification as pygls delivers it: its own handler (the workspace's text), then ours."""
    for handler, args, _ in builtin(params):
        handler(*args)


def where(text: str, code: str) -> tuple[int, int]:
    """The 0-based (line, column) of `code` in `text`."""
    line = next(row for row, content in enumerate(text.splitlines()) if code in content)
    return line, text.splitlines()[line].index(code)


async def hover_at(server, uri: str, position: tuple[int, int]):
    params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(*position))
    return await server.protocol.fm.features[types.TEXT_DOCUMENT_HOVER](params)


async def actions_at(server, uri: str, line: int) -> list[str]:
    span = types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
    params = types.CodeActionParams(types.TextDocumentIdentifier(uri=uri), span, types.CodeActionContext(diagnostics=[]))
    return [action.title for action in await server.protocol.fm.features[types.TEXT_DOCUMENT_CODE_ACTION](params)]


@pytest.mark.asyncio
async def test_while_the_first_analysis_runs_requests_and_edits_are_answered_from_first_findings(demo: Path, held):
    server, sent = started(demo)
    data = demo / "data.py"
    uri, text = data.as_uri(), data.read_text()
    listing = where(text, "os.listdir")
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
    deliver(server, server.protocol.lsp_text_document__did_open, types.DidOpenTextDocumentParams(text_document=item))

    await sent.until(lambda: sent.of("publish"))
    assert sent.of("publish") == [("publish", uri, 1, ["TRP601"])]  # the analysis has not started
    assert [m[0] for m in sent.messages] == ["create", "publish"]  # the progress first
    sent.created[0].set_result(None)  # the client said yes: it begins
    assert sent.messages[-1][0] == "begin" and sent.messages[-1][2] == "torchrepro-lint"
    assert "**TRP601**" in (await hover_at(server, uri, listing)).contents.value
    assert any("sorted" in title for title in await actions_at(server, uri, listing[0]))

    # An edit: its first findings come at once, and a request sent before them waits for them.
    edited = "# an edit above it all\n" + text
    change = types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)],
    )
    deliver(server, server.protocol.lsp_text_document__did_change, change)
    hovered = await hover_at(server, uri, where(edited, "os.listdir"))
    assert "**TRP601**" in hovered.contents.value
    assert sent.of("publish")[-1] == ("publish", uri, 2, ["TRP601"])
    assert sent.of("end") == []

    held.set()  # the analysis of version 1 runs, is superseded, and version 2 is analysed
    await sent.until(lambda: sent.of("end"))
    assert sent.of("publish") == [
        ("publish", uri, 1, ["TRP601"]),
        ("publish", uri, 2, ["TRP601"]),
        ("publish", uri, 2, ["TRP303", "TRP601"]),  # (version 1's complete set was never shown)
    ]
    kinds = [m[0] for m in sent.messages]
    assert kinds.count("create") == kinds.count("begin") == kinds.count("end") == 1
    assert kinds.index("end") > max(i for i, kind in enumerate(kinds) if kind == "publish")
    assert all(m[2].startswith("analysing") for m in sent.of("report"))
    found = await hover_at(server, uri, where(edited, "np.random.default_rng"))
    assert "**TRP303**" in found.contents.value


@pytest.mark.asyncio
async def test_a_client_without_work_done_progress_gets_none(demo: Path):
    server, sent = started(demo)
    server.protocol.client_capabilities = types.ClientCapabilities()
    data = demo / "data.py"
    item = types.TextDocumentItem(uri=data.as_uri(), language_id="python", version=1, text=data.read_text())
    deliver(server, server.protocol.lsp_text_document__did_open, types.DidOpenTextDocumentParams(text_document=item))
    await sent.until(lambda: ("publish", data.as_uri(), 1, ["TRP303", "TRP601"]) in sent.messages)
    assert not sent.of("create") and not sent.of("begin") and not sent.of("report")


@pytest.mark.asyncio
async def test_closing_a_document_answers_a_request_waiting_for_it(demo: Path, held):
    server, sent = started(demo, Dead())  # no first findings: the document's wait for the analysis
    train = demo / "train.py"
    uri = train.as_uri()
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=train.read_text())
    deliver(server, server.protocol.lsp_text_document__did_open, types.DidOpenTextDocumentParams(text_document=item))
    waiting = asyncio.ensure_future(hover_at(server, uri, (0, 0)))
    await asyncio.sleep(0)  # (one turn of the loop: the request is waiting)
    assert not waiting.done()
    closed = types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    deliver(server, server.protocol.lsp_text_document__did_close, closed)
    assert await asyncio.wait_for(waiting, GUARD) is None
    held.set()
    assert server.analyst.idle.wait(GUARD)
