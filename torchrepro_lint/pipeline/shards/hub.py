"""The main process's side of a sharded run: the Hub forks the workers, hands out work, routes
summary questions between processes, and takes over the share of a worker that dies or hangs."""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path

from torchrepro_lint import memory
from torchrepro_lint.pipeline.cache import dumps_with_modules, loads_with_modules
from torchrepro_lint.pipeline.shards import protocol
from torchrepro_lint.pipeline.shards.protocol import (
    INTERRUPTS, MAIN, ModulesByPath, Stages, WorkerHung, WorkerLost, allowance, take,
)
from torchrepro_lint.pipeline.shards import worker as worker_side  # by module: a test replaces worker_side.work
from torchrepro_lint.parsing.source import PARSES, SourceFile
from torchrepro_lint.project import summaries
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule


# -- the main process's side -------------------------------------------------------------------
class Hub:
    """The worker processes of a sharded run, and the routing of summary questions."""

    def __init__(
        self, project: ProjectIndex, sources: list[SourceFile], known: list[SourceFile], processes: int, stages: Stages
    ) -> None:
        """Fork `processes` - 1 workers to lower `sources` (the files to parse) with this one;
        `known` is every file read so far, which the workers need not be sent again."""
        self.project = project
        # Largest first, each to whichever process is free: the shares end together.
        self.pending = sorted(sources, key=lambda source: -len(source.text))
        self.workers: dict[int, _Worker] = {}
        self.summaries_asked = 0
        self.programs_resolved = 0  # by the workers
        self.peak_rss_mib = 0  # the largest worker's, when it finished checking
        self.program_rules_in_workers = 0  # programs whose rules a worker ran
        # index -> (findings, errors, reads) of each program whose rules ran in the check stage
        self.program_rules_done: dict[int, tuple] = {}
        self._rule_jobs: list[int] = []  # the programs whose rules are to run, by index
        # (the shard that interpreted them, their indexes, their facts pickled), for the workers
        # that lack them; the workers keep the facts they interpreted
        self._facts: list[tuple[int, frozenset, bytes]] = []
        self.facts_sent: dict[int, frozenset] = {}  # shard -> the programs whose facts it was sent
        self._check_program = None  # the main process's: (index) -> (findings, errors, reads)
        context = multiprocessing.get_context("fork")
        # Shared by all processes: the next file to lower, program to interpret, file without
        # a tree to check, and program to run the program rules on.
        self._next = {stage: context.Value("i", 0) for stage in ("file", "program", "check", "rules")}
        self.processes = processes
        _OPEN.append(self)  # before any fork: an interrupt from here on finds its workers
        for shard in range(1, processes):
            with _interrupts_held():  # a worker forked is a worker known: abort() will find it
                self.workers[shard] = _Worker.start(
                    context, shard, project, self.pending, known, stages, self._next, processes, [w.connection for w in self.workers.values()]
                )
        # resolved path -> the shard that lowered it (questions about it go there)
        self.shard_of: dict[Path, int] = {}
        self.kept: set[Path] = set()  # modules whose tree a worker kept after lowering
        self._sent: dict[int, set] = {shard: set() for shard in self.workers}  # modules each worker has
        self._answers: dict = {}  # answers to the main process's own questions
        self._forwarded: dict[int, set] = {}  # shard -> (question, asker) it has not answered yet
        self._done: dict[int, tuple] = {}

    def my_share(self):
        """The files the main process lowers: taken one by one while the workers take theirs."""
        if protocol.ASSIGNED is not None:
            yield from (source for source in self.pending if protocol.ASSIGNED(source) == MAIN)
            return
        while (i := take(self._next["file"])) < len(self.pending):
            yield self.pending[i]

    def collect(self):
        """(source, outcome) for every file a worker lowered: its IR, digest and whether the
        worker kept its tree, or its parse failure. Files taken by a worker that was lost are
        left out: the caller lowers them itself."""
        outcomes: dict[Path, tuple] = {}
        # Every file is taken by now: a worker still lowering holds one, at most the largest.
        # (Under the test hook ASSIGNED, it may hold all of its own.)
        largest = max((len(s.text) for s in self.pending), default=0)
        for shard, worker in list(self.workers.items()):
            received = {}
            try:
                last = False
                while not last:  # (in pieces of protocol.MODULES_PER_MESSAGE files)
                    message = worker.receive(allowance(largest))
                    if message[0] != "lowered":
                        raise WorkerLost(message[1])
                    _, piece, last = message
                    received.update(piece)
                    del message, piece
            except WorkerLost as lost:
                self._lose(shard, hung=isinstance(lost, WorkerHung))
                continue
            for path, outcome in received.items():
                outcomes[path] = (shard, outcome)
            memory.after_message()
        for source in self.pending:
            found = outcomes.get(source.path)
            if found is None:
                continue  # lowered here, or lost
            shard, outcome = found
            if outcome[0] == "ir":
                self.shard_of[source.path.resolve()] = shard
                if outcome[3]:
                    self.kept.add(source.path.resolve())
            yield source, outcome

    def share_project(self) -> None:
        """Send each worker the modules it lacks (after lowering, and before checking)."""
        for shard, worker in list(self.workers.items()):
            pieces = protocol.chunks(self._layout(shard))
            try:
                for i, piece in enumerate(pieces):
                    last = i == len(pieces) - 1
                    worker.send(("project", piece, list(self.project.modules) if last else None))
            except WorkerLost:
                self._lose(shard)
            del pieces
            memory.after_message()

    # programs
    def run_programs(self, entries, run) -> list:
        """The facts of every program entry, interpreted here and in the workers alike."""
        jobs = [(e.module.path, e.as_main, e.function) for e in entries]
        for shard, worker in list(self.workers.items()):
            try:
                worker.send(("programs", jobs))
            except WorkerLost:
                self._lose(shard)
        facts: list = [None] * len(entries)
        mine = []
        while (i := take(self._next["program"])) < len(entries):
            facts[i] = run(self.project, entries[i].module, entries[i].as_main, entries[i].function)
            mine.append(i)
        received = {}
        for shard, worker in list(self.workers.items()):
            try:
                received[shard] = worker.receive(allowance())[1:]  # it holds one program at most
            except WorkerLost as lost:
                self._lose(shard, hung=isinstance(lost, WorkerHung))
        # The facts the workers lack, pickled before theirs are unpickled here: pickling keeps
        # every object it meets alive until it ends, and all the programs' facts at once, when
        # the workers were sent them to check, was the main process's peak on torch's source.
        self._add_facts(MAIN, {i: facts[i] for i in mine})
        modules = ModulesByPath(self.project)
        for shard, (data, resolved) in received.items():
            try:
                theirs = loads_with_modules(data, modules)
            except KeyError:
                self._lose(shard)
                continue
            for i, found in theirs.items():
                facts[i] = found
            self._facts.append((shard, frozenset(theirs), data))  # for the other workers
            self.programs_resolved += resolved
        del received
        memory.after_message()
        again = {}
        for i, entry in enumerate(entries):
            if facts[i] is None:  # taken by a worker that was lost
                facts[i] = again[i] = run(self.project, entry.module, entry.as_main, entry.function)
        if again:
            self._add_facts(MAIN, again)
        return facts

    def _add_facts(self, shard: int, facts: dict) -> None:
        """Keep `facts` (program index -> facts) pickled for the workers that did not interpret them."""
        if self.workers:
            self._facts.append((shard, frozenset(facts), dumps_with_modules(facts)))

    # checking
    def share_program_rules(self, indexes: list[int], check_program) -> None:
        """Before check: the programs (by index) whose program rules every process takes once
        its files are checked (each first those whose entry module's tree it has, then any of
        the rest: _rule_jobs_by_shard), and how the main process runs them on one."""
        self._rule_jobs, self._check_program = indexes, check_program

    def check(self, modules: list[ProjectModule], programs, checker):
        """Yield (module, (findings, errors, reads)) for every module in order, each checked
        where its tree is; summaries the workers computed are merged into the main store. The
        program rules run meanwhile (share_program_rules), into `program_rules_done`."""
        # A module is checked where its tree is; those without a tree anywhere (dropped within
        # budget, or IR from the cache) by whichever process is free, largest first.
        share: dict[int, list[ProjectModule]] = {shard: [] for shard in [MAIN, *self.workers]}
        treeless = []
        for module in modules:
            shard = self.shard_of.get(module.path, MAIN)
            if module.path in self.kept and shard in share or shard == MAIN and module.has_tree:
                share[shard].append(module)
            else:
                treeless.append(module)
        treeless.sort(key=lambda m: -len(m.source.text))
        rule_jobs = self._rule_jobs_by_shard(programs)
        # The programs without their facts; each worker is sent the facts it did not interpret
        # (run_programs pickled them), and keeps those it did.
        shells = dumps_with_modules([replace(program, facts=None) for program in programs])
        order, anyone = list(self.project.modules), [m.path for m in treeless]
        largest_treeless = len(treeless[0].source.text) if treeless else 0
        for shard, worker in list(self.workers.items()):
            layout = self._layout(shard)  # modules loaded since share_project
            lacking = [(indexes, data) for origin, indexes, data in self._facts if origin != shard]
            self.facts_sent[shard] = frozenset().union(*(indexes for indexes, _ in lacking))
            try:
                worker.send(("check", layout, order, shells, [data for _, data in lacking], [m.path for m in share[shard]], anyone, (rule_jobs[shard], rule_jobs[None])))
            except WorkerLost:
                self._lose(shard)
                continue
            worker.expect(allowance(sum(len(m.source.text) for m in share[shard]) + largest_treeless))
        self._facts.clear()
        memory.after_message()
        store = self.project.lowered
        # Until close(): the program rules and the cache's digests may ask for summaries too.
        store.remote = self._ask
        results: dict[Path, tuple] = {}
        checker.pause = lambda: self._pump(block=False)
        main_check = checker.check
        for module in share[MAIN]:
            self._pump(block=False)
            results[module.path] = main_check(module)
        while (i := take(self._next["check"])) < len(treeless):
            self._pump(block=False)
            results[treeless[i].path] = main_check(treeless[i])
        for index in rule_jobs[MAIN]:
            self._pump(block=False)
            self.program_rules_done[index] = self._check_program(index)
        shared_rule_jobs = rule_jobs[None]
        while (i := take(self._next["rules"])) < len(shared_rule_jobs):
            self._pump(block=False)
            self.program_rules_done[shared_rule_jobs[i]] = self._check_program(shared_rule_jobs[i])
        while len(self._done) < len(self.workers):
            self._pump(block=True, awaited=[shard for shard in self.workers if shard not in self._done])
        for shard, (checked, ruled, computed, parses, peak_rss) in self._done.items():
            PARSES[0] += parses
            self.peak_rss_mib = max(self.peak_rss_mib, peak_rss)
            store.add_summaries(computed)
            results.update(checked)
            # (the programs a lost worker took are left out: ProgramChecker.run checks them)
            self.program_rules_done.update(ruled)
            self.program_rules_in_workers += len(ruled)
        for module in modules:
            if module.path not in results:  # its worker was lost: check it here
                results[module.path] = main_check(module)
            yield module, results[module.path]

    def _rule_jobs_by_shard(self, programs) -> dict:
        """The programs whose rules run (by index), by the process that must run them; None:
        any process. A program whose entry module is large runs where that module's tree is,
        for its findings are mostly reported there: elsewhere the rules would parse it again,
        and a parse needs far more memory than the tree for a moment (on torch's source,
        program rules report into a 500 KB module of literals, a program of its own, whose
        parse needs about 640 MB: memory.py; the likely cause of a 600 MB spike once seen
        while a run's program rules ran). The rest go to whichever process is free: all tied to
        their trees' processes, the main process ran about 145 of torch's 160 alone."""
        out: dict = {shard: [] for shard in [MAIN, *self.workers, None]}
        for index in self._rule_jobs:
            entry = programs[index].entry
            shard = self.shard_of.get(entry.path, MAIN)
            if len(entry.source.text) < memory.LARGE_PARSE:
                shard = None
            elif shard != MAIN and not (entry.path in self.kept and shard in self.workers):
                shard = None
            elif shard == MAIN and not entry.has_tree:
                shard = None
            out[shard].append(index)
        return out

    def _layout(self, shard: int) -> list[tuple]:
        """The modules of the main process's project that worker `shard` has not been sent, for
        it to add: each module's path, display path, linted flag, IR and digest, and its text
        where the worker has never seen it (None for the files read before it was forked)."""
        store = self.project.lowered
        worker_sources = self.workers[shard].known
        sent = self._sent[shard]
        out = []
        for path, module in self.project.modules.items():
            if path in sent or self.shard_of.get(path) == shard:
                continue
            sent.add(path)
            text = None if str(module.source.path) in worker_sources else module.source.text
            out.append((path, str(module.source.path), module.linted, module._ir, store.ir_digests.get(path), text))
        return out

    def _ask(self, module: ProjectModule, kind: str, argument: str, compute):
        shard = self.shard_of.get(module.path, MAIN)
        if shard not in self.workers or module.has_tree:
            return compute()
        key = (module.path, kind, argument)
        self.summaries_asked += 1
        try:
            self.workers[shard].send(("compute", key, MAIN))
        except WorkerLost:
            self._lose(shard)
            return compute()
        # it answers before its next rule: one rule on one file, then this module's summary
        self.workers[shard].expect(allowance(len(module.source.text)))
        while key not in self._answers:
            if shard not in self.workers:  # lost while we waited
                return compute()
            self._pump(block=True, awaited=[shard])
        return self._answers.pop(key)

    def _pump(self, block: bool, awaited=()) -> None:
        """Handle the messages that have arrived. With `block`, wait for at least one, or until
        one of the `awaited` workers has been silent past its allowance: that one is hung."""
        by_connection = {w.connection: shard for shard, w in self.workers.items()}
        if not by_connection:
            return
        # Forwarded questions wait on their owners too; a worker waiting for an answer is not silent.
        awaited = {s for s in [*awaited, *(o for o, asked in self._forwarded.items() if asked)] if s in self.workers}
        counted = [self.workers[s] for s in awaited if not self.workers[s].asking]
        timeout = max(0.0, min(w.deadline for w in counted) - time.monotonic()) if block and counted else None
        ready = wait(list(by_connection), timeout=timeout if block else 0)
        if block and not ready:
            for shard in sorted(awaited):
                worker = self.workers[shard]
                if not worker.asking and worker.deadline <= time.monotonic():
                    self._lose(shard, hung=True)
            return
        for connection in ready:
            shard = by_connection[connection]
            try:
                message = self.workers[shard].receive()
            except WorkerLost:
                self._lose(shard)
                continue
            self._handle(shard, message)

    def _handle(self, shard: int, message) -> None:
        kind = message[0]
        if kind == "need":  # a worker's question: answer it here, or pass it to the tree's owner
            key = message[1]
            self.summaries_asked += 1
            self.workers[shard].asking = True
            owner = self.shard_of.get(key[0], MAIN)
            if owner in self.workers and owner != shard:
                try:
                    self.workers[owner].send(("compute", key, shard))
                    if not self._forwarded.get(owner):
                        self.workers[owner].expect(allowance(len(self._text_of(key[0]))))
                    self._forwarded.setdefault(owner, set()).add((key, shard))
                    return
                except WorkerLost:
                    self._lose(owner)
            self._reply(shard, key, self._compute_here(key))
        elif kind == "answer":
            _, key, value, asker = message
            self._forwarded.get(shard, set()).discard((key, asker))
            if asker == MAIN:
                self._answers[key] = value
            else:
                self._reply(asker, key, value)
        elif kind == "done":
            self._done[shard] = message[1:]
        else:  # "failed"
            self._lose(shard)

    def _reply(self, shard: int, key, value) -> None:
        worker = self.workers.get(shard)
        if worker is None:
            return  # it is gone; its share is checked here
        try:
            worker.send(("answer", key, value))
        except WorkerLost:
            self._lose(shard)
            return
        worker.asking = False
        worker.heard_now()  # it goes on with the work it held

    def _text_of(self, path: Path) -> str:
        module = self.project.modules.get(path)
        return module.source.text if module is not None else ""

    def _compute_here(self, key):
        path, kind, argument = key
        module = self.project.modules.get(path) or self.project.load_path(path)
        return summaries.current(module, kind, argument)

    def _lose(self, shard: int, hung: bool = False) -> None:
        """A worker failed: the main process does its share (its IR, checks, answers). A hung
        one is killed, and the user told: the run takes longer than it should."""
        worker = self.workers.pop(shard, None)
        self._done.pop(shard, None)
        if worker is not None and hung:
            print(
                f"torchrepro-lint: warning: worker process {worker.process.pid} sent nothing for "
                f"{worker.silence:.0f} s; stopped it, and its share is done by the main process",
                file=sys.stderr,
            )
            worker.kill()
        elif worker is not None:
            worker.stop()
        for path, owner in list(self.shard_of.items()):
            if owner == shard:
                del self.shard_of[path]
                self.kept.discard(path)
        for key, asker in sorted(self._forwarded.pop(shard, ()), key=repr):  # questions it never answered
            self._reply(asker, key, self._compute_here(key))

    def close(self) -> None:
        self.project.lowered.remote = None
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()
        _forget(self)

    def abort(self) -> None:
        """The run was interrupted (Ctrl-C, SIGTERM): end every worker now, not after its work.
        SIGTERM lets a worker's own handlers run, so a cache entry it was writing is removed,
        not left half-written; one that does not end at once is killed."""
        self.project.lowered.remote = None
        for worker in self.workers.values():
            worker.terminate()
        self.workers.clear()
        _forget(self)




@contextmanager
def _interrupts_held():
    """Ctrl-C and SIGTERM wait (the kernel keeps them pending) until the block ends: one that
    came between a fork and the hub's recording of the worker would leave that worker running
    after the run. The forked worker inherits the mask and lifts it first thing (_work)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)


# Hubs not closed yet. The engine aborts them all when a run is interrupted, which also covers
# an interrupt that comes while a hub is still forking its workers (no hub was returned yet).
_OPEN: list[Hub] = []


def abort_open_hubs() -> None:
    for hub in list(_OPEN):
        hub.abort()


def _forget(hub: Hub) -> None:
    if hub in _OPEN:
        _OPEN.remove(hub)


class _Worker:
    """One forked worker, from the main process's side: a pipe."""

    def __init__(self, process, connection, known: dict) -> None:
        self.process, self.connection, self.known = process, connection, known
        self.asking = False  # waiting for the answer to a question it asked (not silent)
        self.heard = time.monotonic()  # when it last sent something, or was given new work
        self.patience = allowance()  # how long it may stay silent from then

    def expect(self, patience: float) -> None:
        """It was given work that may keep it silent for up to `patience` seconds."""
        self.patience = patience
        self.heard_now()

    def heard_now(self) -> None:
        self.heard = time.monotonic()

    @property
    def deadline(self) -> float:
        return self.heard + self.patience

    @property
    def silence(self) -> float:
        return time.monotonic() - self.heard

    @classmethod
    def start(cls, context, shard, project, pending, known_sources, stages, counters, processes, others) -> _Worker:
        """Fork a worker to take from `pending`; it inherits `known_sources` (every file read so
        far), so the project is later sent to it without their text. `others`: the main
        process's ends of the workers forked before, which the new one must not hold open."""
        known = {str(s.path): s for s in known_sources}
        ours, theirs = context.Pipe()
        process = context.Process(
            target=worker_side.work, args=(theirs, shard, project, pending, known, stages, counters, processes, [ours, *others]), daemon=True
        )
        process.start()
        theirs.close()
        return cls(process, ours, known)

    def send(self, message) -> None:
        try:
            self.connection.send(message)
        except (OSError, ValueError) as exc:
            raise WorkerLost(f"worker gone: {exc!r}") from None

    def receive(self, patience: float | None = None):
        """Its next message; with `patience`, WorkerHung if none comes within that many seconds."""
        if patience is not None:
            self.expect(patience)
            if not self.connection.poll(patience):
                raise WorkerHung(f"worker sent nothing for {patience:.0f} s")
        try:
            message = self.connection.recv()
        except (EOFError, OSError) as exc:
            raise WorkerLost(f"worker exited: {exc!r}") from None
        self.heard_now()
        if message[0] == "failed":
            raise WorkerLost(message[1])
        return message

    def stop(self) -> None:
        try:
            self.connection.send(("stop",))
        except (OSError, ValueError):
            pass
        self.connection.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    def terminate(self) -> None:
        self.connection.close()
        self.process.terminate()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()

    def kill(self) -> None:
        self.connection.close()
        self.process.kill()
        self.process.join()
