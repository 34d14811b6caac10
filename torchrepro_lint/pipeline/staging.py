"""The stages of a run that the cache and `--jobs` change: lowering, programs, per-file and program rules.

A run (engine.lint_sources) lowers every file to IR, interprets the programs on the IR, then
runs the per-file rules, which need each file's LibCST tree. Each stage reuses what the cache
has and records what it read, so the next run can tell whether a cached result still holds:

- IR by file content (LoweredStore);
- a program's facts, while every module its run read has the same IR (ProgramRunner);
- a file's per-file findings, while the file and everything its rules read of the project
  (other modules' IR or text, the facts of the programs reaching it) are unchanged
  (ModuleChecker);
- a program's program-rule findings, while its facts and the text of the modules where they
  report or quote code are unchanged (ProgramChecker).

With jobs > 1 the per-file rules run in forked worker processes, largest files first: they
inherit the project, the trees kept within TREE_BUDGET and the program model, so nothing is
pickled but results. (Lowering stays in the main process: workers that lowered would have to
send trees back, or the rules would parse every file twice.)
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import traceback
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import PurePath

from torchrepro_lint.pipeline import memory
from torchrepro_lint.pipeline.cache import canonical, digest, dumps_with_modules, loads_with_modules, structural_digest
from torchrepro_lint.rules.context import LintContext
from torchrepro_lint.findings import Finding
from torchrepro_lint.pipeline.progress import NO_PROGRESS
from torchrepro_lint.pipeline.read_values import ReadValues
from torchrepro_lint.rules.base import any_may_fire
from torchrepro_lint.project.index import IR_CODE, IR_CODES, IR_FUNCTION, IR_FUNCTIONS, IR_TOP, ProjectIndex, ProjectModule, Reads, module_identity, record
from torchrepro_lint.project import ir, summaries
from torchrepro_lint.project.extract.function_reuse import unshifted
from torchrepro_lint.project.programs import interpret, program_entries
from torchrepro_lint.pipeline.source import PARSES, SourceFile

# Trees kept after lowering for the per-file rules, in characters of source: past this a tree is
# dropped and the file parsed again when its rules run (a LibCST tree takes ~22x its text, its
# index ~8x more). The largest files are lowered first and keep theirs (engine._lower_all). On
# torch's source (46 MB) with --jobs 1: 16 MB kept in file order peaked at 1.9 GiB, 10 MB of the
# largest at 1.04 GiB, in about two thirds of the time (huge files were no longer parsed again on
# a full heap); 8 MB at 999 MiB, 4% slower than 10 MB (3:42 against 3:33, same output).
TREE_BUDGET = 8_000_000
# The same for all the processes of a sharded run (shards/) together, each keeping its part.
# On torch's source with two processes (20 MB each) and every kept tree's index held, the
# largest process peaked at 1,045-1,069 MiB; 18 MB each with no kept index, at 915-923 MiB but
# 15-20% slower (more parses, every index built twice); INDEXED_SHARE below gave 981-1,002 MiB.
SHARDED_TREE_BUDGET = 40_000_000
# The share of a budget (the first trees kept) whose trees keep their index until their rules
# run; the rest drop it (ProjectModule.drop_index) and build it again then, in about a sixth
# of a parse's time. On torch's source (two processes): the main process held 938-949 MiB
# after lowering with every index kept, 805-814 MiB with 0.35 of them; 0.35 and 0.5 gave the
# same peak (it comes later, in the first per-file checks), so the cheaper one.
INDEXED_SHARE = 0.5
# Trees parsed again only to summarise a module (project/summaries.py), kept for the next ask.
SUMMARISED_TREES = 32
# Kept trees whose index (ProjectModule.drop_index) was built again to summarise them keep it,
# and what was derived from it, for the next summaries up to this much source, then drop it.
# Kept to the end of the run, they took a process of a sharded run on torch's source 138 MB up
# while one 29 KB file's rules asked where names were used (72 MB with this bound).
INDEXED_CHARACTERS = 1_000_000
# With automatic garbage collection off (cli.run), a collection after this many characters of
# source have had their trees released. Indexing leaves no cycle that reaches a tree (tested),
# but a cycle made elsewhere would keep one alive until a collection: this bounds the cost.
COLLECT_AFTER = 8_000_000
_MISSING = object()


class _ReleasedTrees:
    """Counts released trees and collects them where automatic collection is off. The CLI turns
    it off: collections that walked every kept tree again cost 10% of a cold run (1.6 s of
    15 s on a 315-file repository), and the trees kept within budget are never garbage."""

    def __init__(self) -> None:
        self.pending = 0

    def release(self, module: ProjectModule) -> None:
        module.release_tree()
        self.pending += len(module.source.text)
        if self.pending >= COLLECT_AFTER and not gc.isenabled():
            # Then freeze what survived (kept trees, IR, programs: alive until the run ends), so
            # the next collection walks only what was allocated since, not the whole heap again
            # (a full collection each time took 2 minutes of a 5-minute run on torch's source).
            gc.collect()
            gc.freeze()
            self.pending = 0


RELEASED = _ReleasedTrees()


# Digests of whole texts, by text: a process that lints the same texts again and again (the
# language server, once per edit) hashes each only once. Looking a text up costs its cached
# hash and, for the same string object, an identity check. Cleared when full.
_TEXT_DIGESTS: dict = {}
_TEXT_DIGESTS_KEPT = 8192


def _memo_digest(*parts) -> str:
    found = _TEXT_DIGESTS.get(parts)
    if found is None:
        if len(_TEXT_DIGESTS) >= _TEXT_DIGESTS_KEPT:
            _TEXT_DIGESTS.clear()
        found = _TEXT_DIGESTS[parts] = digest(*parts)
    return found


def _file_key(source: SourceFile, package: str | None) -> str:
    # Helper settings are part of the configuration, which names the cache's namespace.
    # Kept on the source: the language server passes an unchanged file's SourceFile again on
    # every edit, and hashing the parts again for 315 files was half a millisecond.
    kept = source.__dict__.get("_file_key")
    if kept is not None and kept[0] == package:
        return kept[1]
    path = source.resolved_path
    key = _memo_digest(str(path), module_identity(path), package, source.text)
    source.__dict__["_file_key"] = (package, key)
    return key


def ir_digest_of(module_ir, parts_before: dict | None = None) -> tuple[str, dict]:
    """The digest of a module's IR, put together from the digests of its top level and of each
    function; and those parts' digests, by id, for the next IR of the file. A part that is the
    same object in `parts_before` is not digested again: an edit inside one function of a
    model file keeps every other function's IR object (function_reuse.py), and digesting the
    whole IR was 2.7 ms of each edit of timm's resnet.py. (A cold run digests about 5% slower.)"""
    parts: dict[int, tuple] = {}

    def part(value) -> str:
        found = parts_before.get(id(value)) if parts_before else None
        if found is None or found[0] is not value:
            found = (value, structural_digest(value))  # (no sets)
        parts[id(value)] = found  # (holding the value: its id is not reused meanwhile)
        return found[1]

    m = module_ir
    functions = tuple((path, part(function)) for path, function in m.functions.items())
    whole = ("module", part(m.top), m.main_guard, functions, m.classes, m.aliases, m.imported_modules, m.has_top_level_work)
    return structural_digest(whole), parts


class LoweredStore:
    """IR by file content: from this run's workers, the persistent cache, or lowered now.
    Also the digests that cached results are checked against."""

    def __init__(self, cache) -> None:
        self.cache = cache
        self.ir_digests: dict = {}  # resolved path -> digest of its IR
        self._text_digests: dict = {}
        # (digest of a module's IR, kind, function) -> digest of that part; a cache that lives
        # across runs keeps them (an edit that leaves a module's IR as it was digests nothing)
        self._part_digests: dict = getattr(cache, "ir_part_digests", None)
        if self._part_digests is None:
            self._part_digests = {}
        self._summaries: dict = {}  # (path, kind, argument) -> summary
        self._summarised: dict = {}  # path -> module, oldest first
        self._indexed: dict = {}  # path -> kept module indexed again for summaries, oldest first
        self._pinned: set = set()  # paths of modules whose rules are running (never dropped)
        self._program_digests: dict = {}  # id(program) -> digest of its facts
        self._programs_seen: list = []
        # The values of reads (Digests), from the last run where the cache lives across runs
        self.reads = ReadValues(getattr(cache, "read_values", None), remember=hasattr(cache, "read_values"))
        self._primed: dict = {}  # resolved path -> (IR, digest) found or sent ahead of `get`
        # In a sharded run (shards/): remote(module, kind, argument, compute) gives a summary,
        # asking the process that has the module's tree instead of parsing it here.
        self.remote = None

    def get(self, source: SourceFile, package: str | None):
        path = source.resolved_path
        found = self._primed.pop(path, None)
        if found is None and self.cache is not None:
            found = self.cache.get("ir", _file_key(source, package))
        if found is None:
            return None
        module_ir, ir_digest = found
        self.ir_digests[path] = ir_digest
        return module_ir

    def has(self, source: SourceFile, package: str | None) -> bool:
        """Whether the IR of `source` is at hand (looked up once: `get` then takes it)."""
        path = source.resolved_path
        if path not in self._primed and self.cache is not None:
            found = self.cache.get("ir", _file_key(source, package))
            if found is not None:
                self._primed[path] = found
        return path in self._primed

    def prime(self, path, module_ir, ir_digest) -> None:
        """IR lowered in another process (shards/), for the next `get` of that path."""
        self._primed[path] = (module_ir, ir_digest)

    def put(self, source: SourceFile, package: str | None, module_ir, like: SourceFile | None = None) -> None:
        """`like`: another text with the same IR, whose digest the cache may hold already."""
        path = source.resolved_path
        known = self.cache.get("ir", _file_key(like, package)) if like is not None and self.cache is not None else None
        if known is not None and known[0] is module_ir:
            ir_digest = known[1]
        else:
            # A cache that lives across runs keeps the digests of the parts of an edited buffer's
            # last IR (a source that `keeps_walk`): what the next edit leaves is not digested again.
            parts_before = getattr(self.cache, "ir_digest_parts", None) if source.keeps_walk else None
            ir_digest, parts = ir_digest_of(module_ir, parts_before.get(path) if parts_before is not None else None)
            if parts_before is not None:
                parts_before[path] = parts
        self.ir_digests[path] = ir_digest
        if self.cache is not None:
            self.cache.put("ir", _file_key(source, package), (module_ir, ir_digest))

    def summary(self, module: ProjectModule, kind: str, argument: str, compute):
        """A module's summary (project/summaries.py), by content: a module that did not change
        is not parsed again for it."""
        memo_key = (module.path, kind, argument)
        found = self._summaries.get(memo_key, _MISSING)
        if found is _MISSING:
            key = digest("summary", _file_key(module.source, module.package), kind, argument)
            cached = self.cache.get("summary", key) if self.cache is not None else None
            if cached is not None:
                found = cached[0]
            else:
                found = compute() if self.remote is None else self.remote(module, kind, argument, compute)
                if self.cache is not None:
                    self.cache.put("summary", key, (found,))  # boxed: a summary may be None
            self._summaries[memo_key] = found
        return found

    def close(self) -> None:
        """The run is over: forget what it held. Its modules point back at this store, so
        without this a long-lived process (the language server) left each run's project to
        the cycle collector, whose full passes over the server's heap took seconds."""
        if hasattr(self.cache, "read_values"):
            self.cache.read_values = self.reads.carried()
        self.reads = ReadValues()  # (the values hold modules, which hold this store)
        self.cache = None  # (the language server's cache holds modules, which hold this store)
        self._summaries.clear()
        self._part_digests = {}
        self._summarised.clear()
        self._indexed.clear()
        self._program_digests.clear()
        self._programs_seen.clear()
        self._primed.clear()

    def summaries_computed(self) -> dict:
        return dict(self._summaries)

    def add_summaries(self, found: dict) -> None:
        """Summaries another process computed: so this one need not parse for them."""
        for key, value in found.items():
            self._summaries.setdefault(key, value)

    def parsed_for_summaries(self, module: ProjectModule) -> None:
        """A module parsed only to summarise it: keep the last few trees, drop older ones, but
        never a pinned one (rules are reading it)."""
        self._summarised.pop(module.path, None)
        self._summarised[module.path] = module
        unpinned = [path for path in self._summarised if path not in self._pinned]
        for path in unpinned[: max(0, len(self._summarised) - SUMMARISED_TREES)]:
            RELEASED.release(self._summarised.pop(path))

    def indexed_for_summaries(self, module: ProjectModule) -> None:
        """A kept tree's index was built again only to summarise it: keep it for the next few
        summaries, then drop it again (never while its rules run: pinned)."""
        self._indexed.pop(module.path, None)
        self._indexed[module.path] = module
        held = self._indexed
        characters = sum(len(held[path].source.text) for path in held)
        for path in list(held):
            if characters <= INDEXED_CHARACTERS or path == module.path:
                break
            characters -= len(held[path].source.text)
            if path not in self._pinned:
                held.pop(path).drop_index()

    @contextmanager
    def pinned(self, module: ProjectModule):
        """While the rules of `module` run: its tree stays, whatever summaries are computed
        meanwhile (for its rules, or for another process's questions). Dropping it would
        make the next `module.index` parse again, and nodes already held would no longer be
        the tree's."""
        self._pinned.add(module.path)
        try:
            yield
        finally:
            self._pinned.discard(module.path)

    def program_digest(self, program) -> str:
        """A program's facts, digested once a run (they are large: torch's took 37 s to
        digest again for each module that a cached result read the programs of)."""
        found = self._program_digests.get(id(program))
        if found is None:
            p = program
            # A cache that lives across runs gives the same facts object again (ProgramRunner),
            # and remembers their digest with them.
            across_runs = getattr(self.cache, "program_digests", None)
            shape = canonical((p.kind, p.anchor_ref, p.function, p.imported, p.entry))  # (the entry by path)
            pickled = self._pickled(p.facts)
            key = shape if pickled is None else ("pickled", shape)
            known = across_runs.get(id(p.facts)) if across_runs is not None else None
            if known is not None and known[0] is p.facts and known[1] == key:
                found = known[2]
            else:
                if pickled is not None:
                    found = digest("pickled", shape, pickled)  # (bytes are digested as they are)
                else:
                    found = digest(canonical((*shape, p.facts)))
                if across_runs is not None:
                    across_runs[id(p.facts)] = (p.facts, key, found)
            self._program_digests[id(program)] = found
            self._programs_seen.append(program)  # keeps the id from being reused
        return found

    def _pickled(self, facts) -> bytes | None:
        """The bytes the language server's cache holds `facts` as, while it writes nothing to
        disk (an unsaved buffer took part): their digest is then the facts' value. Equal bytes
        are equal facts (modules by path, as `canonical` has them); equal facts whose sets
        iterate in another order give other bytes, which only costs their rules a run.
        Digesting `canonical(facts)` instead, for the 12 programs an edit of a timm model file
        runs again, was 17 ms of the edit. A value for the disk must be the same in every
        process: there, and in the CLI, the canonical form is digested."""
        cache = self.cache
        if getattr(cache, "persist", True):
            return None
        found = cache.pickled.get(id(facts))
        return found[1] if found is not None and found[0] is facts else None

    def ir_part_digest(self, module: ProjectModule, kind: str, function: str | None) -> str:
        """A digest of one part of a module's IR (index.IR_TOP, IR_FUNCTION, IR_CODE): what a
        read of that part alone is checked against."""
        module_ir = module._ir
        whole = self.ir_digests.get(module.path)
        key = (whole, kind, function) if whole is not None else (id(module_ir), kind, function)
        found = self._part_digests.get(key)
        if found is None or found[0] is not module_ir and whole is None:
            if kind == IR_TOP:
                table = structural_digest(ir.ModuleTable.of(module_ir).parts())
                value = digest(kind, self._function_digest(module, module_ir.top), table)
            else:
                part = module_ir.functions.get(function)
                if part is None:
                    value = structural_digest((kind, None))
                elif kind == IR_CODE:
                    value = self._code_digest(part)
                else:
                    value = digest(kind, self._function_digest(module, part))
            # (the IR is kept while keyed by its id: ids are not reused while it lives)
            found = self._part_digests[key] = (module_ir if whole is None else None, value)
        return found[1]

    def _code_digest(self, function) -> str:
        """An IR_CODE read's value: the function's IR without refs, digested. The language
        server's cache keeps them by function, and a function an edit above it shifted
        (function_reuse.shifted) has the code of the one it was shifted from: train.py's
        functions below main() were digested again on every edit of main()."""
        memo = getattr(self.cache, "code_digests", None)
        if memo is None:
            return structural_digest((IR_CODE, ir.without_refs(function)))
        origin = unshifted(function)
        found = memo.get(id(origin))
        if found is None or found[0] is not origin:
            if len(memo) >= CODE_DIGESTS_KEPT:
                memo.clear()
            found = memo[id(origin)] = (origin, structural_digest((IR_CODE, ir.without_refs(origin))))
        return found[1]

    def _function_digest(self, module: ProjectModule, function) -> str:
        """structural_digest(function) (or of the module's top level), as the module's IR digest
        found it where the language server kept its parts (ir_digest_of): an edit of main() in
        train.py digested again each function whose refs it shifted, and the top level, once
        for the IR and once for this read."""
        parts = getattr(self.cache, "ir_digest_parts", None)
        found = parts.get(module.path, {}).get(id(function)) if parts is not None else None
        return found[1] if found is not None and found[0] is function else structural_digest(function)

    def text_digest(self, module: ProjectModule) -> str:
        found = self._text_digests.get(module.path)
        if found is None:
            found = self._text_digests[module.path] = _memo_digest(module.source.text)
        return found

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


class TreeBudget:
    """Keep a file's tree after lowering, within budget: the per-file rules will want it, or
    another file's rules may ask it for a summary (project/summaries.py)."""

    def __init__(self, limit: int | None = None, keep_indexes: bool = False) -> None:
        self.limit = TREE_BUDGET if limit is None else limit
        # The modules live on to the next run (the language server: ProjectIndex.lives_on), whose
        # rules look into the same modules again: a kept tree keeps its index (and positions).
        self.keep_indexes = keep_indexes
        self.indexed_limit = int(self.limit * INDEXED_SHARE)
        self.kept = 0
        self._kept: set = set()  # paths of the trees kept within budget

    @classmethod
    def share(cls, processes: int) -> TreeBudget:
        """One process's part of a sharded run's budget."""
        return cls(SHARDED_TREE_BUDGET // processes)

    def after_indexing(self, module: ProjectModule) -> None:
        if not module.has_tree:
            return
        if self.kept + len(module.source.text) <= self.limit:
            self.kept += len(module.source.text)
            self._kept.add(module.path)
            if self.kept > self.indexed_limit and not self.keep_indexes:
                module.drop_index()
        else:
            RELEASED.release(module)

    def after_checking(self, module: ProjectModule) -> None:
        # A kept tree stays until the run ends: a later file's rules may look into this module
        # (where a function is called from), and dropping it would mean parsing it again. A tree
        # parsed again for this check is dropped, which is what bounds memory on large projects.
        if module.has_tree and module.path not in self._kept:
            RELEASED.release(module)
        elif module.has_tree:
            # What its rules built on the tree (flows, op matches, memo tables) is larger than
            # the tree: another file's rules rarely look into it, and rebuild what they need.
            if self.keep_indexes and module._index is not None:
                module.index.forget_derived()
            else:
                module.drop_index()


MISSING_IMPORTS = "missing imports"
CODE_DIGESTS_KEPT = 4096  # functions whose IR_CODE digest the language server's cache keeps
_GROUPED = {IR_FUNCTIONS: IR_FUNCTION, IR_CODES: IR_CODE}  # a read of several functions -> of one
_GROUP_OF = {one: several for several, one in _GROUPED.items()}
_FUNCTION_READS = frozenset({IR_FUNCTION, IR_CODE, IR_FUNCTIONS, IR_CODES})  # keyed (path, function or functions)


class Digests:
    """The current value of each kind of read a cached result depends on."""

    def __init__(self, project: ProjectIndex, programs, store: LoweredStore) -> None:
        self.project, self.programs, self.store = project, programs, store
        self._programs_memo: dict = {}
        self._missing_memo: dict = {}

    def of(self, read) -> str | None:
        """The current value of `read`; the store's ReadValues remembers those that did not change."""
        kind, path = read
        if kind == "programs":
            return self._programs_digest(path)
        values = self.store.reads
        if kind == "mentions":
            compute = lambda: digest(sorted(str(m.path) for m in self.project.mentioning(path)))
            return values.mentions(read, path, values.basis(self.project), compute)
        if kind == MISSING_IMPORTS:  # imports that found no module: which of their files exist now
            return values.missing(read, values.basis(self.project), lambda: digest([self._missing(key) for key in path]))
        if kind in ("reported", "display"):  # only modules of the project: never loaded for this
            module = self.project.modules.get(path)
        elif kind in ("summary", "ir", "content", IR_TOP) or kind in _FUNCTION_READS:
            module_path = path[0] if kind == "summary" or kind in _FUNCTION_READS else path
            module = self.project.modules.get(module_path) or self.project.load_path(module_path)
        else:
            return None  # a read of an older format: never matches
        return None if module is None else values.of_module(read, module, lambda: self._of_module(kind, path, module))

    def _of_module(self, kind: str, path, module: ProjectModule) -> str | None:
        if kind == "reported":
            # a finding holds its display path and lines, and only linted modules get findings
            return digest(module.linted, module.source.path.as_posix(), self.store.text_digest(module))
        if kind == "display":  # a message naming another module's file
            return digest(module.source.path.as_posix())
        if kind == "summary":
            _, summary_kind, argument = path
            try:
                return digest(canonical(summaries.current(module, summary_kind, argument)))
            except LookupError:  # of a site whose ref the edited module no longer has: changed
                return None  # (a cached result's reads are checked in no set order)
        if kind == "ir":
            return self.store.ir_digests.get(module.path)
        if kind in (IR_TOP, IR_FUNCTION, IR_CODE):
            return self.store.ir_part_digest(module, kind, path[1] if kind != IR_TOP else None)
        if kind in _GROUPED:
            one = _GROUPED[kind]
            return digest([self.store.ir_part_digest(module, one, name) for name in path[1]])
        return self.store.text_digest(module)

    def _programs_digest(self, path) -> str:
        found = self._programs_memo.get(path)
        if found is None:
            chosen = [p for p in self.programs if path == "*" or path in p.facts.modules]
            found = digest([self.store.program_digest(p) for p in chosen])
            self._programs_memo[path] = found
        return found

    def _missing(self, key) -> str:
        found = self._missing_memo.get(key)
        if found is None:
            found = self._missing_memo[key] = digest(self.project.files_named(*key))
        return found

    def all_match(self, reads) -> bool:
        return self.store.reads.all_match(reads, self.of, self.project)

    def values(self, reads) -> list:
        """Each read with its current value (sorted where they may go to disk, so that the cache's
        bytes are the same from run to run): what a cached result is checked against.
        A result's imports that found no module (("missing", (name, search root)) reads) become
        one read: results on torch's source made hundreds each, about 1 M in a run."""
        # The functions read of one module, likewise (IR_FUNCTIONS, IR_CODES: a program reads
        # hundreds). One pass: a program re-run on an edit reads about 1,600.
        missing: list = []
        functions: dict = {}
        grouped: list = []
        for read in reads:
            kind = read[0]
            if kind == "missing":
                missing.append(read[1])
            elif kind == IR_FUNCTION or kind == IR_CODE:
                key = read[1]
                functions.setdefault((kind, key[0]), []).append(key[1])
            else:
                grouped.append(read)
        if missing:
            grouped.append((MISSING_IMPORTS, tuple(sorted(missing))))
        grouped += [(_GROUP_OF[kind], (path, tuple(sorted(names)))) for (kind, path), names in functions.items()]
        reads = grouped
        values = self.store.reads.valued(reads, self.of)
        if getattr(self.store.cache, "persist", True):  # (the language server's, while unsaved,
            values.sort(key=_read_order)  # stay in memory: 8 ms of an edit of a timm model file)
        self.store.reads.found_now(values)
        return values


def _read_order(pair) -> tuple:
    """A read's place in a cached result's list: its kind, then its key with paths as strings
    (comparing the reads themselves compared pathlib paths, whose `<` and `==` are slow: a
    third of the time of `values` for a program of pytorch-image-models)."""
    kind, key = pair[0]
    return kind, _plain(key)


def _plain(key):
    if isinstance(key, tuple):
        return tuple(_plain(part) for part in key)
    if isinstance(key, PurePath):
        return str(key)
    return key


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
