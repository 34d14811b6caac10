"""The command line: `torchrepro-lint check [PATH ...]`, `rules`, `rule CODE`."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from torchrepro_lint import __version__
from torchrepro_lint.config import FAIL_LEVELS, Config, ConfigError, load_config
from torchrepro_lint.pipeline.cache import DEFAULT_DIRECTORY, Cache, config_fingerprint, replay, run_key
from torchrepro_lint.pipeline.discovery import discover
from torchrepro_lint.findings import LintResult, Statistics
from torchrepro_lint.pipeline.progress import for_run
from torchrepro_lint.reporters import REPORTERS

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM, as shells report them


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so that it unwinds as Ctrl-C does: workers are
    stopped and a cache entry being written is removed (cache._write_atomically)."""


def _terminated(signum, frame):
    raise Terminated


def _codes(text: str) -> list[str]:
    return [c.strip().upper() for c in text.split(",") if c.strip()]


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of processes: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("--jobs must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrepro-lint", description="Find reproducibility hazards in PyTorch code."
    )
    parser.add_argument("--version", action="version", version=f"torchrepro-lint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="lint files and directories (default: .)")
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or directories; `-` reads standard input")
    check.add_argument("--output-format", choices=sorted(REPORTERS), default="text", help="how findings are printed")
    check.add_argument("--output-file", type=Path, metavar="PATH", help="write the report to this file (atomically) instead of stdout")
    check.add_argument("--select", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to enable (replaces the default)")
    check.add_argument("--extend-select", type=_codes, default=[], metavar="CODES", help="codes or prefixes to enable in addition")
    check.add_argument("--ignore", type=_codes, default=[], metavar="CODES", help="codes or prefixes to disable")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument(
        "--fail-on", choices=FAIL_LEVELS, help="the least severe findings that make the exit status 1 (default: warning; all are reported)"
    )
    check.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` comments to every reported line, then exit")
    check.add_argument("--config", type=Path, metavar="PATH", help="pyproject.toml to read instead of the nearest one")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    check.add_argument("--force-exclude", action="store_true", help="apply `exclude` to files named on the command line too")
    check.add_argument("--stdin-filename", type=Path, metavar="PATH", help="the path of the source read from standard input (`-`)")
    check.add_argument("--fix", action="store_true", help="apply safe fixes, then report what remains")
    check.add_argument("--unsafe-fixes", action="store_true", help="also apply (or mark) fixes that change behaviour")
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    check.add_argument("--fix-only", action="store_true", help="apply fixes without reporting what remains")
    check.add_argument("--show-fixes", action="store_true", help="list the findings that were fixed")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument(
        "--cache-dir", type=Path, metavar="DIR", help=f"where the cache lives (default: {DEFAULT_DIRECTORY}/ at the project root)"
    )
    check.add_argument("--jobs", "-j", type=_jobs, metavar="N", help="processes for parsing and per-file rules (default: all cores)")
    check.add_argument("--statistics", action="store_true", help="print what the run parsed and reused, on stderr")

    commands.add_parser("server", help="run the language server on stdin/stdout (needs the `server` extra)")
    commands.add_parser("rules", help="list every rule")
    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", metavar="CODE", help="the rule's code, such as TRP201")
    catalog = commands.add_parser("catalog", help="print the nondeterministic-op catalogue behind TRP401/TRP402")
    catalog.add_argument("--torch-version", metavar="VERSION", help="the torch release to show (default: configured, else installed)")
    return parser


def run() -> None:
    """The console entry point: `main` without automatic garbage collection, then exit without
    tearing the heap down.

    - Collections walked every kept tree again and again: 1.6 s of a 15 s cold run on a
      315-file repository. Trees released over the memory budget are collected explicitly
      (tree_budget.COLLECT_AFTER), which keeps memory bounded.
    - Freeing a large project's trees object by object at interpreter exit took longer (11 s of
      35) than linting them; the output is flushed and the cache written before.

    (Both only here, where the process is ours: tests and integrations call `main` or the engine
    in a process they keep.)"""
    gc.disable()
    signal.signal(signal.SIGTERM, _terminated)  # (inherited by the workers of a sharded run)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away (`| head`), a closed stream
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "rules":
            return _list_rules()
        if args.command == "rule":
            return _show_rule(args.code)
        if args.command == "check":
            return _check(args)
        if args.command == "catalog":
            return _show_catalog(args)
        if args.command == "server":
            return _serve()
        parser.print_help()
        return EXIT_ERROR
    except ConfigError as exc:
        print(f"torchrepro-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated:
        return EXIT_TERMINATED
    except Exception as exc:  # never a traceback for users; TORCHREPRO_LINT_DEBUG=1 shows it
        if os.environ.get("TORCHREPRO_LINT_DEBUG"):
            traceback.print_exc()
        print(f"torchrepro-lint: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _check(args: argparse.Namespace) -> int:
    paths = args.paths or [Path(".")]
    from_stdin = [p for p in paths if str(p) == "-"]
    config_paths = [args.stdin_filename] if from_stdin and args.stdin_filename else [p for p in paths if str(p) != "-"]
    config = load_config(config_paths or [Path(".")], args.config)
    _apply_cli(config, args)
    if from_stdin and len(paths) != 1:
        print("torchrepro-lint: error: `-` (standard input) cannot be combined with other paths", file=sys.stderr)
        return EXIT_ERROR
    stdin_name = args.stdin_filename or Path("<stdin>")
    stdin_text = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape") if from_stdin else None
    if args.add_noqa:
        if from_stdin or args.fix or args.fix_only or args.diff:
            print("torchrepro-lint: error: --add-noqa edits files: it cannot read standard input nor combine with --fix or --diff", file=sys.stderr)
            return EXIT_ERROR
        return _add_noqa(args, paths, config)
    if args.fix or args.fix_only or args.diff:
        return _fix(args, paths, config, stdin_name, stdin_text)
    result, statistics = _lint(args, config, paths, from_stdin and (stdin_name, stdin_text))
    if args.statistics:
        print(f"torchrepro-lint statistics: {json.dumps(dataclasses.asdict(statistics))}", file=sys.stderr)
    return _report(args, result, config)


def _serve() -> int:
    try:
        import pygls  # noqa: F401  (the extra, asked before anything is started)

        # Forked first, while the process has no thread, and while the server imports its
        # protocol types the process imports the rules (server/early_process.py).
        from torchrepro_lint.server.early_process import EarlyProcess

        early = EarlyProcess.started(Path.cwd().resolve())
        from torchrepro_lint.server.app import main as serve
    except ImportError as exc:
        print(
            f"torchrepro-lint: error: the language server needs the `server` extra ({exc}); "
            "install it with: pip install 'torchrepro-lint[server]'",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return serve(early)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))  # the cores this process may use
    except AttributeError:
        return os.cpu_count() or 1


def _lint(args: argparse.Namespace, config: Config, paths: list[Path], stdin):
    """The result of `check`. An unchanged tree is replayed from the cache before anything
    that imports LibCST is loaded: that import alone costs more than the replay."""
    statistics = Statistics()
    if stdin:
        from torchrepro_lint.pipeline.engine import lint_sources

        return lint_sources([stdin], config, statistics=statistics), statistics
    files, errors = discover(paths, config, args.force_exclude)
    statistics.files = len(files)
    cache = None
    if not args.no_cache:
        warn = lambda message: print(f"torchrepro-lint: warning: {message}", file=sys.stderr)  # noqa: E731
        cache = Cache(args.cache_dir or config.root / DEFAULT_DIRECTORY, config_fingerprint(config), warn)
        found = replay(cache, run_key(config_fingerprint(config), files, errors))
        if found is not None:
            statistics.replayed = True
            return LintResult(found[0], found[1], len(files)), statistics
    from torchrepro_lint.pipeline.engine import lint_sources

    jobs = args.jobs if args.jobs is not None else default_jobs()
    progress = for_run(sys.stderr, os.environ, quiet=args.quiet, output_format=args.output_format)
    result = lint_sources(
        ((path, None) for path in files), config, errors, cache=cache, jobs=jobs, statistics=statistics, progress=progress
    )
    return result, statistics


def _report(args: argparse.Namespace, result, config: Config) -> int:
    report = REPORTERS[args.output_format](result, quiet=args.quiet, unsafe_fixes=args.unsafe_fixes, config=config)
    if args.output_file is None:
        sys.stdout.write(report)
    else:
        try:
            _write_output(args.output_file, report)
        except OSError as exc:
            print(f"torchrepro-lint: error: cannot write {args.output_file}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_ERROR
    for error in result.errors:
        print(f"torchrepro-lint: error: {error}", file=sys.stderr)
    if result.errors:
        return EXIT_ERROR
    if not args.exit_zero and any(config.fails(f.severity) for f in result.findings):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _fix(args: argparse.Namespace, paths: list[Path], config: Config, stdin_name: Path, stdin_text: str | None) -> int:
    from torchrepro_lint.fixes.runner import fix_paths, fix_sources, write_atomically
    from torchrepro_lint.parsing.source import source_encoding

    if stdin_text is not None:
        outcome = fix_sources({stdin_name: stdin_text}, config, args.unsafe_fixes)
    else:
        progress = for_run(sys.stderr, os.environ, quiet=args.quiet, output_format=args.output_format if not args.diff else "diff")
        outcome = fix_paths(paths, config, args.unsafe_fixes, force_exclude=args.force_exclude, progress=progress)
    if args.diff:
        sys.stdout.write(outcome.diff())
        for error in outcome.result.errors:
            print(f"torchrepro-lint: error: {error}", file=sys.stderr)
        if outcome.result.errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if outcome.fixed else EXIT_CLEAN
    if stdin_text is not None:
        # Editors: the fixed buffer goes to stdout, whatever remains to stderr.
        sys.stdout.write(outcome.fixed.get(stdin_name, stdin_text))
        for finding in outcome.result.findings if not args.fix_only else ():
            print(f"{finding.location}: {finding.code} {finding.severity}: {finding.message}", file=sys.stderr)
        return EXIT_ERROR if outcome.result.errors else EXIT_CLEAN
    for path, text in outcome.fixed.items():
        write_atomically(path, text, source_encoding(path))
    if args.show_fixes or args.fix_only:
        for finding in outcome.applied:
            print(f"fixed {finding.location}: {finding.code} {finding.fix.message}")
    if args.fix_only:
        for error in outcome.result.errors:
            print(f"torchrepro-lint: error: {error}", file=sys.stderr)
        return EXIT_ERROR if outcome.result.errors else EXIT_CLEAN
    if outcome.applied and not args.quiet and args.output_format == "text":
        count = len(outcome.applied)
        print(f"Fixed {count} finding{'s' if count != 1 else ''} in {len(outcome.fixed)} file{'s' if len(outcome.fixed) != 1 else ''}.")
    return _report(args, outcome.result, config)


def _add_noqa(args: argparse.Namespace, paths: list[Path], config: Config) -> int:
    """Lint, then write `# noqa: CODES` on every reported line (fixes/noqa.py). The texts linted
    are the texts edited; a file changed on disk meanwhile is left alone."""
    from torchrepro_lint.pipeline.engine import lint_sources
    from torchrepro_lint.fixes.noqa import add_noqa
    from torchrepro_lint.fixes.runner import write_atomically
    from torchrepro_lint.parsing.source import UNSUPPRESSIBLE, SourceError, read_source, source_encoding

    files, errors = discover(paths, config, args.force_exclude)
    texts: dict[Path, str] = {}
    for path in files:
        try:
            texts[path] = read_source(path)
        except SourceError as exc:
            errors.append(f"{path.as_posix()}: {exc}")
    jobs = args.jobs if args.jobs is not None else default_jobs()
    progress = for_run(sys.stderr, os.environ, quiet=args.quiet, output_format="text")
    result = lint_sources(list(texts.items()), config, errors, jobs=jobs, progress=progress)
    by_path: dict[str, list] = {}
    for finding in result.findings:
        by_path.setdefault(finding.path, []).append(finding)
    added = files_changed = 0
    left = []
    for path, text in texts.items():
        findings = by_path.get(path.as_posix())
        if not findings:
            continue
        outcome = add_noqa(path, text, findings)
        left += outcome.left
        if outcome.text == text:
            continue
        try:
            if read_source(path) != text:
                result.errors.append(f"{path.as_posix()}: changed while it was being linted; no noqa added")
                continue
            write_atomically(path, outcome.text, source_encoding(path))
        except (OSError, SourceError) as exc:
            result.errors.append(f"{path.as_posix()}: cannot write: {getattr(exc, 'strerror', None) or exc}")
            continue
        added += len(outcome.added)
        files_changed += 1
        lines = len({(f.cell, f.row) for f in outcome.added})
        print(f"{path.as_posix()}: {_plural(lines, 'noqa comment')} for {_plural(len(outcome.added), 'finding')}")
    for finding in left:
        why = (
            "code that does not parse is not linted, so no noqa can silence this; fix it or exclude the file"
            if finding.code in UNSUPPRESSIBLE
            else "no noqa comment can go on this line (a comment there would change the code: after a backslash continuation, or a shebang)"
        )
        print(f"torchrepro-lint: warning: {finding.location}: {finding.code}: {why}; still reported", file=sys.stderr)
    if not args.quiet:
        print(f"Added noqa comments for {_plural(added, 'finding')} in {_plural(files_changed, 'file')}.")
    for error in result.errors:
        print(f"torchrepro-lint: error: {error}", file=sys.stderr)
    if result.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if left and not args.exit_zero else EXIT_CLEAN


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _write_output(path: Path, text: str) -> None:
    """--output-file: replaced atomically, so a reader (an upload step) never sees half a report."""
    from torchrepro_lint.fixes.runner import write_atomically

    existed = path.exists()
    write_atomically(path, text)
    if not existed:  # the temporary file was private (0600); give it the mode a new file gets
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o666 & ~umask)


def _apply_cli(config: Config, args: argparse.Namespace) -> None:
    if args.select is not None:
        config.select = args.select
    config.extend_select = [*config.extend_select, *args.extend_select]
    config.ignore = [*config.ignore, *args.ignore]
    if args.fail_on is not None:
        config.fail_on = args.fail_on


def _list_rules() -> int:
    from torchrepro_lint.rules import all_rules

    print(f"{'code':<8}{'name':<34}{'severity':<10}{'default':<9}fix")
    for rule in all_rules():
        state = "on" if rule.default_enabled else "off"
        print(f"{rule.code:<8}{rule.name:<34}{str(rule.severity):<10}{state:<9}{rule.fix_safety or 'none'}")
    return EXIT_CLEAN


def _show_catalog(args: argparse.Namespace) -> int:
    from torchrepro_lint.catalog import format_catalog
    from torchrepro_lint.config import parse_version

    if args.torch_version:
        version = parse_version(args.torch_version)
        if version is None:
            print(f"torchrepro-lint: error: --torch-version must look like 2.13, got {args.torch_version!r}", file=sys.stderr)
            return EXIT_ERROR
    else:
        version = load_config([Path(".")]).torch_version
    sys.stdout.write(format_catalog(version))
    return EXIT_CLEAN


def _show_rule(code: str) -> int:
    from torchrepro_lint.rules.pages import render_page
    from torchrepro_lint.rules import rule_by_code

    rule = rule_by_code(code)
    if rule is None:
        print(f"torchrepro-lint: error: unknown rule {code!r} (see `torchrepro-lint rules`)", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(render_page(rule))
    return EXIT_CLEAN
