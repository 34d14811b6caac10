"""How long `torchrepro-lint server` takes from its start to the first diagnostics of a file, and
to the complete set, cold (no `.torchrepro_lint_cache/`) and warm (the cache a first server left).

    python benchmarks/lsp_open.py /tmp/real/pytorch-image-models train.py timm/models/resnet.py --runs 3

Standard library only. For each run, the repository's .py files and pyproject.toml are copied to
a temporary directory (as lsp_latency.py does; nothing is written to yours). Cold: each file is
opened in a server started on a fresh copy. Warm: a first server opens the file and waits for its
complete set (which leaves the cache), then a second server, timed, is started on that copy.
The client says it supports work-done progress: the complete set is the one published before
the server ends its progress (a server that sends none: its first diagnostics are complete).
Prints, per file and mode, the min and median over the runs of: `first_s`, from starting the
server process to the first publishDiagnostics of the file; `complete_s`, to the end of the
progress; `initialize_s`, to the answer to `initialize` (the server's own start: Python, its
imports); how many diagnostics the first publication had of the complete set's; and, asked
right after the first diagnostics (while the project is still analysed, where it is), how long
a hover and a code-action request took to be answered.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_latency import CAPABILITIES, Client, copy_project  # noqa: E402


def open_once(project: Path, name: str, progress: bool = True) -> dict:
    """Start a server on `project`, open `name`, and time its diagnostics until they are complete."""
    started = time.perf_counter()
    client = Client([sys.executable, "-m", "torchrepro_lint", "server"], project)
    client.request("initialize", {"processId": os.getpid(), "rootUri": project.as_uri(), "capabilities": CAPABILITIES})
    initialized = time.perf_counter() - started
    client.send({"method": "initialized", "params": {}})
    path = project / name
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
    first = client.wait_for_diagnostics(uri, 1)
    first_s = time.perf_counter() - started
    # While the project is still analysed: how long the editor waits for a hover and for code actions.
    answers_ms, analysing = [], bool(client.progress_open)
    for method, params in (
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}),
    ):
        asked = time.perf_counter()
        client.request(method, params)
        answers_ms.append((time.perf_counter() - asked) * 1000)
    complete = client.wait_until_complete(uri) if progress else first
    complete_s = time.perf_counter() - started
    client.request("shutdown", None)
    client.send({"method": "exit", "params": None})
    client.process.wait()
    return {
        "initialize_s": initialized, "first_s": first_s, "complete_s": complete_s,
        "first_count": len(first), "complete_count": len(complete), "log": client.log,
        "answers_ms": answers_ms, "answered_while_analysing": analysing,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("files", nargs="+", help="files to open, relative to the repository")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="cold,warm", help="cold, warm or both (comma-separated)")
    parser.add_argument("--no-progress", action="store_true", help="the server sends no progress (versions before it did)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results: dict = {"load_before": os.getloadavg()}
    for mode in args.modes.split(","):
        for name in args.files:
            runs = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(prefix="trl-lsp-open-") as temporary:
                    project = Path(temporary) / args.repository.name
                    copy_project(args.repository.resolve(), project)
                    if mode == "warm":
                        open_once(project, name, not args.no_progress)  # leaves .torchrepro_lint_cache/ in the copy
                    runs.append(open_once(project, name, not args.no_progress))
            figures = {
                key: {"min": round(min(r[key] for r in runs), 2), "median": round(statistics.median(r[key] for r in runs), 2)}
                for key in ("initialize_s", "first_s", "complete_s")
            }
            figures["partial"] = [f"{r['first_count']}/{r['complete_count']}" for r in runs]
            figures["answers_ms"] = [[round(ms, 1) for ms in r["answers_ms"]] for r in runs]
            figures["answered_while_analysing"] = [r["answered_while_analysing"] for r in runs]
            figures["log"] = runs[-1]["log"]
            results[f"{mode} {name}"] = figures
            print(f"{mode} {name}: initialize min {figures['initialize_s']['min']} s; first diagnostics min {figures['first_s']['min']} s, median {figures['first_s']['median']} s; "
                  f"complete min {figures['complete_s']['min']} s, median {figures['complete_s']['median']} s; "
                  f"first/complete diagnostics {' '.join(figures['partial'])}; hover / code action answered in "
                  f"{figures['answers_ms']} ms (while the project was analysed: {figures['answered_while_analysing']})")  # fmt: skip
            for line in figures["log"]:
                print("   ", line)
    results["load_after"] = os.getloadavg()
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
