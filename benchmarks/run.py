#!/usr/bin/env python3
"""Benchmark torchrepro-lint against bare LibCST parsing, TorchFix and flake8 on the same files.

    python benchmarks/run.py --torch                 # the installed torch package's source
    python benchmarks/run.py PATH [PATH ...]         # any repository
    python benchmarks/run.py --smoke                 # a few files, one repeat (what CI runs)

Each measurement runs in a fresh subprocess (cold imports, like a pre-commit or CI run) and is
repeated (--repeat, default 3); the median is reported, with ratios against TorchFix and the
bare parse. TorchFix and flake8's TOR plugin are looked up in --compare-venv (default: the
current interpreter); tools that are not installed are skipped with a note, not faked.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARSE_ONLY = """
import sys
import libcst
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        libcst.parse_module(data)
    except Exception:
        pass
"""


def torch_source() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed in this interpreter: pass a PATH instead of --torch")
    return Path(list(spec.submodule_search_locations)[0])


def python_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def timed(command: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def median_of(command: list[str], repeat: int, cwd: Path | None = None) -> float:
    return statistics.median(timed(command, cwd) for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--torch", action="store_true", help="benchmark the installed torch package's source")
    parser.add_argument("--smoke", action="store_true", help="5 files, 1 repeat: checks the harness works")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare-venv", type=Path, help="a venv with torchfix and flake8 installed")
    args = parser.parse_args(argv)

    roots = [torch_source()] if args.torch else args.paths
    if not roots:
        roots = [Path(__file__).resolve().parent.parent / "torchrepro_lint"]
    files = python_files(roots)
    repeat = 1 if args.smoke else args.repeat
    if args.smoke:
        files = files[:5]
    if not files:
        print("no Python files found", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as scratch:
        # Lint a copy with the same package layout, so that caches never touch the measured tree.
        work = Path(scratch) / "tree"
        for root in roots:
            for path in files:
                if path == root or root in path.parents:
                    relative = path.relative_to(root.parent if root.is_dir() else root.parent)
                    target = work / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        copies = sorted(str(p) for p in work.rglob("*.py"))
        lines = sum(len(Path(p).read_bytes().splitlines()) for p in copies)
        print(f"{len(copies)} files, {lines} lines; median of {repeat} run(s), each a fresh process")

        python = sys.executable
        results: dict[str, float] = {}
        results["libcst.parse_module"] = median_of([python, "-c", PARSE_ONLY, *copies], repeat)
        ours = [python, "-m", "torchrepro_lint", "check", "--exit-zero", "--quiet", str(work)]
        results["torchrepro-lint (cold)"] = median_of(ours, repeat)

        compare_bin = args.compare_venv / "bin" if args.compare_venv else Path(sys.executable).parent
        torchfix = compare_bin / "torchfix"
        if torchfix.exists():
            results["torchfix"] = median_of([str(torchfix), str(work)], repeat)
        else:
            print(f"note: torchfix not found in {compare_bin}; skipped (pip install torchfix)")
        flake8 = compare_bin / "flake8"
        if flake8.exists() and torchfix.exists():
            results["flake8 --select TOR"] = median_of([str(flake8), "--select", "TOR", str(work)], repeat)
        else:
            print(f"note: flake8 with TorchFix's plugin not found in {compare_bin}; skipped")

    width = max(len(name) for name in results)
    parse = results["libcst.parse_module"]
    for name, seconds in results.items():
        extra = f"  {seconds / parse:5.2f}x parse"
        if "torchfix" in results and name != "torchfix":
            extra += f"  {results['torchfix'] / seconds:6.1f}x faster than torchfix"
        print(f"{name:<{width}}  {seconds:8.2f} s{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
