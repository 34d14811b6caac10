#!/usr/bin/env python3
"""Ecosystem check: which findings a change to torchrepro-lint adds and removes on real code.

    python benchmarks/ecosystem.py --base main                    # a git ref vs this checkout
    python benchmarks/ecosystem.py --base main --head my-branch --repos /tmp/real/nanoGPT /tmp/real/moco
    python benchmarks/ecosystem.py --base-python old/.venv/bin/python --head-python new/.venv/bin/python

Each side of the comparison is a version of the linter:
  --base REF / --head REF      a git ref of this repository, exported (`git archive`) into a temporary
                               directory and run from there with PYTHONPATH (the same Python, whose
                               environment supplies libcst); --head defaults to this checkout as it is
  --base-python / --head-python  a Python executable whose environment has torchrepro_lint installed
                               (two venvs); used as is, without PYTHONPATH, when no ref is given

Both run `python -m torchrepro_lint check --select ALL --no-cache --output-format json --exit-zero .`
from the root of each repository checkout (--repos; default: every directory under /tmp/real), so
paths are relative to that root. Findings are compared as (code, path, row, message) with the
checkout's absolute root removed from messages; a finding present on both sides, even if it moved,
is neither added nor removed only when all four match; each repository's line also says whether
the two JSON reports are byte-identical (columns, fixes and all: the check for a refactor). Output is sorted, so two runs over the same
code print the same report. Nothing is written to the checkouts (no cache). --json OUT keeps it all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = Path("/tmp/real")
CHECK_ARGS = ["check", "--select", "ALL", "--no-cache", "--output-format", "json", "--exit-zero", "."]

# (code, path, row, message): what a finding is for the comparison
Key = tuple[str, str, int, str]


@dataclass(frozen=True)
class Linter:
    """One version of the linter: the Python to run it with and, for a git ref, its exported source."""

    label: str
    python: str
    source: Path | None = None  # put on PYTHONPATH; None: the Python's installed torchrepro_lint


@dataclass
class RepoDiff:
    name: str
    added: list[Key] = field(default_factory=list)
    removed: list[Key] = field(default_factory=list)
    base_count: int = 0
    head_count: int = 0
    error: str | None = None
    identical: bool | None = None  # both sides printed the same bytes (columns, fixes and all)


# -- the comparison (pure: what the tests cover) -------------------------------------------------
def normalise(findings: list[dict], root: Path) -> list[Key]:
    """The JSON reporter's findings as comparable keys, with `root` removed from paths and messages."""
    prefixes = sorted({str(root) + os.sep, str(root.resolve()) + os.sep}, key=len, reverse=True)

    def relative(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix, "")
        return text

    keys = []
    for finding in findings:
        path = relative(finding["filename"])
        if path.startswith("." + os.sep):
            path = path[2:]
        keys.append((finding["code"], path, int(finding["location"]["row"]), relative(finding["message"])))
    return keys


def sort_key(key: Key) -> tuple:
    code, path, row, message = key
    return (path, row, code, message)


def diff_findings(base: list[Key], head: list[Key]) -> tuple[list[Key], list[Key]]:
    """(added, removed), as multisets: a finding reported twice on one side and once on the other
    counts once; each list sorted by path, row, code, message."""
    base_counts, head_counts = Counter(base), Counter(head)
    added = sorted((head_counts - base_counts).elements(), key=sort_key)
    removed = sorted((base_counts - head_counts).elements(), key=sort_key)
    return added, removed


def render(diffs: list[RepoDiff], base_label: str, head_label: str) -> str:
    lines = [f"ecosystem check: base {base_label} -> head {head_label}", ""]
    for diff in diffs:
        if diff.error:
            lines.append(f"{diff.name}: ERROR {diff.error}")
            continue
        same = {True: ", output byte-identical", False: ", output differs", None: ""}[diff.identical]
        lines.append(f"{diff.name}: +{len(diff.added)} -{len(diff.removed)} "
                     f"(base {diff.base_count} findings, head {diff.head_count}{same})")
        for sign, keys in (("+", diff.added), ("-", diff.removed)):
            for code, path, row, message in keys:
                lines.append(f"  {sign} {code} {path}:{row} {message}")
    ok = [d for d in diffs if not d.error]
    changed = [d for d in ok if d.added or d.removed]
    lines += ["", f"total: +{sum(len(d.added) for d in ok)} -{sum(len(d.removed) for d in ok)} "
                  f"in {len(changed)} of {len(ok)} repositories"
                  f" (base {sum(d.base_count for d in ok)} findings, head {sum(d.head_count for d in ok)})"]
    if ok and all(d.identical is not None for d in ok):
        lines.append(f"byte-identical output: {sum(bool(d.identical) for d in ok)} of {len(ok)} repositories")
    errors = [d.name for d in diffs if d.error]
    if errors:
        lines.append(f"errors: {', '.join(errors)}")
    return "\n".join(lines) + "\n"


# -- running the linters -------------------------------------------------------------------------
def export_ref(ref: str, into: Path) -> Path:
    """The tracked files of this repository at `ref`, written under `into` (no git worktree to clean up)."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip()
    target = into / commit[:12]
    target.mkdir(parents=True)
    archive = into / f"{commit[:12]}.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO, stdout=handle, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(target)
    archive.unlink()
    return target


def run_linter(linter: Linter, repo: Path, jobs: int | None) -> str:
    """The JSON report the linter printed, as text (for the byte-identical comparison)."""
    env = dict(os.environ)
    if linter.source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(linter.source), env.get("PYTHONPATH")]))
    command = [linter.python, "-m", "torchrepro_lint", *CHECK_ARGS, *(["--jobs", str(jobs)] if jobs else [])]
    proc = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{linter.label} exited {proc.returncode}: {' | '.join(tail)}")
    return proc.stdout


def display_name(repo: Path) -> str:
    """`pytorch-lightning/examples` under the default root (two `examples` stay apart), else the path."""
    try:
        return str(repo.relative_to(DEFAULT_ROOT))
    except ValueError:
        return str(repo)


def compare_repo(base: Linter, head: Linter, repo: Path, jobs: int | None) -> RepoDiff:
    diff = RepoDiff(display_name(repo))
    try:
        before_text, after_text = run_linter(base, repo, jobs), run_linter(head, repo, jobs)
        before = normalise(json.loads(before_text), repo)
        after = normalise(json.loads(after_text), repo)
    except (RuntimeError, json.JSONDecodeError) as error:
        diff.error = str(error)
        return diff
    diff.added, diff.removed = diff_findings(before, after)
    diff.base_count, diff.head_count = len(before), len(after)
    diff.identical = before_text == after_text
    return diff


def default_repos() -> list[Path]:
    if not DEFAULT_ROOT.is_dir():
        return []
    return sorted(p for p in DEFAULT_ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))


def make_linter(side: str, ref: str | None, python: str | None, workdir: Path) -> Linter:
    python = python or sys.executable
    if ref is not None:
        return Linter(f"{ref}", python, export_ref(ref, workdir))
    if python != sys.executable:
        return Linter(f"{python}", python)  # a venv with its own installed version
    return Linter("working tree", python, REPO)  # this checkout as it is, uncommitted edits included


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", help="git ref of the base version")
    parser.add_argument("--head", help="git ref of the new version (default: this checkout as it is)")
    parser.add_argument("--base-python", help="Python that runs the base version (default: this one)")
    parser.add_argument("--head-python", help="Python that runs the new version (default: this one)")
    parser.add_argument("--repos", nargs="+", type=Path, help=f"repository checkouts (default: every directory in {DEFAULT_ROOT})")
    parser.add_argument("--jobs", type=int, help="passed to `check --jobs`")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    if args.base is None and args.base_python is None:
        parser.error("give --base REF or --base-python PYTHON")
    repos = [p.resolve() for p in args.repos] if args.repos else default_repos()
    missing = [str(p) for p in repos if not p.is_dir()]
    if missing or not repos:
        parser.error(f"no such repository checkout: {', '.join(missing)}" if missing else f"no repositories (none in {DEFAULT_ROOT}); give --repos")

    with tempfile.TemporaryDirectory(prefix="trp-ecosystem-") as workdir:
        base = make_linter("base", args.base, args.base_python, Path(workdir) / "base")
        head = make_linter("head", args.head, args.head_python, Path(workdir) / "head")
        diffs = []
        for repo in repos:
            print(f"checking {repo} ...", file=sys.stderr, flush=True)
            diffs.append(compare_repo(base, head, repo, args.jobs))
    sys.stdout.write(render(diffs, base.label, head.label))
    if args.json:
        args.json.write_text(json.dumps({
            "base": base.label, "head": head.label,
            "repos": [{"name": d.name, "error": d.error, "base_count": d.base_count, "head_count": d.head_count,
                       "identical": d.identical,
                       "added": [list(k) for k in d.added], "removed": [list(k) for k in d.removed]} for d in diffs],
        }, indent=2) + "\n")
    return 1 if any(d.error for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
