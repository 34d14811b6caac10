"""Notebooks in `torchrepro-lint server` end to end, through LSP notebook document sync
(`notebookDocument/didOpen|didChange|didSave|didClose`), driven by pytest-lsp's client as VS Code
drives a server: each cell is a text document with its own URI, and diagnostics, code actions
and hover are per cell. What the server finds must be what `check` finds in the same .ipynb."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from notebooks.notebook_support import notebook  # noqa: E402
from test_language_server import SERVER, actions_at, apply_edits, codes, editor_client, open_file, replace_text, until  # noqa: E402
from torchrepro_lint.cli import main as cli_main  # noqa: E402

CODE, MARKUP = types.NotebookCellKind.Code, types.NotebookCellKind.Markup


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, client_factory=editor_client))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    capabilities = client_capabilities("visual-studio-code")
    # VS Code declares notebook sync since LSP 3.17 (the recorded capabilities are older).
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri())
    )
    lsp_client.server_capabilities = result.capabilities
    yield
    await lsp_client.shutdown_session()


# The notebook the tests open: a markdown cell first, so cell numbers count it as Jupyter does.
IMPORTS = (
    "import torch\nfrom torch import nn\n%matplotlib inline\n"
    "torch.use_deterministic_algorithms(True)\ntorch.backends.cudnn.benchmark = True"
)
MODEL = "classifier = nn.Sequential(nn.Linear(16, 8), nn.ReLU())\nfeatures = torch.randn(32, 16)"
LOOP = "%%time\nfor epoch in range(2):\n    classifier(features).sum().backward()"
CELLS = [("markdown", "# Fitting a small classifier"), ("code", IMPORTS), ("code", MODEL), ("code", LOOP)]


class OpenNotebook:
    """A notebook as the client holds it: its cells' URIs and text, sent as VS Code sends them."""

    def __init__(self, client: LanguageClient, path: Path, cells: list[tuple[str, str]]) -> None:
        self.client, self.uri, self.version = client, path.as_uri(), 1
        # VS Code's cell URIs: the notebook's path, the cell in the fragment (here with a `%3D`).
        self.cell_uris = [f"vscode-notebook-cell:{path.as_posix()}#W{i}sZmlsZQ%3D%3D" for i in range(len(cells))]
        self.kinds = [kind for kind, _ in cells]
        self.texts = [text for _, text in cells]
        self.cell_versions = [1] * len(cells)
        documents = [self._item(i) for i in range(len(cells))]
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[self._cell(i) for i in range(len(cells))],
                ),
                cell_text_documents=documents,
            )
        )

    def _cell(self, index: int) -> types.NotebookCell:
        return types.NotebookCell(kind=CODE if self.kinds[index] == "code" else MARKUP, document=self.cell_uris[index])

    def _item(self, index: int) -> types.TextDocumentItem:
        language = "python" if self.kinds[index] == "code" else "markdown"
        return types.TextDocumentItem(
            uri=self.cell_uris[index], language_id=language, version=self.cell_versions[index], text=self.texts[index]
        )

    @property
    def code_uris(self) -> list[str]:
        return [uri for uri, kind in zip(self.cell_uris, self.kinds) if kind == "code"]

    def _send(self, cells: types.NotebookDocumentCellChanges) -> None:
        self.version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri),
                change=types.NotebookDocumentChangeEvent(cells=cells),
            )
        )

    def edit(self, index: int, edits: list[types.TextEdit]) -> None:
        """Apply text edits to a cell, sent as incremental changes (VS Code sends them so)."""
        changes = []
        for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            self.texts[index] = apply_edits(self.texts[index], [edit])
            changes.append(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
        self.cell_versions[index] += 1
        document = types.VersionedTextDocumentIdentifier(uri=self.cell_uris[index], version=self.cell_versions[index])
        self._send(
            types.NotebookDocumentCellChanges(
                text_content=[types.NotebookDocumentCellContentChanges(document=document, changes=changes)]
            )
        )

    def replace(self, index: int, text: str) -> None:
        lines = self.texts[index].split("\n")
        whole = types.Range(start=types.Position(0, 0), end=types.Position(len(lines) - 1, len(lines[-1])))
        self.edit(index, [types.TextEdit(range=whole, new_text=text)])

    def delete(self, index: int) -> str:
        uri = self.cell_uris.pop(index)
        del self.kinds[index], self.texts[index], self.cell_versions[index]
        self._send(
            types.NotebookDocumentCellChanges(
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=index, delete_count=1),
                    did_close=[types.TextDocumentIdentifier(uri=uri)],
                )
            )
        )
        return uri

    def save(self, path: Path) -> None:
        path.write_text(notebook(*[(k, t) for k, t in zip(self.kinds, self.texts)]), encoding="utf-8")
        self.client.notebook_document_did_save(
            types.DidSaveNotebookDocumentParams(notebook_document=types.NotebookDocumentIdentifier(uri=self.uri))
        )

    def close(self) -> None:
        self.client.notebook_document_did_close(
            types.DidCloseNotebookDocumentParams(
                notebook_document=types.NotebookDocumentIdentifier(uri=self.uri),
                cell_text_documents=[types.TextDocumentIdentifier(uri=uri) for uri in self.cell_uris],
            )
        )


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "fixture"\n')
    return root


def cli_findings(path: Path) -> list[dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        cli_main(["check", "--no-cache", "--output-format", "json", "--exit-zero", str(path)])
    return json.loads(out.getvalue())


def all_codes(client: LanguageClient, opened: OpenNotebook) -> list[str]:
    return sorted(code for uri in opened.code_uris for code in codes(client, uri))


def every_cell_published(client: LanguageClient, opened: OpenNotebook):
    return lambda: all(uri in client.diagnostics for uri in opened.code_uris)


# -- tests ----------------------------------------------------------------------------------
def test_the_server_asks_for_jupyter_notebooks_python_and_markdown_cells(client: LanguageClient):
    sync = client.server_capabilities.notebook_document_sync
    (selector,) = sync.notebook_selector
    assert selector.notebook.notebook_type == "jupyter-notebook"
    assert [cell.language for cell in selector.cells] == ["python", "markdown"]
    assert sync.save is True


@pytest.mark.asyncio
@pytest.mark.parametrize("saved", [True, False], ids=["file-on-disk", "unsaved-notebook"])
async def test_cells_get_the_findings_check_reports_in_the_ipynb(client: LanguageClient, tmp_path: Path, saved: bool):
    path = project(tmp_path) / "fit.ipynb"
    if saved:  # the server lints the file's own text
        path.write_text(notebook(*CELLS), encoding="utf-8")
    opened = OpenNotebook(client, path, CELLS)
    await until(client, every_cell_published(client, opened))
    if not saved:  # the server linted the cells it was sent; check reads them from the file
        path.write_text(notebook(*CELLS), encoding="utf-8")

    findings = cli_findings(path)
    assert sorted(f["code"] for f in findings) == ["TRP101", "TRP201"]
    expected = sorted(
        (opened.cell_uris[f["cell"] - 1], f["code"], f["location"]["row"] - 1, f["location"]["column"] - 1,
         f["end_location"]["row"] - 1, f["end_location"]["column"] - 1, f["message"])
        for f in findings
    )  # fmt: skip
    got = sorted(
        (uri, d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character, d.message)
        for uri in opened.cell_uris
        for d in client.diagnostics.get(uri, [])
    )
    assert got == expected
    assert opened.cell_uris[0] not in client.diagnostics  # markdown: nothing published
    # TRP101 is at the import, in cell 2, and quotes the draw in cell 3 as `check` does.
    (trp101,) = [d for d in client.diagnostics[opened.cell_uris[1]] if d.code == "TRP101"]
    assert "fit.ipynb:cell 3:2" in trp101.message


@pytest.mark.asyncio
async def test_a_seed_typed_into_a_cell_clears_the_finding_in_another(client: LanguageClient, tmp_path: Path):
    opened = OpenNotebook(client, project(tmp_path) / "fit.ipynb", CELLS)
    imports, model = opened.cell_uris[1], opened.cell_uris[2]
    await until(client, lambda: codes(client, imports) == ["TRP101", "TRP201"] and codes(client, model) == [])

    start = types.Position(0, 0)
    opened.edit(2, [types.TextEdit(range=types.Range(start=start, end=start), new_text="torch.manual_seed(0)\n")])
    await until(client, lambda: codes(client, imports) == ["TRP201"])
    assert codes(client, model) == []


@pytest.mark.asyncio
async def test_quick_fix_noqa_and_fix_all_on_a_cell(client: LanguageClient, tmp_path: Path):
    opened = OpenNotebook(client, project(tmp_path) / "fit.ipynb", CELLS)
    imports = opened.cell_uris[1]
    await until(client, lambda: codes(client, imports) == ["TRP101", "TRP201"])
    trp201 = next(d for d in client.diagnostics[imports] if d.code == "TRP201")

    actions = await actions_at(client, imports, trp201.range.start.line)
    fix = next(a for a in actions if "TRP201" in a.title and "noqa" not in a.title)
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    assert fix.diagnostics[0].range == trp201.range
    assert list(fix.edit.changes) == [imports]  # the cell's own document
    noqa = next(a for a in actions if a.title == "Add `# noqa: TRP201`")
    (fix_all,) = await actions_at(client, imports, 0, only=[types.CodeActionKind.SourceFixAll])
    assert fix_all.edit.changes == fix.edit.changes  # TRP201 is the cell's only safe fix

    with_noqa = apply_edits(IMPORTS, noqa.edit.changes[imports])
    assert with_noqa.splitlines()[4] == "torch.backends.cudnn.benchmark = True  # noqa: TRP201"
    opened.edit(1, fix.edit.changes[imports])
    assert opened.texts[1] == IMPORTS.replace("benchmark = True", "benchmark = False")
    await until(client, lambda: codes(client, imports) == ["TRP101"])


@pytest.mark.asyncio
async def test_the_seed_fix_goes_after_the_imports_of_a_cell_without_a_final_newline(
    client: LanguageClient, tmp_path: Path
):
    cells = [("code", "import torch"), ("code", MODEL.replace("nn.", "torch.nn."))]
    opened = OpenNotebook(client, project(tmp_path) / "seed.ipynb", cells)
    imports, model = opened.cell_uris
    await until(client, lambda: codes(client, imports) == ["TRP101"] and codes(client, model) == [])

    actions = await actions_at(client, imports, 0)
    seed = next(a for a in actions if "TRP101" in a.title and a.title.endswith("(unsafe)"))
    assert list(seed.edit.changes) == [imports]
    opened.edit(0, seed.edit.changes[imports])
    assert opened.texts[0] == "import torch\ntorch.manual_seed(0)"
    await until(client, lambda: codes(client, imports) == [])


@pytest.mark.asyncio
async def test_a_cell_that_does_not_parse_is_trp000_and_the_rest_is_linted(client: LanguageClient, tmp_path: Path):
    opened = OpenNotebook(client, project(tmp_path) / "fit.ipynb", CELLS)
    imports, model, loop = opened.code_uris
    await until(client, lambda: codes(client, imports) == ["TRP101", "TRP201"])

    opened.replace(3, "for epoch in range(2:\n    pass")
    await until(client, lambda: codes(client, loop) == ["TRP000"])
    (trp000,) = client.diagnostics[loop]
    assert trp000.message.startswith("cell 4 does not parse")
    assert trp000.range.start.line == 0
    assert codes(client, imports) == ["TRP101", "TRP201"] and codes(client, model) == []


@pytest.mark.asyncio
async def test_hover_on_a_cell_diagnostic(client: LanguageClient, tmp_path: Path):
    opened = OpenNotebook(client, project(tmp_path) / "fit.ipynb", CELLS)
    imports = opened.cell_uris[1]
    await until(client, lambda: codes(client, imports) == ["TRP101", "TRP201"])

    position = next(d for d in client.diagnostics[imports] if d.code == "TRP201").range.start
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=imports), position=position)
    )
    assert result.contents.value.startswith("**TRP201** `benchmark-with-determinism`")


@pytest.mark.asyncio
async def test_an_unsaved_seed_in_a_module_counts_for_the_notebook(client: LanguageClient, tmp_path: Path):
    root = project(tmp_path)
    utils = root / "utils.py"
    utils.write_text("import random\n\n\ndef setup():\n    random.seed(0)\n")
    cells = [("code", "import torch\nfrom utils import setup\nsetup()"), ("code", "x = torch.randn(2)")]
    opened = OpenNotebook(client, root / "uses_utils.ipynb", cells)
    await until(client, lambda: all_codes(client, opened) == ["TRP101"])

    utils_uri = open_file(client, utils)
    replace_text(client, utils_uri, utils.read_text() + "    import torch\n    torch.manual_seed(0)\n")
    await until(client, lambda: all_codes(client, opened) == [])
    replace_text(client, utils_uri, utils.read_text())  # undone, never saved: it comes back
    await until(client, lambda: all_codes(client, opened) == ["TRP101"])


@pytest.mark.asyncio
async def test_deleting_a_cell_saving_and_closing(client: LanguageClient, tmp_path: Path):
    path = project(tmp_path) / "fit.ipynb"
    opened = OpenNotebook(client, path, CELLS)
    imports, model = opened.cell_uris[1], opened.cell_uris[2]
    await until(client, lambda: codes(client, imports) == ["TRP101", "TRP201"])

    # The imports cell goes: its diagnostics are cleared, and nothing imports torch any more.
    assert opened.delete(1) == imports
    await until(client, lambda: codes(client, imports) == [])
    assert all_codes(client, opened) == []

    opened.save(path)
    assert [f["code"] for f in cli_findings(path)] == []
    opened.replace(1, "import torch\n" + MODEL.replace("nn.", "torch.nn."))
    await until(client, lambda: codes(client, model) == ["TRP101"])

    opened.close()
    await until(client, lambda: codes(client, model) == [])


@pytest.mark.asyncio
async def test_the_notebooks_json_opened_as_text_is_left_alone(client: LanguageClient, tmp_path: Path):
    path = project(tmp_path) / "fit.ipynb"
    path.write_text(notebook(*CELLS), encoding="utf-8")
    opened = OpenNotebook(client, path, CELLS)
    await until(client, lambda: codes(client, opened.cell_uris[1]) == ["TRP101", "TRP201"])

    # An editor that also opens the file as JSON text: no diagnostics at rows of cells there,
    # and closing that text leaves the notebook open.
    json_uri = open_file(client, path)
    start = types.Position(0, 0)
    opened.edit(2, [types.TextEdit(range=types.Range(start=start, end=start), new_text="torch.manual_seed(0)\n")])
    await until(client, lambda: codes(client, opened.cell_uris[1]) == ["TRP201"])
    assert json_uri not in client.diagnostics  # notifications are handled in order: none came

    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=json_uri)))
    opened.replace(2, MODEL)
    await until(client, lambda: codes(client, opened.cell_uris[1]) == ["TRP101", "TRP201"])
