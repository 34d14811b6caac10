"""Cold runs on several cores: each process parses, lowers and later checks its own share of files.

A LibCST tree cannot be sent between processes (pickling one costs more than parsing it), and a
file's tree is needed twice: to lower it to IR before the program model exists, and by the
per-file rules after. So with `--jobs N` the files to parse are dealt into N shards, largest
first. Workers are forked before anything is parsed; each lowers its shard in file order and
streams the IR back, keeping its trees (within TREE_BUDGET). The main process lowers its own
shard meanwhile, builds the project from all the IR in file order, and runs the programs.
Then each worker receives the IR of the modules it lacks and the program facts, rebuilds the
same project around its own trees, and runs the per-file rules on its modules, while the main
process checks its own. Results come back as findings, errors and reads, as from ModuleChecker.

If a worker dies, the main process does that worker's share itself.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from pathlib import Path

from torchrepro_lint.cache import dumps_with_modules, loads_with_modules
from torchrepro_lint.project.index import ProjectIndex, ProjectModule
from torchrepro_lint.source import PARSES, ParseFailure, SourceFile

# Below this many files to parse, forking costs more than it saves.
MIN_FILES = 24


class WorkerLost(Exception):
    """A worker exited or failed: its share is done in the main process instead."""


def deal(sources: list[SourceFile], shards: int) -> list[int]:
    """Shard number of each source: largest first, each to the least loaded shard (0 = main)."""
    load = [0] * shards
    owner = [0] * len(sources)
    for i in sorted(range(len(sources)), key=lambda i: -len(sources[i].text)):
        shard = min(range(shards), key=load.__getitem__)
        owner[i] = shard
        load[shard] += len(sources[i].text)
    return owner


class Shards:
    """The worker processes of a sharded run, from the main process's side."""

    def __init__(self, project: ProjectIndex, sources: list[SourceFile], jobs: int, make_checker) -> None:
        self.project = project
        self.owner = {source.path: shard for source, shard in zip(sources, deal(sources, jobs))}
        self.workers: dict[int, _Worker] = {}
        context = multiprocessing.get_context("fork")
        for shard in range(1, jobs):
            mine = [s for s in sources if self.owner[s.path] == shard]
            if mine:
                self.workers[shard] = _Worker.start(context, project, mine, make_checker)

    def mine(self, source: SourceFile) -> bool:
        """Whether the main process lowers this source itself."""
        shard = self.owner.get(source.path, 0)
        return shard == 0 or shard not in self.workers

    def lowered(self, source: SourceFile):
        """The IR of a source a worker lowers: (module_ir, ir_digest), or raises ParseFailure /
        RecursionError as lowering did, or WorkerLost."""
        worker = self.workers[self.owner[source.path]]
        outcome = worker.receive(source.path)
        kind = outcome[0]
        if kind == "ir":
            return outcome[1], outcome[2]
        if kind == "parse failure":
            raise ParseFailure(*outcome[1])
        if kind == "recursion":
            raise RecursionError
        raise WorkerLost(outcome[1])

    def lost(self, source: SourceFile) -> None:
        """Main takes over a dead worker's share from this source on."""
        shard = self.owner[source.path]
        worker = self.workers.pop(shard, None)
        if worker is not None:
            worker.stop()

    def check(self, modules: list[ProjectModule], programs, main_check):
        """Yield (module, (findings, errors, reads)) for every module, each checked where its tree
        is; summaries the workers computed are merged into the main store."""
        share: dict[int, list[ProjectModule]] = {shard: [] for shard in [0, *self.workers]}
        spare = sorted((m for m in modules if self.owner.get(m.path, 0) not in share), key=lambda m: -len(m.source.text))
        for module in modules:
            shard = self.owner.get(module.path, 0)
            if shard in share and module not in spare:
                share[shard].append(module)
        for module in spare:  # no tree anywhere (IR from the cache): to the least loaded
            shard = min(share, key=lambda s: sum(len(m.source.text) for m in share[s]))
            share[shard].append(module)
        layout = self._layout()
        facts = dumps_with_modules(programs)
        sent = {}
        for shard, worker in list(self.workers.items()):
            try:
                worker.send(("check", layout, facts, [m.path for m in share[shard]]))
                sent[shard] = worker
            except WorkerLost:
                share[0] += share[shard]
        for module in share[0]:
            yield module, main_check(module)
        for shard, worker in sent.items():
            try:
                results, summaries, parses = worker.receive_results()
            except WorkerLost:
                for module in share[shard]:
                    yield module, main_check(module)
                continue
            PARSES[0] += parses
            self.project.lowered.add_summaries(summaries)
            for module in share[shard]:
                yield module, results[module.path]

    def _layout(self) -> list[tuple]:
        """Main's project, module by module in order, for a worker to rebuild: each module's
        path, display path, linted flag, and IR with its digest (text only when read from disk
        after the fork)."""
        store = self.project.lowered
        out = []
        for path, module in self.project.modules.items():
            out.append((path, str(module.source.path), module.linted, module._ir, store.ir_digests.get(path), module.source.text))
        return out

    def close(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()


class _Worker:
    """One forked worker: a pipe, and the order in which its results arrive."""

    def __init__(self, process, connection) -> None:
        self.process, self.connection = process, connection
        self._early: dict = {}

    @classmethod
    def start(cls, context, project, sources, make_checker) -> _Worker:
        ours, theirs = context.Pipe()
        process = context.Process(target=_work, args=(theirs, project, sources, make_checker), daemon=True)
        process.start()
        theirs.close()
        return cls(process, ours)

    def receive(self, path):
        """The lowering outcome for `path` (the worker sends them in file order)."""
        while path not in self._early:
            try:
                message = self.connection.recv()
            except (EOFError, OSError) as exc:
                raise WorkerLost(f"worker exited: {exc!r}") from None
            if message[0] == "failed":
                raise WorkerLost(message[1])
            self._early[message[1]] = message[2]
        return self._early.pop(path)

    def send(self, message) -> None:
        try:
            self.connection.send(message)
        except (OSError, ValueError) as exc:
            raise WorkerLost(f"worker gone: {exc!r}") from None

    def receive_results(self):
        try:
            message = self.connection.recv()
        except (EOFError, OSError) as exc:
            raise WorkerLost(f"worker exited: {exc!r}") from None
        if message[0] != "checked":
            raise WorkerLost(message[1])
        return message[1], message[2], message[3]

    def stop(self) -> None:
        try:
            self.connection.send(("stop",))
        except (OSError, ValueError):
            pass
        self.connection.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()


# -- the worker's side -------------------------------------------------------------------------
def _work(connection, project: ProjectIndex, sources: list[SourceFile], make_checker) -> None:
    before = PARSES[0]
    try:
        own, budget = _lower_share(connection, project, sources)
        message = connection.recv()
        if message[0] == "check":
            _, layout, facts, paths = message
            _rebuild(project, own, layout)
            programs = loads_with_modules(facts, project.modules)
            checker = make_checker(project, programs, budget)
            results = {path: checker.check(project.modules[path]) for path in paths}
            connection.send(("checked", results, project.lowered.summaries_computed(), PARSES[0] - before))
            connection.recv()  # ("stop",)
    except EOFError:
        pass
    except BaseException:  # noqa: BLE001 - reported to the main process, which takes over
        try:
            connection.send(("failed", traceback.format_exc().strip().splitlines()[-1]))
        except Exception:  # noqa: BLE001
            pass
    finally:
        os._exit(0)  # no teardown of the trees, no atexit handlers of the parent


def _lower_share(connection, project: ProjectIndex, sources: list[SourceFile]) -> dict:
    """Lower each source (keeping trees within the budget), streaming each outcome back."""
    from torchrepro_lint.staging import TreeBudget

    budget = TreeBudget()
    own: dict = {}
    for source in sources:
        try:
            module = project.add(source)
        except ParseFailure as exc:
            connection.send(("lowered", source.path, ("parse failure", (exc.message, exc.row, exc.column))))
            continue
        except RecursionError:
            connection.send(("lowered", source.path, ("recursion",)))
            continue
        budget.after_indexing(module)
        own[module.path] = module
        connection.send(("lowered", source.path, ("ir", module._ir, project.lowered.ir_digests.get(module.path))))
    return own, budget


def _rebuild(project: ProjectIndex, own: dict, layout: list[tuple]) -> None:
    """Make the worker's project the main process's: same modules, same order, same IR; the
    worker's own modules keep their trees."""
    store = project.lowered
    project.modules.clear()
    for path, display, linted, module_ir, ir_digest, text in layout:
        module = own.get(path)
        if module is None:
            source = SourceFile(_path(display), text)
            store.prime(path, module_ir, ir_digest)
            module = project.add(source, linted=linted)
        module.linted = linted
        project.modules[path] = module


def _path(text: str) -> Path:
    return Path(text)
