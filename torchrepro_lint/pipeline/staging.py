"""The stages of a run that the cache and `--jobs` change: lowering, programs, per-file and program rules.

A run (engine.lint_sources) lowers every file to IR, interprets the programs on the IR, then
runs the per-file rules, which need each file's LibCST tree. Each stage reuses what the cache
has and records what it read, so the next run can tell whether a cached result still holds
(digests.py values those reads now):

- IR by file content (lowered_store.py);
- a program's facts, while every module its run read has the same IR (ProgramRunner);
- a file's per-file findings, while the file and everything its rules read of the project
  (other modules' IR or text, the facts of the programs reaching it) are unchanged
  (ModuleChecker);
- a program's program-rule findings, while its facts and the text of the modules where they
  report or quote code are unchanged (ProgramChecker).

With jobs > 1 the per-file rules run in forked worker processes, largest files first: they
inherit the project, the trees kept within budget (tree_budget.py) and the program model, so
nothing is pickled but results. (Lowering stays in the main process: workers that lowered would have to
send trees back, or the rules would parse every file twice.)
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext

from torchrepro_lint import memory
from torchrepro_lint.findings import Finding
from torchrepro_lint.parsing.source import PARSES
from torchrepro_lint.pipeline.cache import digest, dumps_with_modules, loads_with_modules
from torchrepro_lint.pipeline.digests import Digests
from torchrepro_lint.pipeline.progress import NO_PROGRESS
from torchrepro_lint.pipeline.tree_budget import RELEASED
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import Reads, record
from torchrepro_lint.project.programs import interpret, program_entries
from torchrepro_lint.rules.base import any_may_fire
from torchrepro_lint.rules.context import LintContext


def _pool(jobs: int) -> ProcessPoolExecutor:
    # fork: workers inherit the project and program model instead of receiving them pickled
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"), initializer=_default_sigterm)


def _default_sigterm() -> None:
    """A pool worker ends quietly when _stop terminates it. It inherits the CLI's SIGTERM handler,
    which raises; a worker idle in the pool's queue then printed that exception's traceback."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End a pool now. Its own shutdown waits for every file already handed out, which on a
    large project is most of the run; Python 3.11 has no public way to stop its workers."""
    processes = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join()


def parallel_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class ProgramRunner:
    """The programs, each program's facts reused while the modules its run read are unchanged."""

    progress = NO_PROGRESS  # progress.py: the engine sets the run's own

    def __init__(self, project: ProjectIndex, cache, configuration: str, store, stats) -> None:
        self.project, self.cache, self.configuration, self.store, self.stats = project, cache, configuration, store, stats
        self._digests: Digests | None = None

    def find(self, console_scripts, hub=None, library_packages=()):
        """Every program; with a `hub` (shards/), interpreted by every process at once."""
        entries = program_entries(self.project, console_scripts, library_packages)
        if self.store is not None:  # (a previous run's, in the language server)
            self.project.adopt_recordings(lambda reads: self.store.reads.still_hold(reads, self.project))
        self.progress.start("programs", len(entries))
        if hub is not None:
            facts = hub.run_programs(entries, self.run)
            self.progress.advance("programs", len(entries))
        else:
            facts = []
            for e in entries:
                facts.append(self.run(self.project, e.module, e.as_main, e.function))
                self.progress.advance("programs")
        project = self.project
        by_id = {id(module): module for module in project.modules.values()}
        inert = {  # (answers with their reads: inert.py takes them again where those hold)
            key: (by_id[key], *found)
            for key, found in project.inert_imports.items()
            if key in by_id and found[1] is not None
        }
        project.recorded = (dict(project.import_walks), dict(project.callback_runs), dict(project.call_runs), inert)
        # The previous run's kept calls are done with. (`recordings_hold` closes over this
        # runner, which holds the project: a cycle the server's rare full collections would
        # leave, with the whole run's garbage, for dozens of edits.)
        project.call_runs_before, project.moved, project.recordings_hold = {}, None, None
        project.inert_before = {}
        self.stats.programs = len(entries)
        return [entry.program(found) for entry, found in zip(entries, facts)]

    def _digests_of(self, project) -> Digests:
        """One Digests for the programs of a run: what they read overlaps (the same imports)."""
        found = self._digests
        if found is None or found.project is not project:
            found = self._digests = Digests(project, [], self.store)
        return found

    def _unpickled(self, data: bytes, modules: dict):
        """A cached program's facts. A cache that lives across runs (the language server's)
        remembers them unpickled, given again while every module they point at is the same
        object in this run (ProjectIndex.reusable)."""
        memo = getattr(self.cache, "unpickled", None)
        if memo is None:
            return loads_with_modules(data, modules)
        found = memo.get(id(data))
        if found is not None and found[0] is data and all(modules.get(path) is module for path, module in found[2]):
            return found[1]
        used: list = []
        facts = loads_with_modules(data, modules, used)
        memo[id(data)] = (data, facts, tuple(dict.fromkeys(used)))
        self._remember_pickled(facts, data)
        if found is not None and found[0] is data:  # the same facts over other module objects:
            digests = self.cache.program_digests  # their digest (modules by path) is the same
            known = digests.get(id(found[1]))
            if known is not None and known[0] is found[1]:
                digests[id(facts)] = (facts, known[1], known[2])
        return facts

    def run(self, project, module, as_main, function=None):
        if self.cache is None:
            self.stats.programs_resolved += 1
            return interpret(project, module, as_main, function)
        key = digest(self.configuration, "program", str(module.path), as_main, function)
        digests = self._digests_of(project)
        found = self.cache.get("program", key)
        if found is not None:
            reads, data = found
            if digests.all_match(reads):
                try:
                    return self._unpickled(data, project.modules)
                except Exception:
                    pass
        with record(kept_apart=True) as reads:
            facts = interpret(project, module, as_main, function)
        self.stats.programs_resolved += 1
        data = dumps_with_modules(facts)
        self._remember_pickled(facts, data)
        self.cache.put("program", key, (self._values_of(key, reads, digests), data))
        return facts

    def _values_of(self, key: str, reads: Reads, digests: Digests) -> list:
        """digests.values(reads). The language server runs a program again on every edit of a
        module it ran, mostly with the same reads: their values are then the last run's, found
        again only for the modules that are other objects now (ReadValues.found_again). The 12
        programs an edit of a timm model file runs again took 1 ms each to value."""
        memo = getattr(self.cache, "program_reads", None)
        if memo is None or self.cache.persist:  # (values for the disk are sorted: Digests.values)
            return digests.values(reads.union())
        found = memo.get(key)
        values = None
        if found is not None and found[0].same_as(reads):
            values = self.store.reads.found_again(found[1], digests.of, digests.project)
        if values is None:
            values = digests.values(reads.union())
        memo[key] = (reads, values)
        return values

    def _remember_pickled(self, facts, data: bytes) -> None:
        pickled = getattr(self.cache, "pickled", None)
        if pickled is not None:  # (LoweredStore._pickled)
            pickled[id(facts)] = (facts, data)


# Set in the main process just before forking the per-file workers, which inherit it.
_CHECKER: ModuleChecker | None = None


class ModuleChecker:
    """Runs the per-file rules on every linted module, reusing cached findings where valid."""

    progress = NO_PROGRESS  # progress.py: the engine sets the run's own
    only: frozenset[str] | None = None  # the display paths to check (the engine's `checked`), None: all

    def __init__(self, context, rules, cache, configuration: str, store, stats, budget) -> None:
        self.context, self.rules, self.cache = context, rules, cache
        self.configuration, self.store, self.stats, self.budget = configuration, store, stats, budget
        self.errors: list[str] = []
        # Called before each rule: a sharded run answers other processes' questions there
        # (shards/), so the asker waits for one rule on one file, not a large file's rules.
        self.pause = None

    def run(self, jobs: int, hub=None) -> list[Finding]:
        """With a `hub` (shards/), each module is checked in the process that has its tree."""
        project = self.context.project
        digests = Digests(project, self.context.programs, self.store) if self.cache is not None else None
        findings: list[Finding] = []
        todo: list[ProjectModule] = []
        linted = project.linted_modules
        if self.only is not None:
            linted = [module for module in linted if module.source.path.as_posix() in self.only]
        self.progress.start("checked", len(linted))
        for module in linted:
            if not any_may_fire(self.rules, module.source.text):
                self.progress.advance("checked")
                continue
            cached = self._cached(module, digests)
            if cached is not None:
                self.stats.cache_hits += 1
                findings += cached[0]
                self.errors += cached[1]
                self.progress.advance("checked")
            else:
                todo.append(module)
        outcomes = hub.check(todo, self.context.programs, self) if hub is not None else self._check_all(todo, jobs)
        for module, (found, errors, reads) in outcomes:
            self.progress.advance("checked")
            findings += found
            self.errors += errors
            if self.cache is not None:
                values = digests.values(reads)
                self.cache.put("module", self._key(module), (values, found, errors))
        return findings

    def _key(self, module: ProjectModule) -> str:
        # (the display path: findings carry it, and it changes with the working directory)
        return digest(self.configuration, "module", module.source.path.as_posix(), str(module.path), self.store.text_digest(module))

    def _cached(self, module: ProjectModule, digests):
        if self.cache is None:
            return None
        found = self.cache.get("module", self._key(module))
        if found is None:
            return None
        reads, findings, errors = found
        return (findings, errors) if digests.all_match(reads) else None

    def _check_all(self, modules: list[ProjectModule], jobs: int):
        global _CHECKER
        if jobs <= 1 or len(modules) < 2 or not parallel_available():
            for module in modules:
                yield module, self.check(module)
            return
        ordered = sorted(modules, key=lambda m: -len(m.source.text))
        _CHECKER = self
        pool = _pool(jobs)
        try:
            results = pool.map(_check_in_worker, [m.path for m in ordered], chunksize=1)
            for module, (outcome, parses) in zip(ordered, results):
                PARSES[0] += parses
                yield module, outcome
        except BaseException:  # Ctrl-C, SIGTERM (cli.Terminated), or the consumer gave up
            _stop(pool)
            raise
        else:
            pool.shutdown()
        finally:
            _CHECKER = None

    def check(self, module: ProjectModule):
        """Findings, internal errors and the reads of every enabled per-file rule on `module`."""
        findings: list[Finding] = []
        errors: list[str] = []
        pin = self.store.pinned(module) if self.store is not None else nullcontext()
        with record() as reads, pin:
            for rule in self.rules:
                if not rule.may_fire_in(module.source.text):
                    continue
                if self.pause is not None:
                    self.pause()
                try:
                    findings.extend(f for f in rule.check_module(module, self.context) if f is not None)
                except Exception:  # a rule bug must not hide every other finding
                    errors.append(
                        f"{module.source.path.as_posix()}: internal error in {rule.code}: {_last_line(traceback.format_exc())}"
                    )
        if self.budget is not None:
            self.budget.after_checking(module)
        memory.churned(len(module.source.text))  # (what the rules built is garbage now)
        return findings, errors, reads


class ProgramChecker:
    """Runs the program rules program by program (each rule looks at one program at a time),
    each program's findings cached with what the rules read: that program's facts, and the text
    of the modules where they report or quote code. An edit elsewhere, even in a module the
    program runs, leaves them valid while the facts stay the same."""

    def __init__(self, context, rules, cache, configuration: str, store) -> None:
        self.context, self.rules, self.cache = context, rules, cache
        self.configuration, self.store = configuration, store
        self._hits: dict[int, tuple] = {}  # index -> (findings, errors) found by `uncached`

    def uncached(self) -> list[int]:
        """The indexes of the programs whose findings the cache does not hold (those it holds
        are kept for `run`)."""
        todo = []
        for i, program in enumerate(self.context.programs):
            cached = self._cached(program)
            if cached is None:
                todo.append(i)
            else:
                self._hits[i] = cached
        return todo

    def run(self, computed: dict | None = None) -> tuple[list[Finding], list[str]]:
        """Every program's findings, in program order, and the rules' errors. `computed`: index
        -> (findings, errors, reads) of the programs already checked (in a sharded run, by
        whichever process took them); the rest are taken from the cache or checked here."""
        computed = computed or {}
        findings: list[Finding] = []
        errors: list[str] = []
        for i, program in enumerate(self.context.programs):
            if i in computed:
                found, failed = self._put(program, *computed[i])
            else:
                found, failed = self._hits.get(i) or self._one(i)
            findings += found
            errors += failed
        return findings, list(dict.fromkeys(errors))  # a rule's bug, once, not once per program

    def check(self, index: int):
        """Findings, internal errors and the reads of every program rule on program `index`."""
        project = self.context.project
        view = LintContext(project, [self.context.programs[index]], self.context.config)
        findings: list[Finding] = []
        errors: list[str] = []
        # What is parsed or indexed before the rules run, to release what they add (not where the
        # modules live on: the next run's rules would parse and index them again)
        held = None if project.lives_on else self._held(project)
        with record() as reads:
            for rule in self.rules:
                try:
                    findings.extend(f for f in rule.check_programs(view) if f is not None)
                except Exception:  # a rule bug must not hide every other finding
                    errors.append(f"internal error in {rule.code}: {_last_line(traceback.format_exc())}")
        if held is not None:
            self._release_parsed(*held, reads)
        return findings, errors, reads

    @staticmethod
    def _held(project) -> tuple[set, set]:
        """The paths of the modules that have a tree, and of those that have an index."""
        modules = project.modules.items()
        return {path for path, m in modules if m.has_tree}, {path for path, m in modules if m._index is not None}

    def _release_parsed(self, had_trees: set, had_indexes: set, reads) -> None:
        """Drop the trees these rules parsed (to place a finding or quote code), and the indexes
        they built again on kept trees, as the per-file rules do: they were kept until the run
        ended (on torch's source one program's rules took a process of a sharded run 102 MB up,
        66 MB with this and the store's bound on indexes built for summaries). Trees and indexes
        built for summaries are the store's to keep (LoweredStore)."""
        modules = self.context.project.modules
        store = self.store
        for kind, path in list(reads):
            module = modules.get(path) if kind == "content" else None
            if module is None or store is not None and (path in store._summarised or path in store._indexed):
                continue
            if path not in had_trees and module.has_tree:
                RELEASED.release(module)
            elif path not in had_indexes and module._index is not None:
                module.drop_index()
            else:
                continue
            memory.churned(len(module.source.text))  # (freed in the middle of the heap: give it back)

    def _one(self, index: int):
        """From the cache, or checked here and cached."""
        program = self.context.programs[index]
        cached = self._cached(program)
        return cached if cached is not None else self._put(program, *self.check(index))

    def _key(self, program) -> str:
        return digest(self.configuration, "program findings", str(program.entry.path), program.kind, program.function)

    def _cached(self, program):
        if self.cache is None:
            return None
        found = self.cache.get("programs", self._key(program))
        if found is None or not Digests(self.context.project, [program], self.store).all_match(found[0]):
            return None
        return found[1], found[2]

    def _put(self, program, findings, errors, reads):
        # In the main process, as ModuleChecker.run does: the digests are of its project.
        if self.cache is not None:
            digests = Digests(self.context.project, [program], self.store)
            values = digests.values(reads)
            self.cache.put("programs", self._key(program), (values, findings, errors))
        return findings, errors


def _check_in_worker(path):
    before = PARSES[0]
    try:
        outcome = _CHECKER.check(_CHECKER.context.project.modules[path])
    except Exception:
        raise
    except BaseException:
        # Ctrl-C or SIGTERM (cli.Terminated): the stack has unwound, so atomic cache writes
        # cleaned up. Leave now: the pool would catch it as this file's result and wait for
        # the next file.
        os._exit(1)
    return outcome, PARSES[0] - before


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"
