"""`torchrepro-lint server` end to end: started as a subprocess and driven over stdio by a real LSP
client (pytest-lsp, on pygls' client), as an editor drives it. Nothing here sleeps: every step
waits for the server's notifications or responses (with a generous guard against a hang)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities, make_test_lsp_client  # noqa: E402

from torchrepro_lint.cli import main as cli_main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "torchrepro_lint", "server"]
GUARD = 120  # seconds: only a hung server ever reaches it

def editor_client() -> LanguageClient:
    """pytest-lsp's client, answering `client/registerCapability` as an editor does."""
    client = make_test_lsp_client()
    client.registrations = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        ls.registrations.extend(params.registrations)

    return client


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=editor_client))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


# -- helpers --------------------------------------------------------------------------------
def demo_project(tmp_path: Path) -> Path:
    project = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", project)
    return project


def open_file(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=path.read_text() if text is None else text
            )
        )
    )
    return uri


_versions: dict[str, int] = {}


def replace_text(client: LanguageClient, uri: str, text: str) -> None:
    _versions[uri] = _versions.get(uri, 1) + 1
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=_versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def until(client: LanguageClient, condition) -> None:
    """Wait for published diagnostics or progress until `condition()` holds (checked before each
    wait, so a notification handled before we started waiting is not missed)."""

    async def wait():
        while not condition():
            await next_notification(client)

    await asyncio.wait_for(wait(), GUARD)


async def next_notification(client: LanguageClient) -> None:
    """The next publishDiagnostics or $/progress (the other's wait stays, to no effect)."""
    woken = asyncio.get_running_loop().create_future()

    def wake(_params) -> None:
        if not woken.done():
            woken.set_result(None)

    for method in (types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, types.PROGRESS):
        client.protocol.wait_for_notification(method, wake)
    await woken


async def until_logged(client: LanguageClient, pattern: re.Pattern) -> None:
    """Wait until the server has logged a message matching `pattern`."""

    async def wait():
        while not any(pattern.search(m.message) for m in client.log_messages):
            woken = asyncio.get_running_loop().create_future()
            client.protocol.wait_for_notification(types.WINDOW_LOG_MESSAGE, lambda _: woken.done() or woken.set_result(None))
            await woken

    await asyncio.wait_for(wait(), GUARD)


def analysed(client: LanguageClient) -> bool:
    """The server began progress and ended all it began: what it published before is complete
    (a file opened before its project's first analysis is done gets the findings that analysis
    cannot take back first, while the analysis reports progress)."""
    reports = client.progress_reports
    return bool(reports) and all(values and isinstance(values[-1], types.WorkDoneProgressEnd) for values in reports.values())


def codes(client: LanguageClient, uri: str) -> list[str]:
    return sorted(d.code for d in client.diagnostics.get(uri, []))


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits (UTF-16 positions), last first, as an editor does."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        before = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units = 0
        for index, character in enumerate(line):
            if units >= position.character:
                return before + index
            units += len(character.encode("utf-16-le")) // 2
        return before + len(line.rstrip("\r\n")) if position.character >= units else before

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


async def actions_at(client: LanguageClient, uri: str, line: int, only=None) -> list[types.CodeAction]:
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line, 0), end=types.Position(line, 0)),
        context=types.CodeActionContext(diagnostics=[], only=only),
    )
    return list(await client.text_document_code_action_async(params) or [])


def cli_findings(project: Path) -> list[dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        cli_main(["check", "--no-cache", "--output-format", "json", "--exit-zero", str(project)])
    return json.loads(out.getvalue())


# -- tests ----------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_same_findings_as_check_on_the_example_project(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    files = sorted(project.glob("*.py"))
    uris = [open_file(client, path) for path in files]
    await until(client, lambda: analysed(client) and all(uri in client.diagnostics for uri in uris))

    expected = sorted(
        (Path(f["filename"]).resolve().as_uri(), f["code"], f["location"]["row"] - 1, f["location"]["column"] - 1,
         f["end_location"]["row"] - 1, f["end_location"]["column"] - 1, f["message"])
        for f in cli_findings(project)
    )  # fmt: skip
    got = sorted(
        (uri, d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character, d.message)
        for uri in uris
        for d in client.diagnostics[uri]
    )
    assert len(expected) == 7
    assert got == expected
    trp201 = next(d for uri in uris for d in client.diagnostics[uri] if d.code == "TRP201")
    assert trp201.severity == types.DiagnosticSeverity.Warning
    assert trp201.source == "torchrepro-lint"
    assert trp201.code_description.href.endswith("/rules/TRP201.md")
    # The message quotes utils.py:14: it comes as related information pointing there.
    assert [(r.location.uri, r.location.range.start.line) for r in trp201.related_information] == [
        ((project / "utils.py").as_uri(), 13)
    ]


@pytest.mark.asyncio
async def test_an_unsaved_seed_in_another_file_clears_the_finding(client: LanguageClient, tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    (project / "utils.py").write_text("import random\n\n\ndef setup():\n    random.seed(0)\n")
    train = project / "train.py"
    train.write_text(
        "import torch\n\nfrom utils import setup\n\nif __name__ == '__main__':\n"
        "    setup()\n    print(torch.nn.Linear(2, 2)(torch.randn(1, 2)))\n"
    )
    train_uri = open_file(client, train)
    await until(client, lambda: codes(client, train_uri) == ["TRP101"])

    utils_uri = open_file(client, project / "utils.py")
    seeded = "import random\n\nimport torch\n\n\ndef setup():\n    random.seed(0)\n    torch.manual_seed(0)\n"
    replace_text(client, utils_uri, seeded)  # never saved: the file on disk has no torch seed
    await until(client, lambda: train_uri in client.diagnostics and codes(client, train_uri) == [])
    assert "torch.manual_seed" not in (project / "utils.py").read_text()

    replace_text(client, utils_uri, (project / "utils.py").read_text())  # undone: it comes back
    await until(client, lambda: codes(client, train_uri) == ["TRP101"])


@pytest.mark.asyncio
async def test_a_broken_buffer_is_trp000_and_the_rest_keeps_its_last_good_text(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    utils = project / "utils.py"
    train_uri = open_file(client, project / "train.py")
    utils_uri = open_file(client, utils)
    await until(client, lambda: "TRP201" in codes(client, train_uri) and codes(client, utils_uri) == ["TRP202", "TRP204"])

    replace_text(client, utils_uri, utils.read_text() + "\ndef half_typed(:\n")
    await until(client, lambda: codes(client, utils_uri) == ["TRP000"])
    (trp000,) = client.diagnostics[utils_uri]
    assert trp000.severity == types.DiagnosticSeverity.Error
    assert trp000.range.start.line == len(utils.read_text().splitlines()) + 1
    # train.py still sees the determinism claim in utils.py's last good text.
    assert "TRP201" in codes(client, train_uri)


@pytest.mark.asyncio
async def test_quick_fix_applied_then_relinted_clean(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    train = project / "train.py"
    uri = open_file(client, train)
    await until(client, lambda: "TRP201" in codes(client, uri))
    trp201 = next(d for d in client.diagnostics[uri] if d.code == "TRP201")

    actions = await actions_at(client, uri, trp201.range.start.line)
    fix = next(a for a in actions if "TRP201" in a.title and "noqa" not in a.title)
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    unsafe = [a for a in actions if a.title.endswith("(unsafe)")]
    assert all(not a.is_preferred for a in unsafe)

    fixed = apply_edits(train.read_text(), fix.edit.changes[uri])
    assert "cudnn.benchmark = False" in fixed
    replace_text(client, uri, fixed)
    await until(client, lambda: "TRP201" not in codes(client, uri))
    assert codes(client, uri) == ["TRP105", "TRP301"]


@pytest.mark.asyncio
async def test_fix_all_and_noqa(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    data = project / "data.py"
    uri = open_file(client, data)
    await until(client, lambda: codes(client, uri) == ["TRP303", "TRP601"])

    (fix_all,) = await actions_at(client, uri, 0, only=[types.CodeActionKind.SourceFixAll])
    assert fix_all.kind == "source.fixAll.torchrepro-lint"
    text = apply_edits(data.read_text(), fix_all.edit.changes[uri])
    assert "sorted(os.listdir(" in text
    replace_text(client, uri, text)
    await until(client, lambda: codes(client, uri) == ["TRP303"])

    trp303 = client.diagnostics[uri][0]
    noqa = next(a for a in await actions_at(client, uri, trp303.range.start.line) if "noqa" in a.title)
    assert noqa.title == "Add `# noqa: TRP303`"
    text = apply_edits(text, noqa.edit.changes[uri])
    assert text.splitlines()[trp303.range.start.line].endswith("  # noqa: TRP303")
    replace_text(client, uri, text)
    await until(client, lambda: codes(client, uri) == [])


@pytest.mark.asyncio
async def test_hover_shows_the_rule(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    uri = open_file(client, project / "train.py")
    await until(client, lambda: "TRP201" in codes(client, uri))
    trp201 = next(d for d in client.diagnostics[uri] if d.code == "TRP201")

    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=trp201.range.start)
    )
    assert result.contents.kind == types.MarkupKind.Markdown
    assert result.contents.value.startswith("**TRP201** `benchmark-with-determinism`")
    assert "**Why it matters.**" in result.contents.value and "**How to fix.**" in result.contents.value
    nothing = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 0))
    )
    assert nothing is None


class RawClient:
    """JSON-RPC by hand, for what a well-behaved client library refuses to send."""

    def __init__(self) -> None:
        self.server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.server.stdin.flush()

    def receive(self) -> dict:
        length = None
        while True:
            line = self.server.stdout.readline()
            assert line, "the server closed its output"
            if line == b"\r\n":
                return json.loads(self.server.stdout.read(length))
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])

    def response(self, request_id: int) -> dict:
        while True:
            message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    def initialize(self) -> None:
        self.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        assert "capabilities" in self.response(1)["result"]
        self.send({"method": "initialized", "params": {}})

    def wait(self) -> int:
        try:
            return self.server.wait(timeout=GUARD)
        finally:
            if self.server.poll() is None:
                self.server.kill()
                self.server.wait()
            self.server.stdout.close()
            if not self.server.stdin.closed:
                self.server.stdin.close()


def test_a_malformed_request_gets_an_error_and_the_server_lives_on():
    client = RawClient()
    client.initialize()
    client.send({"id": 2, "method": "textDocument/hover", "params": {"textDocument": 5, "position": "x"}})
    error = client.response(2)["error"]
    assert error["code"] == -32602  # InvalidParams
    assert "textDocument/hover" in error["message"]
    client.send({"id": 3, "method": "no/suchMethod", "params": {}})
    assert client.response(3)["error"]["code"] == -32601  # MethodNotFound
    hover = {"textDocument": {"uri": "file:///nowhere/x.py"}, "position": {"line": 0, "character": 0}}
    client.send({"id": 4, "method": "textDocument/hover", "params": hover})
    assert client.response(4) == {"jsonrpc": "2.0", "id": 4, "result": None}
    client.send({"id": 5, "method": "shutdown", "params": None})
    assert "error" not in client.response(5)
    client.send({"method": "exit", "params": None})
    assert client.wait() == 0


def test_the_server_exits_when_stdin_closes():
    client = RawClient()
    client.initialize()
    client.server.stdin.close()  # the editor died
    assert client.wait() == 0


def test_check_and_the_flake8_plugin_never_import_pygls():
    code = (
        "import sys\n"
        "from torchrepro_lint.cli import main\n"
        "import torchrepro_lint.integrations.flake8_plugin\n"
        f"main(['check', '--no-cache', '--exit-zero', '-q', {str(REPO / 'examples' / 'demo')!r}])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.asyncio
async def test_watched_files_pyproject_and_files_changed_outside_the_editor(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    uri = open_file(client, project / "train.py")
    await until(client, lambda: codes(client, uri) == ["TRP105", "TRP201", "TRP301"])
    assert [r.method for r in client.registrations] == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]

    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("seed = 1234", 'seed = 1234\nignore = ["TRP3"]'))
    changed = types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[changed]))
    await until(client, lambda: codes(client, uri) == ["TRP105", "TRP201"])

    # utils.py (not open) loses its determinism claim on disk: no TRP201, and now TRP205 (seeded, not deterministic).
    utils = project / "utils.py"
    utils.write_text(utils.read_text().replace("torch.backends.cudnn.deterministic = True", "pass"))
    changed = types.FileEvent(uri=utils.as_uri(), type=types.FileChangeType.Changed)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[changed]))
    await until(client, lambda: codes(client, uri) == ["TRP105", "TRP205"])


@pytest.mark.asyncio
async def test_the_first_analysis_shows_its_progress_until_the_complete_set(client: LanguageClient, tmp_path: Path):
    project = demo_project(tmp_path)
    uri = open_file(client, project / "data.py")
    await until(client, lambda: analysed(client) and codes(client, uri) == ["TRP303", "TRP601"])
    (reports,) = client.progress_reports.values()
    begin, *middle, end = reports
    assert isinstance(begin, types.WorkDoneProgressBegin) and begin.title == "torchrepro-lint"
    assert isinstance(end, types.WorkDoneProgressEnd)
    assert all(isinstance(report, types.WorkDoneProgressReport) for report in middle)
    assert all(re.match(r"analysing (the project|\d+/4 files)", report.message) for report in [begin, *middle])
    percentages = [report.percentage for report in [begin, *middle]]
    assert percentages == sorted(percentages) and percentages[-1] < 100

    # The model is built: an edit is analysed at once, without progress.
    replace_text(client, uri, (project / "data.py").read_text().replace("os.listdir(root)", "sorted(os.listdir(root))"))
    await until(client, lambda: codes(client, uri) == ["TRP303"])
    assert len(client.progress_reports) == 1


WARM_LOG = re.compile(r"analysed 4 files of .* in [\d.]+ s: (\d+) parsed, (\d+) entries read from the cache on disk")


@pytest.mark.asyncio
async def test_a_second_server_on_the_same_clone_takes_its_first_analysis_from_the_cache_the_first_left(tmp_path: Path):
    """The first server's analysis of the files as saved goes to `.torchrepro_lint_cache/`; the
    next one started on the same project reads it back instead of parsing (its log says what it
    read: MemoryCache.disk_reads)."""
    project = demo_project(tmp_path)
    said = []
    for _ in range(2):
        editor = editor_client()
        await editor.start_io(*SERVER, cwd=project)
        try:
            await editor.initialize_session(
                types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=project.as_uri())
            )
            uri = open_file(editor, project / "train.py")
            await until(editor, lambda: analysed(editor) and codes(editor, uri) == ["TRP105", "TRP201", "TRP301"])
            said += [m.message for m in editor.log_messages if WARM_LOG.search(m.message)]
        finally:
            await editor.shutdown_session()
            await editor.stop()
    first, second = (WARM_LOG.search(message).groups() for message in said)
    assert first == ("4", "0")  # cold: every file parsed, nothing on disk
    assert (project / ".torchrepro_lint_cache").is_dir()
    parsed, read = second
    assert parsed == "0" and int(read) > 0


@pytest.mark.asyncio
async def test_a_cold_project_is_analysed_as_check_does_in_a_child_then_kept_by_the_server(client: LanguageClient, tmp_path: Path):
    """With no cache and enough files to share out, the first analysis runs in a child on every
    core (server/cold_start.py) and writes the cache; the server's own analysis reads it, and
    edits are analysed by the server's model."""
    from torchrepro_lint.server import cold_start

    if cold_start.cores() < 2 or not sys.platform.startswith("linux"):
        pytest.skip("one core, or not Linux: the server analyses in its thread")
    project = tmp_path / "many"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    for number in range(cold_start.MIN_FILES + 6):
        (project / f"helper_{number}.py").write_text(f"import random\n\n\ndef pick_{number}():\n    return random.random()\n")
    train = project / "train.py"
    train.write_text(
        "import os\n\nimport torch\n\nfrom helper_1 import pick_1\n\n"
        "if __name__ == '__main__':\n    print(pick_1(), torch.randn(2), os.listdir('.')[0])\n"
    )
    uri = open_file(client, train)
    await until(client, lambda: analysed(client) and uri in client.diagnostics)
    logs = [m.message for m in client.log_messages]
    assert any(re.search(r"in 2 processes: \d+ parsed; written to the cache on disk", m) for m in logs), logs
    # The child's findings were every open document's: the progress ended with them, and the
    # server's own model is then built from the cache the child wrote
    await until_logged(client, re.compile(r": 0 parsed, \d+ entries read from the cache on disk"))
    expected = sorted((f["code"], f["location"]["row"] - 1) for f in cli_findings(project) if f["filename"].endswith("train.py"))
    assert sorted((d.code, d.range.start.line) for d in client.diagnostics[uri]) == expected
    assert "TRP101" in codes(client, uri) and "TRP601" in codes(client, uri)

    replace_text(client, uri, train.read_text().replace("os.listdir('.')[0]", "sorted(os.listdir('.'))[0]"))
    await until(client, lambda: "TRP601" not in codes(client, uri))
    assert "TRP101" in codes(client, uri)
