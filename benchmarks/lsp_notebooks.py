"""Whether `torchrepro-lint server` reports in each notebook cell what `torchrepro-lint check`
reports in the .ipynb file: every notebook of a repository is opened through LSP notebook
document sync (`notebookDocument/didOpen`, its cells sent as VS Code sends them: Python code
cells and markdown cells, not raw ones), and the diagnostics published per cell (code, range,
message) are compared with `check --no-cache --output-format json`, whose rows count in cells.

    python benchmarks/lsp_notebooks.py /tmp/real/deep-learning-v2-pytorch [NOTEBOOK ...]

Two passes, each with a fresh server: with the notebooks on disk (the server lints the file's
own text while its code cells are the editor's), then with them removed after `check` ran (the
server lints the JSON it builds from the cells, as for an unsaved notebook). The repository is
copied to a temporary directory first. Standard library only. Exit status 0 when every pass
agrees with `check`, 1 with the differences printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_latency import Client, copy_project  # noqa: E402

CAPABILITIES = {"notebookDocument": {"synchronization": {}}}


def cells_of(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell, in notebook order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(cell["cell_type"], "".join(cell.get("source", ""))) for cell in cells]


def cell_uri(path: Path, index: int) -> str:
    return f"vscode-notebook-cell:{path.as_posix()}#W{index}sZmlsZQ%3D%3D"  # VS Code's form


def open_notebook(client: Client, path: Path, cells: list[tuple[str, str]]) -> list[str]:
    """Send didOpen as VS Code does for a server asking for Python and markdown cells; returns
    the URIs of the code cells sent."""
    sent = [(i, kind, text) for i, (kind, text) in enumerate(cells) if kind in ("code", "markdown")]
    notebook = {
        "uri": path.as_uri(),
        "notebookType": "jupyter-notebook",
        "version": 1,
        "cells": [{"kind": 2 if kind == "code" else 1, "document": cell_uri(path, i)} for i, kind, _ in sent],
    }
    documents = [
        {"uri": cell_uri(path, i), "languageId": "python" if kind == "code" else "markdown", "version": 1, "text": text}
        for i, kind, text in sent
    ]
    client.send({"method": "notebookDocument/didOpen", "params": {"notebookDocument": notebook, "cellTextDocuments": documents}})
    return [cell_uri(path, i) for i, kind, _ in sent if kind == "code"]


def server_diagnostics(project: Path, notebooks: dict[Path, list[tuple[str, str]]]) -> list[tuple]:
    client = Client([sys.executable, "-m", "torchrepro_lint", "server"], project)
    client.request("initialize", {"processId": os.getpid(), "rootUri": project.as_uri(), "capabilities": CAPABILITIES})
    client.send({"method": "initialized", "params": {}})
    published: dict[str, list] = {}
    for path, cells in notebooks.items():  # one at a time, reading as we go: pipes are not endless
        waiting = set(open_notebook(client, path, cells))
        while waiting:
            message = client.receive()
            if message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                published[params["uri"]] = params["diagnostics"]
                waiting.discard(params["uri"])
    client.request("shutdown", None)
    client.send({"method": "exit", "params": None})
    client.process.wait()
    return sorted(
        (uri, d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"], d["message"])
        for uri, diagnostics in published.items()
        for d in diagnostics
    )


def compare(name: str, expected: list[tuple], got: list[tuple]) -> bool:
    print(f"{name}: check: {len(expected)} findings; server: {len(got)} diagnostics")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    for item in missing:
        print("  only in check:", item)
    for item in extra:
        print("  only in the server:", item)
    return not missing and not extra


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("notebooks", nargs="*", help="notebooks to open, relative to the repository (default: all)")
    args = parser.parse_args()
    repository = args.repository.resolve()
    with tempfile.TemporaryDirectory(prefix="trl-lsp-notebooks-") as temporary:
        project = Path(temporary) / repository.name
        copy_project(repository, project)
        chosen = [repository / n for n in args.notebooks] or sorted(repository.rglob("*.ipynb"))
        notebooks: dict[Path, list] = {}
        for source in chosen:
            relative = source.relative_to(repository)
            if any(part.startswith(".") for part in relative.parts):
                continue  # .ipynb_checkpoints
            (project / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, project / relative)
            notebooks[project / relative] = cells_of(source)
        report = subprocess.run(
            [sys.executable, "-m", "torchrepro_lint", "check", "--no-cache", "--exit-zero", "--output-format", "json",
             *[str(p.relative_to(project)) for p in notebooks]],
            cwd=project, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        expected = sorted(
            (cell_uri((project / f["filename"]).resolve(), f["cell"] - 1), f["code"], f["location"]["row"] - 1,
             f["location"]["column"] - 1, f["message"])
            for f in json.loads(report)
        )  # fmt: skip
        with_raw = [p for p, cells in notebooks.items() if any(kind == "raw" for kind, _ in cells)]
        print(f"{len(notebooks)} notebooks ({len(with_raw)} with raw cells, which the editor does not send)")
        agree = compare("files on disk", expected, server_diagnostics(project, notebooks))
        for path in notebooks:
            path.unlink()  # now the server has only the cells the editor sent
        agree = compare("built from the cells", expected, server_diagnostics(project, notebooks)) and agree
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
