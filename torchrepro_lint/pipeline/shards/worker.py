"""A worker's side of a sharded run: lower its share, interpret programs, check its files and run
program rules, answering the summary questions other processes ask about the trees it holds."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from torchrepro_lint import memory
from torchrepro_lint.pipeline.cache import dumps_with_modules, loads_with_modules
from torchrepro_lint.pipeline.shards import protocol
from torchrepro_lint.pipeline.shards.protocol import INTERRUPTS, ModulesByPath, Stages, lowered_outcome, take
from torchrepro_lint.parsing.source import PARSES, SourceFile
from torchrepro_lint.project import summaries
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule


# -- the worker's side -------------------------------------------------------------------------
def work(
    connection, shard: int, project: ProjectIndex, pending: list[SourceFile], known: dict, stages: Stages, counters, processes: int,
    main_ends: list,
) -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)  # held by the main process while it forked
    # The main process's ends of the pipes, inherited by the fork: closed, so that when the main
    # process dies this worker's reads end (EOF) and its writes fail, and it exits.
    for end in main_ends:
        end.close()
    parent = os.getppid()

    def tasks(counter, count: int):
        """The numbers this worker takes, until none is left or the main process is gone."""
        while (i := take(counter)) < count:
            if os.getppid() != parent:  # orphaned: nobody will read what we make
                raise _Stopped
            yield i

    before = PARSES[0]
    try:
        budget = stages.budget(processes)
        own = {}
        outcomes = {}
        for source in _files_to_lower(pending, tasks(counters["file"], len(pending)), shard):
            outcome = protocol.lower(project, source, budget)
            if isinstance(outcome, ProjectModule):
                own[outcome.path] = outcome
            outcomes[source.path] = lowered_outcome(project, outcome)
        pieces = protocol.chunks(list(outcomes.items()))
        del outcomes
        for i, piece in enumerate(pieces):
            connection.send(("lowered", dict(piece), i == len(pieces) - 1))
        del pieces
        memory.after_message()

        order = None
        while order is None:  # the modules it lacks, in pieces; the last one gives the order
            _, layout, order = _expect(connection, "project")
            _rebuild(project, known, layout, order)
        del layout
        memory.after_message()
        _, jobs = _expect(connection, "programs")
        runner = stages.runner(project)
        resolved_before = runner.stats.programs_resolved
        facts = {}
        for i in tasks(counters["program"], len(jobs)):
            path, as_main, function = jobs[i]
            module = project.modules.get(path) or project.load_path(path)
            facts[i] = runner.run(project, module, as_main, function)
        # Pickled together: programs share much of their facts (what the same imports did).
        # The bytes are kept: the main process sends back only the facts this worker lacks.
        interpreted = dumps_with_modules(facts)
        del facts
        connection.send(("facts", interpreted, runner.stats.programs_resolved - resolved_before))

        _, layout, order, shells, received, paths, treeless, rule_jobs = _expect(connection, "check")
        _rebuild(project, known, layout, order)
        programs = _programs(project, shells, [interpreted, *received])
        del layout, shells, received, interpreted
        memory.after_message()
        questions = _Questions(connection, project, own)
        project.lowered.remote = questions.ask
        checker = stages.checker(project, programs, budget)
        checker.pause = questions.serve
        check = checker.check
        results = {}
        for path in paths:
            questions.serve()
            results[path] = check(project.modules[path])
        for i in tasks(counters["check"], len(treeless)):
            questions.serve()
            results[treeless[i]] = check(project.modules[treeless[i]])
        check_program = stages.program_checker(project, programs)
        ruled = {}
        mine, anyone = rule_jobs  # (the programs whose entry module's tree is here, the rest)
        for index in mine:
            questions.serve()
            ruled[index] = check_program(index)
        for i in tasks(counters["rules"], len(anyone)):
            questions.serve()
            ruled[anyone[i]] = check_program(anyone[i])
        summaries_computed = project.lowered.summaries_computed()
        connection.send(("done", results, ruled, summaries_computed, PARSES[0] - before, _peak_rss_mib()))
        questions.serve(until_stopped=True)  # others may still ask about our trees
    except (EOFError, OSError, _Stopped):
        pass
    except BaseException:  # noqa: BLE001 - reported to the main process, which takes over
        try:
            connection.send(("failed", traceback.format_exc().strip().splitlines()[-1]))
        except Exception:  # noqa: BLE001
            pass
    finally:
        os._exit(0)  # no teardown of the trees, no atexit handlers of the parent


def _programs(project: ProjectIndex, shells: bytes, facts: list[bytes]) -> list:
    """The run's programs, from their `shells` (every field but the facts, pickled) and the
    pieces of their facts, each a dict (program index -> facts) pickled by the process that
    interpreted those programs (this one's included: Hub.run_programs)."""
    modules = ModulesByPath(project)
    by_index = {}
    for piece in facts:
        by_index.update(loads_with_modules(piece, modules))
    return [replace(shell, facts=by_index[i]) for i, shell in enumerate(loads_with_modules(shells, modules))]


def _files_to_lower(pending: list[SourceFile], taken, shard: int):
    """A worker's files to lower: those it takes, or those the test hook ASSIGNED to it."""
    if protocol.ASSIGNED is None:
        return (pending[i] for i in taken)
    return (source for source in pending if protocol.ASSIGNED(source) == shard)


def _peak_rss_mib() -> int:
    try:
        import resource
    except ImportError:  # not on this platform
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak >> 20 if sys.platform == "darwin" else peak >> 10  # bytes there, KiB elsewhere


def _expect(connection, kind: str) -> tuple:
    message = connection.recv()
    if message[0] != kind:
        raise _Stopped  # "stop": the main process needs nothing more of this worker
    return message


class _Stopped(Exception):
    """The main process said stop."""


class _Questions:
    """A worker's side of the summary questions: asking for another shard's, answering for its own."""

    def __init__(self, connection, project: ProjectIndex, own: dict) -> None:
        self.connection, self.project, self.own = connection, project, own
        self._answers: dict = {}

    def ask(self, module: ProjectModule, kind: str, argument: str, compute):
        if module.path in self.own or module.has_tree or module.path not in self.project.modules:
            return compute()
        key = (module.path, kind, argument)
        self.connection.send(("need", key))
        while key not in self._answers:
            self._handle(self.connection.recv())
        return self._answers.pop(key)

    def serve(self, until_stopped: bool = False) -> None:
        """Answer the questions that have arrived; with `until_stopped`, until told to stop."""
        try:
            while until_stopped or self.connection.poll():
                self._handle(self.connection.recv())
        except _Stopped:
            if not until_stopped:
                raise

    def _handle(self, message) -> None:
        kind = message[0]
        if kind == "compute":
            _, key, asker = message
            path, summary_kind, argument = key
            value = summaries.current(self.project.modules[path], summary_kind, argument)
            self.connection.send(("answer", key, value, asker))
        elif kind == "answer":
            self._answers[message[1]] = message[2]
        elif kind == "stop":
            raise _Stopped


def _rebuild(project: ProjectIndex, known: dict, layout: list[tuple], order: list[Path] | None) -> None:
    """Make the worker's project the main process's: add the modules in `layout` with the IR
    they were sent with, then put every module in the main process's `order` (a module only
    this worker loaded goes last; None: more modules are coming). The worker's own modules
    keep their trees."""
    store = project.lowered
    for path, display, linted, module_ir, ir_digest, text in layout:
        source = known.get(display) if text is None else SourceFile(Path(display), text)
        store.prime(path, module_ir, ir_digest)
        project.add(source, linted=linted)
    if order is None:
        return
    modules = project.modules
    ordered = {path: modules[path] for path in order if path in modules}
    ordered.update((path, module) for path, module in modules.items() if path not in ordered)
    project.replace_modules(ordered)
