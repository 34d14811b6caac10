#!/usr/bin/env python3
"""Benchmark torchrepro-lint against bare LibCST parsing, TorchFix and flake8 on the same files.

    python benchmarks/run.py --torch                 # the installed torch package's own source
    python benchmarks/run.py PATH [PATH ...]         # any repository (or both: --torch PATH)
    python benchmarks/run.py --smoke PATH            # a few files, one repeat (what CI runs)

The same files for every tool: every `.py` file under the targets, except in hidden directories
and virtualenvs (which torchrepro-lint never enters). They are copied to a temporary tree, so
nothing ever writes to the user's tree or to torch's installed files; every tool is given that
tree, and torchrepro-lint gets `--config TREE/pyproject.toml` with `exclude = []` so that its
default excludes (build, dist, venv, ...) drop nothing. Each tool's own count of the files it
saw is printed beside its row.

Every measurement is a fresh process (cold imports, like a pre-commit or CI run), repeated
--repeat times (default 3); the table shows the median wall and CPU seconds and the peak RSS.
CPU seconds are user+sys of the process and the children it waited for (os.wait4), so they
include worker processes; peak RSS is the largest single process among them, not a sum.
On a shared or busy machine wall time is noisy: compare CPU time.

Rows:
  libcst.parse_module          parse every file in one process: the floor for any LibCST tool
  torchrepro-lint cold         `check --no-cache --jobs 1`, and with the default --jobs
  ... (filling the cache)      one run with an empty --cache-dir (default --jobs), then:
  torchrepro-lint warm         re-runs with that cache on the unchanged tree
  ... after touching 1 file    a comment line appended to one file (--touch), then a re-run;
                               --statistics says what was parsed and re-resolved again
  torchfix, flake8 --select TOR  TorchFix's CLI and its flake8 plugin, from --compare-venv (TorchFix
                               parses only files containing "torch"; flake8 also runs pyflakes and
                               pycodestyle whatever --select says, as it does for its users)
  flake8 per file              `flake8 FILE` one process per file over a sample (--plugin-sample),
                               as an editor runs it on save: --select E999 without our plugin
                               (flake8's own start-up), then --select TRP with the file outside
                               any project, and inside the project (it analyses the whole project)

Tools that are not installed, and torchrepro-lint options the version under test lacks, are skipped
with a note, never faked; --skip leaves rows out (TorchFix takes about 20 minutes of CPU on torch's
source). --json OUT writes every number and command. Needs a POSIX os.wait4.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMOKE_FILES = 5
STATISTICS_PREFIX = "torchrepro-lint statistics: "
TOUCH_LINE = "# touched by benchmarks/run.py ({})\n"

# The reference: LibCST's parser alone, over every .py file under the given directory.
PARSE_ONLY = """
import os, sys, libcst
parsed = failed = 0
for directory, subdirs, names in os.walk(sys.argv[1]):
    subdirs.sort()
    for name in sorted(names):
        if name.endswith(".py"):
            with open(os.path.join(directory, name), "rb") as handle:
                data = handle.read()
            try:
                libcst.parse_module(data)
                parsed += 1
            except Exception:
                failed += 1
print(f"parsed {parsed + failed} files ({failed} failed)", file=sys.stderr)
"""

# flake8 exactly as installed here, minus the TRP plugin: flake8 runs every installed plugin
# whatever --select says, so this is the baseline our plugin's cost is measured against.
FLAKE8_WITHOUT_TRP = """
import sys
from flake8.plugins import finder
find_plugins = finder.find_plugins
finder.find_plugins = lambda *a, **k: [p for p in find_plugins(*a, **k) if p.entry_point.name != "TRP"]
from flake8.main.cli import main
sys.exit(main(sys.argv[1:]))
"""


# -- running one command ------------------------------------------------------------------------
def run_once(command: list[str], cwd: Path, env: dict | None, nice: int) -> dict:
    """Wall seconds, CPU seconds (user+sys, with reaped children), peak RSS, exit status, output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        return {
            "wall_s": round(wall, 4),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
            "user_s": round(usage.ru_utime, 4),
            "sys_s": round(usage.ru_stime, 4),
            "peak_rss_mib": round(usage.ru_maxrss / (1 << 20 if sys.platform == "darwin" else 1 << 10), 1),
            "returncode": proc.returncode,
            "stdout_lines": stdout.count("\n"),  # findings printed: a check that the tool did work
            "stdout": stdout,
            "stderr": stderr,
        }


def summarize(runs: list[dict]) -> dict:
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    return {
        "wall_median_s": round(statistics.median(walls), 4),
        "cpu_median_s": round(statistics.median(cpus), 4),
        "wall_p90_s": round(p90(walls), 4),
        "cpu_p90_s": round(p90(cpus), 4),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
    }


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(0.9 * len(ordered)) - 1, 0)]


def statistics_line(stderr: str) -> dict | None:
    """The counters `torchrepro-lint check --statistics` prints on stderr, if any."""
    for line in stderr.splitlines():
        if line.startswith(STATISTICS_PREFIX):
            return json.loads(line[len(STATISTICS_PREFIX):])
    return None


def files_reported(tool: str, run: dict) -> str | None:
    """How many files the tool itself says it looked at, from its own output."""
    if tool == "parse":
        lines = [l for l in run["stderr"].splitlines() if l.startswith("parsed ")]
        return lines[-1][len("parsed "):] if lines else None
    if tool == "ours":
        counters = statistics_line(run["stderr"])
        return f"{counters['files']} files" if counters else None
    if tool == "torchfix":  # TorchFix parses only files that contain the word "torch"
        lines = [l for l in run["stderr"].splitlines() if l.startswith("Finished checking")]
        if not lines:
            return None
        return lines[-1].replace("Finished checking ", "parsed ").rstrip(".") + " (with 'torch' in them)"
    if tool == "flake8":  # --benchmark prints "<n>  total files processed"
        lines = [l.split() for l in run["stdout"].splitlines() if l.rstrip().endswith(" total files processed")]
        return f"{lines[-1][0]} files" if lines else None
    return None


class Bench:
    def __init__(self, args: argparse.Namespace, tree: Path, env: dict) -> None:
        self.args, self.tree, self.env = args, tree, env
        self.rows: dict[str, dict] = {}  # whole-run rows, in table order
        self.per_file: dict[str, dict] = {}  # the flake8-per-file rows
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"note: {text}", flush=True)

    def collect(self, name: str, command: list[str], kind: str, repeat: int | None = None, before=None) -> dict:
        """Run `command` `repeat` times (calling `before(i)` first, if given); the row, not yet shown."""
        runs = []
        for i in range(repeat or self.args.repeat):
            if before is not None:
                before(i)
            run = run_once(command, self.tree, self.env, self.args.nice)
            if run["returncode"] not in (0, 1):  # 1: TorchFix and flake8 found something
                self.note(f"{name}: exit status {run['returncode']}: {run['stderr'].strip()[-500:]}")
            runs.append(run)
        row = {"command": command, "cwd": str(self.tree), "repeat": len(runs), **summarize(runs),
               "files_reported": files_reported(kind, runs[-1]),
               "failed": any(r["returncode"] not in (0, 1) for r in runs)}
        counters = [statistics_line(r["stderr"]) for r in runs]
        if any(counters):
            row["statistics"] = counters
        row["runs"] = [{k: v for k, v in r.items() if k not in ("stdout", "stderr")} for r in runs]
        return row

    def measure(self, name: str, command: list[str], kind: str, repeat: int | None = None, before=None) -> dict:
        row = self.rows[name] = self.collect(name, command, kind, repeat, before)
        seen = f"  [{row['files_reported']}]" if row["files_reported"] else ""
        print(f"  {name}: wall {row['wall_median_s']:.2f} s, CPU {row['cpu_median_s']:.2f} s, "
              f"peak RSS {row['peak_rss_mib']:.0f} MiB{seen}", flush=True)
        return row


# -- targets and the copied tree --------------------------------------------------------------
def torch_source() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed in this interpreter: pass a PATH instead of --torch")
    return Path(list(spec.submodule_search_locations)[0])


def python_files(root: Path) -> list[Path]:
    """Every .py file under root, skipping hidden directories and virtualenvs, sorted."""
    if root.is_file():
        return [root]
    found = []
    for directory, subdirs, names in os.walk(root):
        base = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and not (base / d / "pyvenv.cfg").is_file())
        found.extend(base / name for name in sorted(names) if name.endswith(".py"))
    return found


def copy_targets(roots: list[Path], tree: Path, limit: int | None) -> list[Path]:
    """Copy the targets' .py files to tree/<name>/...; returns the copies, sorted."""
    copies: list[Path] = []
    used: set[str] = set()
    for root in roots:
        name = root.name or "root"
        while name in used:
            name += "_"
        used.add(name)
        for path in python_files(root)[:limit]:
            target = tree / name / (path.relative_to(root) if root.is_dir() else path.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            copies.append(target)
    return sorted(copies)


def project_marker_above(path: Path) -> Path | None:
    """A pyproject.toml or VCS directory above `path`: it would make the copy part of a project."""
    for directory in path.parents:
        for marker in ("pyproject.toml", ".git", ".hg", ".svn"):
            if (directory / marker).exists():
                return directory / marker
    return None


def check_options(python: str, env: dict) -> set[str]:
    """The torchrepro-lint check options this checkout has (some are new)."""
    proc = subprocess.run([python, "-m", "torchrepro_lint", "check", "--help"], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return set()
    return {opt for opt in ("--no-cache", "--cache-dir", "--jobs", "--statistics", "--config") if opt in proc.stdout}


def compare_bin(args: argparse.Namespace) -> Path:
    if args.compare_venv is not None:
        return args.compare_venv / "bin"
    default = Path("/tmp/benchvenv")
    return default / "bin" if (default / "bin").is_dir() else Path(sys.executable).parent


def has_trp_plugin() -> bool:
    return any(ep.name == "TRP" for ep in importlib.metadata.entry_points(group="flake8.extension"))


# -- the measurements -------------------------------------------------------------------------
def measure_all(bench: Bench, files: list[Path], config: Path) -> None:
    args, tree, python = bench.args, bench.tree, sys.executable
    skip = set(args.skip)

    if "parse" not in skip:
        bench.measure("libcst.parse_module", [python, "-c", PARSE_ONLY, str(tree)], "parse")

    options = check_options(python, bench.env)
    if not options:
        bench.note("`python -m torchrepro_lint check --help` failed: torchrepro-lint rows skipped")
    else:
        ours = [python, "-m", "torchrepro_lint", "check", "--exit-zero", "-q"]
        ours += ["--config", str(config)] if "--config" in options else []
        ours += ["--statistics"] if "--statistics" in options else []
        missing = sorted({"--no-cache", "--cache-dir", "--jobs", "--statistics"} - options)
        if missing:
            bench.note(f"torchrepro-lint check has no {', '.join(missing)} yet: rows that need them are skipped")
        cold = ours + (["--no-cache"] if "--no-cache" in options else [])
        if "cold" not in skip:
            if "--jobs" in options:
                bench.measure("torchrepro-lint cold --jobs 1", cold + ["--jobs", "1", str(tree)], "ours")
            bench.measure("torchrepro-lint cold", cold + [str(tree)], "ours")
        if "warm" not in skip and "--cache-dir" in options:
            measure_warm(bench, ours, files)

    tools = compare_bin(args)
    torchfix, flake8 = tools / "torchfix", tools / "flake8"
    if "torchfix" not in skip:
        if torchfix.exists():
            bench.measure("torchfix", [str(torchfix), str(tree)], "torchfix")
        else:
            bench.note(f"torchfix not found in {tools}: skipped (pip install torchfix, or --compare-venv)")
    if "flake8-tor" not in skip:
        if flake8.exists() and torchfix.exists():
            # --isolated: no flake8 config files; --exclude '': not even flake8's default excludes.
            bench.measure("flake8 --select TOR", [str(flake8), "--isolated", "--exclude", "", "--benchmark",
                                                   "--select", "TOR", str(tree)], "flake8")
        else:
            bench.note(f"flake8 with TorchFix's TOR plugin not found in {tools}: skipped")

    if "plugin" not in skip:
        measure_plugin(bench, files, config)


def measure_warm(bench: Bench, ours: list[str], files: list[Path]) -> None:
    tree = bench.tree
    cache = tree.parent / "cache"
    warm = ours + ["--cache-dir", str(cache), str(tree)]
    fill = bench.measure("torchrepro-lint (filling the cache)", warm, "ours", repeat=1)
    bench.measure("torchrepro-lint warm", warm, "ours")
    touched = pick_touched(bench.args.touch, files, tree)
    relative = touched.relative_to(tree).as_posix()

    def touch(i: int) -> None:  # a different line each time, so that every re-run sees a change
        with touched.open("a", encoding="utf-8") as handle:
            handle.write(TOUCH_LINE.format(i + 1))

    row = bench.measure("torchrepro-lint after touching 1 file", warm, "ours", before=touch)
    row["touched"] = relative
    counters = (row.get("statistics") or [None])[0]
    if counters:
        bench.note(f"after appending a comment line to {relative}: {counters['parsed']} of {counters['files']} files "
                   f"parsed again, {counters['programs_resolved']} of {counters['programs']} programs re-resolved, "
                   f"{counters['cache_hits']} cache hits (the run that filled the cache: {fill['statistics'][0]})")
    else:
        bench.note(f"touched {relative}; no --statistics counters to show what was redone")


def pick_touched(choice: str | None, files: list[Path], tree: Path) -> Path:
    if choice:
        matches = [f for f in files if f.relative_to(tree).as_posix().endswith(choice)]
        if not matches:
            sys.exit(f"--touch {choice}: no such file among the benchmarked files")
        return matches[0]
    return files[len(files) // 2]  # deterministic, and usually an ordinary module


def sample(files: list[Path], count: int) -> list[Path]:
    """Every k-th file, k chosen so that `count` files spread over the sorted list."""
    if count <= 0:
        return []
    step = max(len(files) // count, 1)
    return files[::step][:count]


def measure_plugin(bench: Bench, files: list[Path], config: Path) -> None:
    args, python = bench.args, sys.executable
    if importlib.util.find_spec("flake8") is None:
        bench.note("flake8 is not installed in this interpreter: per-file plugin rows skipped")
        return
    if not has_trp_plugin():
        bench.note("the TRP flake8 entry point is not installed (pip install -e .): per-file plugin rows skipped")
        return
    picked = sample(files, args.plugin_sample)
    in_project = sample(files, args.plugin_project_sample)
    flake8 = [python, "-m", "flake8", "--isolated"]
    parked = config.with_name("pyproject.toml.parked")
    config.rename(parked)  # no pyproject.toml: each file is linted on its own, as in site-packages
    try:
        without_trp = [python, "-c", FLAKE8_WITHOUT_TRP, "--isolated", "--select", "E999"]
        per_file(bench, "flake8 --select E999 FILE (no TRP)", without_trp, picked)
        per_file(bench, "flake8 --select TRP FILE (no project)", flake8 + ["--select", "TRP"], picked)
    finally:
        parked.rename(config)
    name = f"flake8 --select TRP FILE (in a {len(files)}-file project)"
    per_file(bench, name, flake8 + ["--select", "TRP"], in_project)


def per_file(bench: Bench, name: str, command: list[str], picked: list[Path]) -> None:
    if not picked:
        return
    runs = []
    for path in picked:
        run = run_once(command + [str(path.relative_to(bench.tree))], bench.tree, bench.env, bench.args.nice)
        if run["returncode"] not in (0, 1) or "Traceback" in run["stderr"]:
            bench.note(f"{name} on {path.name}: exit status {run['returncode']}: {run['stderr'].strip()[-300:]}")
        runs.append({"file": path.relative_to(bench.tree).as_posix(),
                     **{k: v for k, v in run.items() if k not in ("stdout", "stderr")}})
    row = {"command": command + ["FILE"], "cwd": str(bench.tree), "files_sampled": len(runs), **summarize(runs),
           "runs": runs}
    bench.per_file[name] = row
    print(f"  {name}: {len(runs)} files, median wall {row['wall_median_s']:.2f} s (p90 {row['wall_p90_s']:.2f}), "
          f"median CPU {row['cpu_median_s']:.2f} s (p90 {row['cpu_p90_s']:.2f})", flush=True)


# -- the report -------------------------------------------------------------------------------
def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def print_table(bench: Bench) -> None:
    rows = bench.rows
    parse = rows.get("libcst.parse_module")
    torchfix = rows.get("torchfix")
    header = ["tool", "wall s", "CPU s", "RSS MiB", "/parse wall", "/parse CPU", "TorchFix/ wall", "TorchFix/ CPU"]
    table = [header]
    for name, row in rows.items():
        table.append([
            name + (" (FAILED: see the notes)" if row["failed"] else ""),
            f"{row['wall_median_s']:.2f}", f"{row['cpu_median_s']:.2f}", f"{row['peak_rss_mib']:.0f}",
            ratio(row["wall_median_s"], parse and parse["wall_median_s"]),
            ratio(row["cpu_median_s"], parse and parse["cpu_median_s"]),
            ratio(torchfix and torchfix["wall_median_s"], row["wall_median_s"]),
            ratio(torchfix and torchfix["cpu_median_s"], row["cpu_median_s"]),
        ])
    print()
    print(f"median of {bench.args.repeat} run(s) each; /parse: this row's time over the bare parse; "
          "TorchFix/: TorchFix's time over this row's (above 1: faster than TorchFix)")
    print_rows(table)
    if bench.per_file:
        table = [["flake8, one process per file", "files", "wall median", "wall p90",
                  "CPU median", "CPU p90", "RSS MiB"]]
        for name, row in bench.per_file.items():
            table.append([name, str(row["files_sampled"]), f"{row['wall_median_s']:.2f}", f"{row['wall_p90_s']:.2f}",
                          f"{row['cpu_median_s']:.2f}", f"{row['cpu_p90_s']:.2f}", f"{row['peak_rss_mib']:.0f}"])
        print()
        print_rows(table)
        base = bench.per_file.get("flake8 --select E999 FILE (no TRP)")
        alone = bench.per_file.get("flake8 --select TRP FILE (no project)")
        if base and alone:
            share = alone["cpu_median_s"] - base["cpu_median_s"]
            print(f"the plugin's own share per file (no project): {share:+.2f} s CPU median "
                  f"over flake8's own {base['cpu_median_s']:.2f} s")


def print_rows(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))


def versions(bin_dir: Path) -> dict:
    found = {"python": platform.python_version()}
    for dist in ("torchrepro-lint", "libcst", "flake8", "torch"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    if (bin_dir / "torchfix").exists():
        proc = subprocess.run([str(bin_dir / "torchfix"), "--version"], capture_output=True, text=True, check=False)
        found["torchfix (compare venv)"] = proc.stdout.strip()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="repositories (directories) or files")
    parser.add_argument("--torch", action="store_true", help="benchmark the installed torch package's source")
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE_FILES} files, 1 repeat, 1 sampled file: checks the harness")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is shown (default 3)")
    parser.add_argument("--compare-venv", type=Path,
                        help="a venv with torchfix and flake8 (default: /tmp/benchvenv if it exists, "
                             "else this interpreter's)")
    parser.add_argument("--plugin-sample", type=int, default=40,
                        help="files for `flake8 FILE` per-file timing (default 40)")
    parser.add_argument("--plugin-project-sample", type=int, default=3,
                        help="files for per-file timing inside the project: each analyses the whole project "
                             "(default 3)")
    parser.add_argument("--touch", metavar="FILE",
                        help="the file (a path suffix) the warm re-run changes (default: the middle one)")
    parser.add_argument("--skip", type=lambda s: [x for x in s.split(",") if x], default=[],
                        help="comma-separated rows to leave out: parse,cold,warm,torchfix,flake8-tor,plugin")
    parser.add_argument("--nice", type=int, default=0, help="run every measured command at this niceness")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every number and command here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat, args.plugin_sample, args.plugin_project_sample = 1, 1, 1

    roots = ([torch_source()] if args.torch else []) + [p.resolve() for p in args.paths]
    if not roots:
        parser.error("give --torch and/or one or more PATHs")
    for root in roots:
        if not root.exists():
            parser.error(f"{root}: no such file or directory")

    env = dict(os.environ)
    if importlib.util.find_spec("torchrepro_lint") is None:  # not installed: lint with this checkout
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    scratch = Path(tempfile.mkdtemp(prefix="torchrepro-bench-"))
    try:
        tree = scratch / "tree"
        files = copy_targets(roots, tree, SMOKE_FILES if args.smoke else None)
        if not files:
            print("no Python files found", file=sys.stderr)
            return 2
        lines = sum(len(f.read_bytes().splitlines()) for f in files)
        names = ", ".join(str(r) for r in roots)
        if args.torch:
            names = f"torch {importlib.metadata.version('torch')} at {names}"
        print(f"{len(files)} files, {lines} lines: every .py file under {names}; median of {args.repeat} run(s), "
              f"each a fresh process; copied to {tree}", flush=True)
        config = tree / "pyproject.toml"
        config.write_text("[tool.torchrepro-lint]\nexclude = []  # benchmark every copied file\n", encoding="utf-8")
        bench = Bench(args, tree, env)
        marker = project_marker_above(tree)
        if marker is not None:
            bench.note(f"{marker} is above the temporary tree: the 'no project' plugin row is really in a project")
        measure_all(bench, files, config)
        print_table(bench)
        if args.json:
            report = {
                "targets": [str(r) for r in roots], "files": len(files), "lines": lines, "repeat": args.repeat,
                "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg(), "versions": versions(compare_bin(args)),
                "rows": bench.rows, "per_file": bench.per_file, "notes": bench.notes,
            }
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
            print(f"\nwrote {args.json}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
