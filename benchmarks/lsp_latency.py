"""How long `torchrepro-lint server` takes from a `textDocument/didChange` to the
`textDocument/publishDiagnostics` of that version, after warm-up, and how much memory it holds.

Standard library only; the server speaks JSON-RPC over its stdin/stdout as to an editor. The
repository is copied (its .py files and pyproject.toml) to a temporary directory first, so the
server's cache goes there and nothing is written to yours.

    python benchmarks/lsp_latency.py /tmp/real/pytorch-image-models train.py timm/models/resnet.py

For each file: open it, wait for its first diagnostics (`open_s`; the first file's project is
analysed meanwhile, cold) and its complete ones (`complete_s`: the server's progress has ended),
make `--warmup` edits, then `--edits` timed edits. An edit inserts a line at the end of
the file (`--kind comment`: `# edit N`, the text changes but not the program; `--kind code`:
`edit_N = N`, a new assignment, which nothing reads, so the IR stays the same (lowering.live);
`--kind draw`: `edit_N = torch.randn(N)`, a draw the program model tracks, for a file that
imports torch: the module's IR changes, the refs after the line shift, and the programs that ran
what changed run again; `--kind typing`: the first edit inserts `edit = torch.randn(0)`, and each
later one types another number over the last, as a user typing inside one line: the IR stays the
same, and the programs' facts are taken again for the new module objects); `--where middle` inserts them, indented as it is, before the simple
statement nearest the file's middle (usually inside a function; in timm's resnet.py, at the top
level; `--where function`: of those inside a function) instead of at the end; `--where def:NAME`
inserts them before the first statement of the first function named NAME (`def:forward`: where a
model file's own draws go, which no program runs at import).
Prints median and p90 in milliseconds per file, the server's peak RSS (VmHWM) and its RSS after
the edits (VmRSS), and the load
average before and after (the timings are wall-clock: a busy machine inflates them). Beside
them, the CPU time the server's threads used from each `didChange` to its diagnostics (Linux:
/proc schedstat), which a busy machine inflates much less: on a shared 2-core machine wall
medians of the same code varied by 20-40 ms between runs.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# Work-done progress: the server shows its first analysis of a project, and publishes a file's
# complete set of findings by its end (before it, a file may have the findings known first).
CAPABILITIES = {"window": {"workDoneProgress": True}}


class Client:
    def __init__(self, command: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0
        self.progress_open: set = set()  # progress tokens the server created and has not ended
        self.published: dict = {}  # URI -> the diagnostics last published
        self.log: list[str] = []  # window/logMessage

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self) -> dict:
        length = None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line == b"\r\n":
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message = json.loads(self.process.stdout.read(length))
        method = message.get("method")
        if method == "window/workDoneProgress/create":
            self.progress_open.add(message["params"]["token"])
        elif method == "$/progress" and message["params"]["value"].get("kind") == "end":
            self.progress_open.discard(message["params"]["token"])
        elif method == "textDocument/publishDiagnostics":
            self.published[message["params"]["uri"]] = message["params"]["diagnostics"]
        elif method == "window/logMessage":
            self.log.append(message["params"]["message"])
        if method is not None and "id" in message:  # a request of the server's: yes
            self.send({"id": message["id"], "result": None})
        return message

    def wait_until_complete(self, uri: str) -> list:
        """The complete diagnostics of `uri`: published, and no progress open."""
        while uri not in self.published or self.progress_open:
            self.receive()
        return self.published[uri]

    def wait_for_log(self, fragment: str) -> None:
        """Until the server has logged a message holding `fragment`."""
        while not any(fragment in message for message in self.log):
            self.receive()

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                return message

    def wait_for_diagnostics(self, uri: str, version: int) -> list:
        while True:
            message = self.receive()
            if message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                if params["uri"] == uri and params.get("version") == version:
                    return params["diagnostics"]

    def cpu_ns(self) -> int:
        """CPU time the server's threads have run so far, in nanoseconds (/proc/PID/task/*/schedstat:
        precise where the clock-tick counts of /proc/PID/stat are 10 ms steps)."""
        total = 0
        for stat in Path(f"/proc/{self.process.pid}/task").glob("*/schedstat"):
            try:
                total += int(stat.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # (a thread that ended meanwhile)
        return total

    def memory_mib(self, field: str) -> float:
        """VmHWM (peak resident memory) or VmRSS (now) of the server process."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")


def copy_project(source: Path, target: Path) -> None:
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if path.suffix == ".py" or path.name == "pyproject.toml":
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / relative)


def middle_statement(text: str, in_function: bool = False) -> tuple[int, str]:
    """(0-based line, indentation) of the simple statement nearest the middle of the file that
    starts its line (`in_function`: of those inside a function): a line inserted before it, as
    indented, is a statement of the same block."""
    lines = text.split("\n")
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
    tree = ast.parse(text)
    scopes = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))] if in_function else [tree]
    candidates = [
        node for scope in scopes for node in ast.walk(scope)
        if isinstance(node, simple) and not lines[node.lineno - 1][: node.col_offset].strip()
    ]
    chosen = min(candidates, key=lambda node: (abs(node.lineno - len(lines) / 2), node.lineno))
    return chosen.lineno - 1, lines[chosen.lineno - 1][: chosen.col_offset]


INSERTED = {"comment": "# edit {number}", "code": "edit_{number} = {number}", "draw": "edit_{number} = torch.randn({number})"}


TYPED = "edit = torch.randn("


def inserted_change(line: int, indent: str, kind: str, number: int) -> dict:
    inserted = indent + INSERTED[kind].format(number=number) + "\n"
    return {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "text": inserted}


def typed_change(line: int, indent: str, number: int) -> dict:
    """`--kind typing`: the line `edit = torch.randn(0)` inserted, then its number typed over."""
    if number == 0:
        return {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "text": f"{indent}{TYPED}0)\n"}
    start = len(indent) + len(TYPED)
    end = start + len(str(number - 1))
    return {"range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}, "text": str(number)}


def first_statement_of(text: str, name: str) -> tuple[int, str]:
    """(0-based line, indentation) of the first statement of the first function called `name`."""
    lines = text.split("\n")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = node.body[0]
            return first.lineno - 1, lines[first.lineno - 1][: first.col_offset]
    raise SystemExit(f"no function named {name!r}")


def insertion_point(text: str, where: str) -> tuple[int, str]:
    if where == "end":
        return len(text.split("\n")) - 1, ""
    if where.startswith("def:"):
        return first_statement_of(text, where[4:])
    return middle_statement(text, where == "function")


def where_choice(value: str) -> str:
    if value in ("end", "middle", "function") or value.startswith("def:") and value[4:].isidentifier():
        return value
    raise argparse.ArgumentTypeError("end, middle, function or def:NAME")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("files", nargs="+", help="files to edit, relative to the repository")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--kind", choices=("comment", "code", "draw", "typing"), default="comment")
    parser.add_argument("--where", type=where_choice, default="end",
                        help="insert at the end of the file, or before a simple statement in its middle (function: inside a "
                        "function), or before the first statement of a function (def:NAME)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    load_before = os.getloadavg()
    results = {"load_before": load_before, "files": {}}
    with tempfile.TemporaryDirectory(prefix="trl-lsp-bench-") as temporary:
        project = Path(temporary) / args.repository.name
        copy_project(args.repository.resolve(), project)
        client = Client([sys.executable, "-m", "torchrepro_lint", "server"], project)
        client.request("initialize", {"processId": os.getpid(), "rootUri": project.as_uri(), "capabilities": CAPABILITIES})
        client.send({"method": "initialized", "params": {}})
        for name in args.files:
            path = project / name
            uri = path.as_uri()
            text = path.read_text(encoding="utf-8")
            started = time.perf_counter()
            client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
            client.wait_for_diagnostics(uri, 1)
            opened = time.perf_counter() - started
            client.wait_until_complete(uri)  # (edits are timed on the complete model)
            complete = time.perf_counter() - started
            line, indent = insertion_point(text, args.where)
            timings, cpu = [], []
            for number in range(args.warmup + args.edits):
                version = number + 2
                change = typed_change(line, indent, number) if args.kind == "typing" else inserted_change(line, indent, args.kind, number)
                cpu_before = client.cpu_ns()
                started = time.perf_counter()
                client.send({"method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})
                client.wait_for_diagnostics(uri, version)
                elapsed = (time.perf_counter() - started) * 1000
                used = (client.cpu_ns() - cpu_before) / 1e6
                line += args.kind != "typing"
                if number >= args.warmup:
                    timings.append(elapsed)
                    cpu.append(used)
            figures = {
                "open_s": round(opened, 2),
                "complete_s": round(complete, 2),
                "edits": len(timings),
                "median_ms": round(statistics.median(timings), 1),
                "p90_ms": round(percentile(timings, 0.9), 1),
                "min_ms": round(min(timings), 1),
                "max_ms": round(max(timings), 1),
                "cpu_median_ms": round(statistics.median(cpu), 1),
                "cpu_p90_ms": round(percentile(cpu, 0.9), 1),
            }
            results["files"][name] = figures
            print(f"{name}: first diagnostics {figures['open_s']} s, complete {figures['complete_s']} s; {args.kind} edits: median {figures['median_ms']} ms, "
                  f"p90 {figures['p90_ms']} ms (min {figures['min_ms']}, max {figures['max_ms']}, n={len(timings)}); "
                  f"server CPU per edit: median {figures['cpu_median_ms']} ms, p90 {figures['cpu_p90_ms']} ms")  # fmt: skip
        results["peak_rss_mib"] = round(client.memory_mib("VmHWM"), 1)
        results["rss_after_edits_mib"] = round(client.memory_mib("VmRSS"), 1)
        client.request("shutdown", None)
        client.send({"method": "exit", "params": None})
        client.process.wait()
    results["load_after"] = os.getloadavg()
    print(f"server peak RSS: {results['peak_rss_mib']} MiB (its high-water mark, the analyses and edits together), after the edits: "
          f"{results['rss_after_edits_mib']} MiB; load average before {load_before}, after {results['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
