"""The lint pipeline: discover, read, parse once, build the project model, run rules, filter."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from torchrepro_lint import notebooks
from torchrepro_lint.pipeline.shards import hub as shard_hub
from torchrepro_lint.pipeline.shards import protocol as shard_protocol
from torchrepro_lint.pipeline.cache import Cache, config_fingerprint, digest, missing_files_witnesses, run_key
from torchrepro_lint.config import Config
from torchrepro_lint.rules.context import LintContext
from torchrepro_lint.pipeline.discovery import discover
from torchrepro_lint.findings import Finding, LintResult, Severity, Statistics
from torchrepro_lint.pipeline.progress import NO_PROGRESS
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.module_finder import module_identity
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.known_apis import Helper
from torchrepro_lint.rules import Rule, all_rules
from torchrepro_lint.parsing.source import PARSES, ParseFailure, SourceError, SourceFile, read_source
from torchrepro_lint.pipeline.lowered_store import LoweredStore
from torchrepro_lint.pipeline.staging import ModuleChecker, ProgramChecker, ProgramRunner, parallel_available
from torchrepro_lint.pipeline.tree_budget import TreeBudget

PARSE_ERROR = "TRP000"


@dataclass
class Selection:
    """Which codes are on: prefixes, the most specific match wins, `ignore` wins ties."""

    select: list[str] | None
    extend_select: list[str]
    ignore: list[str]

    def enabled(self, code: str, default_on: bool) -> bool:
        def specificity(prefixes: list[str]) -> int:
            lengths = [0 if p == "ALL" else len(p) for p in prefixes if p == "ALL" or code.startswith(p)]
            return max(lengths, default=-1)

        if self.select is None:
            chosen = 0 if default_on else -1  # the default set is as general as "ALL"
        else:
            chosen = specificity(self.select)
        chosen = max(chosen, specificity(self.extend_select))
        return chosen >= 0 and specificity(self.ignore) < chosen


def selection_from(config: Config) -> Selection:
    return Selection(
        [c.upper() for c in config.select] if config.select is not None else None,
        [c.upper() for c in config.extend_select],
        [c.upper() for c in config.ignore],
    )


def enabled_rules(config: Config) -> list[Rule]:
    selection = selection_from(config)
    return [rule for rule in all_rules() if selection.enabled(rule.code, rule.default_enabled)]




def _config_helpers(config: Config) -> dict[str, Helper]:
    helpers = {name: Helper() for name in config.seed_functions}
    for name in config.deterministic_functions:
        helpers[name] = Helper(seeds=helpers[name].seeds if name in helpers else (), claims_when="always", enables_det_mode=True)
    return helpers


def lint_paths(paths: list[Path], config: Config, *, force_exclude: bool = False, **options) -> LintResult:
    files, errors = discover(paths, config, force_exclude)
    return lint_sources(((path, None) for path in files), config, errors, **options)


def lint_sources(
    sources,
    config: Config,
    errors: list[str] | None = None,
    *,
    make_index=ProjectIndex,
    cache: Cache | None = None,
    jobs: int = 1,
    statistics: Statistics | None = None,
    progress=NO_PROGRESS,
    checked: Collection[str] | None = None,
) -> LintResult:
    """Lint (path, text-or-None) pairs; None means read the file from disk (a SourceFile in
    place of the text is used as it is).

    `make_index(root, helpers)` builds the empty ProjectIndex to fill: an integration that lints
    one file at a time passes one that reuses modules it parsed before. `cache` is the persistent
    cache (cache.py); with `jobs` > 1 the per-file rules run in that many processes.
    `progress` (progress.py) hears of each file parsed, program run and file checked.
    `checked`: the display paths (POSIX) whose per-file rules run, None for every linted file
    (the language server asks for its open documents only: it shows no other file's findings).
    """
    stats = statistics if statistics is not None else Statistics()
    parses_before = PARSES[0]
    result = LintResult(errors=list(errors or []))
    rules = enabled_rules(config)
    selection = selection_from(config)
    configuration = config_fingerprint(config)

    sources = list(sources)
    parse_failures: list[Finding] = []
    cell_maps: dict[str, notebooks.CellMap] = {}  # notebooks: module rows -> cells, by display path
    loaded: list[SourceFile] = []
    for path, text in sources:
        result.files_checked += 1
        try:
            source = load_source(path, text)
        except SourceError as exc:
            result.errors.append(f"{path.as_posix()}: {exc}")
            continue
        except ParseFailure as exc:
            parse_failures.append(parse_error_finding(path, exc))
            continue
        if isinstance(source, notebooks.NotebookSource):
            cell_maps[path.as_posix()] = source.cells
            parse_failures.extend(parse_error_finding(path, failure) for failure in source.cells.broken)
        loaded.append(source)
    stats.files = result.files_checked

    from_disk = all(text is None for _, text in sources)
    key = run_key(configuration, [path for path, _ in sources], list(errors or [])) if cache and from_disk else None

    project = make_index(config.root, _config_helpers(config))
    # Staged runs (cache, jobs, trees dropped within a budget) need the plain index; an
    # integration's own index keeps its modules in memory its own way.
    store = LoweredStore(cache) if type(project) is ProjectIndex else None
    if store is not None:
        project.lowered = store
    module_rules = [rule for rule in rules if _defines(rule, "check_module")]
    program_rules = [rule for rule in rules if _defines(rule, "check_programs")]

    def make_checker(project, programs, budget):
        context = LintContext(project, programs, config)
        return ModuleChecker(context, module_rules, cache, configuration, project.lowered, stats, budget)

    def make_program_checker(project, programs):
        context = LintContext(project, programs, config)
        return ProgramChecker(context, program_rules, cache, configuration, project.lowered).check

    # what a worker of a sharded run (shards/) builds over its copy of the project
    stages = shard_protocol.Stages(
        TreeBudget.share,
        lambda project: ProgramRunner(project, cache, configuration, project.lowered, stats),
        make_checker,
        make_program_checker,
    )
    hub = None
    try:
        hub = _start_hub(project, loaded, jobs, stages) if store is not None else None
        stats.workers = len(hub.workers) if hub is not None else 0
        budget = None if store is None else TreeBudget(keep_indexes=project.lives_on) if hub is None else stages.budget(hub.processes)
        progress.start("parsed", len(loaded))
        parse_failures += _lower_all(project, loaded, budget, hub, progress)
        if hub is not None:
            hub.share_project()
        findings: list[Finding] = [f for f in parse_failures if selection.enabled(PARSE_ERROR, True)]
        runner = ProgramRunner(project, cache, configuration, store, stats)
        runner.progress = progress
        programs = runner.find(config.console_scripts, hub, config.library_packages)
        context = LintContext(project, programs, config)
        program_checker = ProgramChecker(context, program_rules, cache, configuration, store)
        if hub is not None:  # every process runs program rules once it has checked its files
            hub.share_program_rules(program_checker.uncached(), program_checker.check)
        checker = ModuleChecker(context, module_rules, cache, configuration, store, stats, budget)
        checker.progress = progress
        checker.only = frozenset(checked) if checked is not None else None
        findings += checker.run(jobs, hub)
        result.errors += checker.errors
        program_findings, program_errors = program_checker.run(hub.program_rules_done if hub is not None else None)
        findings += program_findings
        result.errors += program_errors
    except BaseException:  # interrupted (Ctrl-C, SIGTERM) or failed: no worker outlives the run
        shard_hub.abort_open_hubs()  # (this run's hub, even one interrupted while it forked)
        raise
    finally:
        progress.finish()
        if hub is not None:
            stats.summaries_asked = hub.summaries_asked
            stats.program_rules_in_workers = hub.program_rules_in_workers
            stats.programs_resolved += hub.programs_resolved
            stats.workers_peak_rss_mib = hub.peak_rss_mib
            hub.close()
        if store is not None:
            store.close()

    result.findings = notebooks.to_cells(_filtered(findings, project, config), cell_maps)
    stats.parsed += PARSES[0] - parses_before
    if key is not None:
        cache.put("run", key, (_outside_digests(project), result.findings, result.errors))
    return result


def _lower_all(project: ProjectIndex, loaded: list[SourceFile], budget, hub, progress=NO_PROGRESS) -> list[Finding]:
    """Add every source to the project, in order; the TRP000 findings of those that fail. With
    a hub, workers lower their shares meanwhile and the project is put in the same order."""
    outcomes = {}
    if hub is not None:
        for source in hub.my_share():
            outcomes[source.path] = shard_protocol.lower(project, source, budget)
            progress.advance("parsed")
        for source, lowered in hub.collect():
            progress.advance("parsed")
            if lowered[0] == "failure":
                outcomes[source.path] = ParseFailure(*lowered[1])
            else:
                project.lowered.prime(source.resolved_path, lowered[1], lowered[2])
    # The rest: from the workers' IR, the cache's, or lowered here, largest first (as a sharded
    # run does): the trees kept within budget are then the largest, whose parse needs the most
    # memory (on torch's source, up to 750 MB for a moment), so no such parse is done again when
    # the heap is full of trees and IR; and the first parses meet an empty heap.
    for source in sorted(loaded, key=lambda source: -len(source.text)) if budget is not None else loaded:
        if source.path not in outcomes:
            outcomes[source.path] = shard_protocol.lower(project, source, budget)
            progress.advance("parsed")
    if hub is not None or budget is not None:  # the order of `loaded` (rules and programs iterate over it)
        ordered = (outcomes[source.path] for source in loaded)
        project.replace_modules({m.path: m for m in ordered if isinstance(m, ProjectModule)})
    return [parse_error_finding(s.path, outcomes[s.path]) for s in loaded if isinstance(outcomes[s.path], ParseFailure)]


def _start_hub(project: ProjectIndex, loaded: list[SourceFile], jobs: int, stages) -> shard_hub.Hub | None:
    """Workers for a cold run (shards/), when enough files must be parsed to pay for them."""
    if jobs <= 1 or not parallel_available():
        return None
    store = project.lowered
    pending = [s for s in loaded if not store.has(s, module_identity(s.resolved_path)[1])]
    processes = min(jobs, len(pending) // shard_protocol.FILES_PER_PROCESS)
    if len(pending) < shard_protocol.MIN_FILES or processes < 2:
        return None
    return shard_hub.Hub(project, pending, loaded, processes, stages)


def _outside_digests(project: ProjectIndex) -> dict[str, str]:
    """The bytes a replay must find unchanged besides the linted files: modules imported
    without being linted, those that failed to load (they may be fixed since), and the files
    imports looked for in vain (one may have appeared)."""
    paths = [m.path for m in project.modules.values() if not m.linted] + list(project.load_errors)
    out = missing_files_witnesses(project.missing_files)
    for path in paths:
        try:
            out[str(path)] = digest(path.read_bytes())
        except OSError:
            out[str(path)] = "unreadable"  # never equal to a digest: no replay
    return out


def _defines(rule: Rule, method: str) -> bool:
    return getattr(type(rule), method) is not getattr(Rule, method)


def load_source(path: Path, text: str | SourceFile | None) -> SourceFile:
    """The source to index for `path` (`text`, or read from disk): a notebook becomes its code
    cells as one module (notebooks.py). Raises SourceError for an unreadable or malformed file.
    A SourceFile is taken as it is (the language server's buffers parse their own way)."""
    if isinstance(text, SourceFile):
        return text
    if notebooks.is_notebook(path):
        return notebooks.load_source(path, text)
    return SourceFile(path, text if text is not None else read_source(path))


def parse_error_finding(path: Path, failure: ParseFailure) -> Finding:
    row, column = failure.row, failure.column
    return Finding(PARSE_ERROR, failure.message, Severity.ERROR, path.as_posix(), row, column, row, column)


def _filtered(findings: list[Finding], project: ProjectIndex, config: Config) -> list[Finding]:
    sources = {m.source.path.as_posix(): m.source for m in project.modules.values()}
    unique: dict[tuple, Finding] = {}
    for finding in findings:
        key = (finding.code, finding.path, finding.row, finding.column)
        if key in unique:
            continue  # a statement reached by several programs is reported once
        source = sources.get(finding.path)
        if source is not None and source.is_suppressed(finding.code, finding.row):
            continue
        if _per_file_ignored(finding, config):
            continue
        unique[key] = finding
    return sorted(unique.values(), key=lambda f: f.sort_key)


def _per_file_ignored(finding: Finding, config: Config) -> bool:
    if not config.per_file_ignores:
        return False
    try:
        relative = Path(finding.path).resolve().relative_to(config.root).as_posix()
    except ValueError:
        relative = finding.path
    for pattern, codes in config.per_file_ignores.items():
        if fnmatch(relative, pattern) or fnmatch(Path(relative).name, pattern):
            if any(c.upper() == "ALL" or finding.code.startswith(c.upper()) for c in codes):
                return True
    return False

