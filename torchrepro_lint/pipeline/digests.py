"""The current value of each read a cached result depends on: what the result is checked against.

A cached result (a program's facts, a file's findings) keeps what running it read
(project/reads.py's `record`): a module's IR or one part of it, its text, a summary, which
modules mention a word, imports that found no module. `Digests` gives each such read its value now;
the result holds while every value is the one it was cached with.
"""

from __future__ import annotations

from pathlib import PurePath

from torchrepro_lint.pipeline.cache import canonical, digest
from torchrepro_lint.pipeline.lowered_store import LoweredStore
from torchrepro_lint.project import summaries
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import IR_CODE, IR_CODES, IR_FUNCTION, IR_FUNCTIONS, IR_TOP

MISSING_IMPORTS = "missing imports"

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
