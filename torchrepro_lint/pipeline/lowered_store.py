"""IR by file content, for a run and the next: from this run's workers, the persistent cache, or lowered now.

`LoweredStore` also holds the digests that cached results are checked against (a module's IR
and its parts, a program's facts, a text) and the summaries other modules' rules ask for
(project/summaries.py), computed once per module content.
"""

from __future__ import annotations

from contextlib import contextmanager

from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.pipeline.cache import canonical, digest, structural_digest
from torchrepro_lint.pipeline.read_values import ReadValues
from torchrepro_lint.pipeline.tree_budget import RELEASED
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.function_reuse import unshifted
from torchrepro_lint.project.module_finder import module_identity
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import IR_CODE, IR_TOP

# Trees parsed again only to summarise a module (project/summaries.py), kept for the next ask.
SUMMARISED_TREES = 32
# Kept trees whose index (ProjectModule.drop_index) was built again to summarise them keep it,
# and what was derived from it, for the next summaries up to this much source, then drop it.
# Kept to the end of the run, they took a process of a sharded run on torch's source 138 MB up
# while one 29 KB file's rules asked where names were used (72 MB with this bound).
INDEXED_CHARACTERS = 1_000_000
CODE_DIGESTS_KEPT = 4096  # functions whose IR_CODE digest the language server's cache keeps

_MISSING = object()

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
        """A digest of one part of a module's IR (reads.IR_TOP, IR_FUNCTION, IR_CODE): what a
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
