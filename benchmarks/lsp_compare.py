"""Whether `torchrepro-lint server` reports what `torchrepro-lint check` reports on a repository:
every .py file is opened in the server, and its published diagnostics (code, range, message) are
compared with `check --no-cache --output-format json` run from the same directory.

    python benchmarks/lsp_compare.py /tmp/real/pytorch-image-models

The repository is copied to a temporary directory first (as lsp_latency.py does). Standard
library only. Exit status 0 when both agree, 1 with the differences printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_latency import CAPABILITIES, Client, copy_project  # noqa: E402


def main() -> int:
    repository = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory(prefix="trl-lsp-compare-") as temporary:
        project = Path(temporary) / repository.name
        copy_project(repository, project)
        report = subprocess.run(
            [sys.executable, "-m", "torchrepro_lint", "check", "--no-cache", "--exit-zero", "--output-format", "json", "."],
            cwd=project, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        expected = sorted(
            ((project / f["filename"]).resolve().as_uri(), f["code"], f["location"]["row"] - 1, f["location"]["column"] - 1, f["message"])
            for f in json.loads(report)
        )  # fmt: skip
        client = Client([sys.executable, "-m", "torchrepro_lint", "server"], project)
        client.request("initialize", {"processId": os.getpid(), "rootUri": project.as_uri(), "capabilities": CAPABILITIES})
        client.send({"method": "initialized", "params": {}})
        files = sorted(p for p in project.rglob("*.py"))
        for path in files:  # one at a time, reading as we go: pipes are not endless
            uri = path.as_uri()
            client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": path.read_text(encoding="utf-8")}}})
            client.wait_for_diagnostics(uri, 1)
        # Every file has been opened; once the server's progress has ended (files opened before
        # the first analysis was done first get what is known without it), the last publish of
        # each holds the final state.
        client.wait_until_complete(files[-1].as_uri())
        # A cold project's complete set is the child's, as `check` finds it (server/cold_start.py):
        # the server's own model, built after from the cache, publishes again where it differs,
        # before it logs what it read
        client.wait_for_log("entries read from the cache on disk")
        published = client.published
        client.request("shutdown", None)
        client.send({"method": "exit", "params": None})
        client.process.wait()
        got = sorted(
            (uri, d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"], d["message"])
            for uri, diagnostics in published.items()
            for d in diagnostics
        )
    print(f"{len(files)} files; check: {len(expected)} findings; server: {len(got)} diagnostics")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    for item in missing:
        print("only in check:", item)
    for item in extra:
        print("only in the server:", item)
    return 0 if not missing and not extra else 1


if __name__ == "__main__":
    sys.exit(main())
