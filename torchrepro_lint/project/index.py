"""The project index: every module of the project, named and lowered, and import resolution.

Modules are found the way Python finds them: `python train.py` puts the script's directory on
sys.path, packages are directories with `__init__.py`, and `src/` layouts are searched too.
A module that is imported but not among the linted files is loaded on demand from disk, so a
pre-commit run on one file still sees the helpers it calls.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.same_code import code_lines_differ, node_pairs
from torchrepro_lint.analysis.text_memo import contains
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.function_reuse import FunctionReuse, RefLayout, function_reuse
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.project.known_apis import Helper
from torchrepro_lint.pipeline.reparse import edit_span
from torchrepro_lint.pipeline.source import ParseFailure, SourceError, SourceFile, read_source


# What the code running now reads of each module, for caching its results (see record()).
_READS: list[set] = []

# Reads of one part of a module's IR: IR_TOP of all but its functions' bodies (running its top
# level reads its statements, resolving a name in it reads its table: ProjectModule.top, .table),
# IR_FUNCTION of one function (ProjectModule.function: a function the program ran), IR_CODE of
# one function without its node refs (ProjectModule.code: a function the program only asked
# whether it does anything tracked, where no ref of it can reach the program's facts); and
# IR_FUNCTIONS, IR_CODES of several of one module, as cached results keep them
# (staging.Digests). A program that never ran the function an edit changed keeps its cached
# facts, and so does one that only asked about functions whose refs the edit shifted.
IR_TOP, IR_FUNCTION, IR_CODE = "ir.top", "ir.function", "ir.code"
IR_FUNCTIONS, IR_CODES = "ir.functions", "ir.codes"


# For each block of _READS: the sets of reads `note_reads` added to it, by id (kept alive).
_NOTED: list[dict] = []
# For each block: whether noted sets are merged into its own (False: a `record(kept_apart=True)`)
_MERGED: list[bool] = []


class Reads:
    """A block's reads kept apart (`record(kept_apart=True)`): its own, and the sets that
    `note_reads` noted, each the same object for every taker. A program re-run on an edit
    notes about 2,400 reads of kept walks and answers, the same as its last run's: merging them
    into one set cost 2 ms of an edit of a timm model file, and the union is needed only when
    they changed (ProgramRunner._values_of)."""

    __slots__ = ("own", "noted")

    def __init__(self, own: set, noted: tuple) -> None:
        self.own, self.noted = own, noted

    def union(self) -> set:
        return self.own.union(*self.noted)

    def same_as(self, other: Reads) -> bool:
        """The same reads as `other` (False may still be the same union: then it is built)."""
        return (
            self.own == other.own and len(self.noted) == len(other.noted)
            and all(a is b or a == b for a, b in zip(self.noted, other.noted))
        )  # fmt: skip


@contextmanager
def record(kept_apart: bool = False):
    """Collect the (kind, key) of every module part read inside the block: ("ir", path) for a
    module's lowered summary (or a part of it: IR_TOP, IR_FUNCTION, IR_CODE), ("content", path)
    for its text or tree, and the reads of `note_read`. A cached result stays valid while every
    part it read is unchanged. `kept_apart`: a Reads, whose noted sets are not merged."""
    reads: set = set()
    noted: dict = {}
    _READS.append(reads)
    _NOTED.append(noted)
    _MERGED.append(not kept_apart)
    try:
        if kept_apart:
            found = Reads(reads, ())
            yield found
            found.noted = tuple(noted.values())
        else:
            yield reads
    finally:
        _READS.pop()
        _NOTED.pop()
        _MERGED.pop()


def note_read(kind: str, key) -> None:
    """Record a read of something other than a module's IR or text: ("mentions", word), or
    ("uses", (path, name)) for a module's summary of the uses of a name."""
    if _READS:
        _READS[-1].add((kind, key))


def note_reads(reads) -> None:
    """Record again the reads made when an answer kept for the run was found (a frozenset, the
    same object for each taker): each asker's cached results depend on them. Added once per
    block: the same answer is taken thousands of times in a program."""
    if _READS:
        noted = _NOTED[-1]
        if id(reads) not in noted:
            noted[id(reads)] = reads
            if _MERGED[-1]:
                _READS[-1].update(reads)


@contextmanager
def unrecorded():
    """Reads inside the block are not recorded: for computing a summary whose own read the
    caller records instead."""
    _READS.append(set())
    _NOTED.append({})
    _MERGED.append(True)
    try:
        yield
    finally:
        _READS.pop()
        _NOTED.pop()
        _MERGED.pop()


@dataclass(eq=False)
class ProjectModule:
    """One module of the project. Its IR is always there (lowered now, or from the cache);
    its LibCST tree, index and IR nodes are built on first use, so a module whose results are
    cached is never parsed."""

    path: Path  # resolved absolute path
    name: str  # dotted module name by package structure
    package: str | None
    search_root: Path  # the directory Python would have on sys.path for this module
    source: SourceFile
    _ir: ir.ModuleIR = field(repr=False)
    linted: bool  # among the files the user asked to lint (findings are reported only there)
    helpers: dict = field(default_factory=dict, repr=False)
    _index: ModuleIndex | None = field(default=None, repr=False)
    _nodes: list | None = field(default=None, repr=False)
    store: object | None = field(default=None, repr=False)  # the project's `lowered` (summaries.py)
    _table: ir.ModuleTable | None = field(default=None, repr=False)
    # The language server: texts its lowering generated, for the next edit's (ExpressionTexts),
    # and where the top level's and each function's refs are in `_nodes` (function_reuse.py)
    expression_texts: ExpressionTexts | None = field(default=None, repr=False)
    layout: RefLayout | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"<module {self.path}>"

    def __reduce__(self):
        raise TypeError("a ProjectModule is pickled by reference (see cache.py)")

    @property
    def ir(self) -> ir.ModuleIR:
        if _READS:
            _READS[-1].add(("ir", self.path))
        return self._ir

    @property
    def top(self) -> tuple[ir.Stmt, ...]:
        """The IR's top-level statements (a read of them alone)."""
        if _READS:
            _READS[-1].add((IR_TOP, self.path))
        return self._ir.top

    @property
    def table(self) -> ir.ModuleTable:
        """What the IR names: its functions (not their bodies), classes, aliases, imports (read
        with the top level: see IR_TOP)."""
        if _READS:
            _READS[-1].add((IR_TOP, self.path))
        if self._table is None:
            self._table = ir.ModuleTable.of(self._ir)
        return self._table

    def function(self, path: str) -> ir.FunctionIR | None:
        """The IR of one function (a read of it alone: of its absence where there is none)."""
        if _READS:
            _READS[-1].add((IR_FUNCTION, (self.path, path)))
        return self._ir.functions.get(path)

    def code(self, path: str) -> ir.FunctionIR | None:
        """The IR of one function, read without its refs (see IR_CODE): for what it does, never
        for where (no occurrence may be made of a ref of what this returns)."""
        if _READS:
            _READS[-1].add((IR_CODE, (self.path, path)))
        return self._ir.functions.get(path)

    @property
    def index(self) -> ModuleIndex:
        if _READS:
            _READS[-1].add(("content", self.path))
        if self._index is None:
            self._index = ModuleIndex(self.source, self.package)
        return self._index

    @property
    def nodes(self) -> list[cst.CSTNode]:
        """The CST nodes the IR's refs point at (lowering is deterministic, so the same list)."""
        if _READS:
            _READS[-1].add(("content", self.path))
        if self._nodes is None:
            lowering = Lowering(self.index, self.helpers)
            lowering.build()
            self._nodes = lowering.nodes
        elif self._index is None:
            self.index  # (dropped, drop_index): its parent map places findings at these nodes
        return self._nodes

    @property
    def has_tree(self) -> bool:
        return self._index is not None or self.source.has_tree

    def drop_index(self) -> None:
        """Keep the tree, forget its index (and what was derived from it): a tree kept for later
        rules is held with about a fifth less memory (77 of 347 MB for 9.3 MB of torch's
        source), and its index is built again from the same nodes on first use (about a sixth
        of the time of a parse). The IR's node table stays: it points into the same tree."""
        if self._index is not None:
            self._index.forget_derived()
            self._index = None
            self.source.forget_positions()

    def release_tree(self) -> None:
        if self._index is not None:
            self._index.forget_derived()
        self._index = self._nodes = None
        self.source.drop_tree()

    @property
    def text(self) -> str:
        if _READS:
            _READS[-1].add(("content", self.path))
        return self.source.text

    @property
    def is_dunder_main(self) -> bool:
        return self.path.name == "__main__.py"


@dataclass(frozen=True)
class Symbol:
    module: ProjectModule
    path: str  # "" for the module itself, "f", "C", "C.m"

    @property
    def function(self) -> ir.FunctionIR | None:
        return self.module.function(self.path)

    @property
    def is_function(self) -> bool:
        return self.path in self.module.table.functions

    @property
    def code(self) -> ir.FunctionIR | None:
        """The function's IR for what it does, not where (ProjectModule.code)."""
        return self.module.code(self.path)

    @property
    def klass(self) -> ir.ClassIR | None:
        return self.module.table.classes.get(self.path)


@lru_cache(maxsize=4096)
def _is_package_dir(directory: Path) -> bool:
    return (directory / "__init__.py").is_file()


@lru_cache(maxsize=65536)
def module_identity(path: Path) -> tuple[str, str | None, Path]:
    """(dotted name, package, search root) of a file from the `__init__.py` chain above it.
    Remembered until _forget_directories: the language server asked it of every file per edit."""
    if path.suffix == ".ipynb":
        # Jupyter runs a notebook as `__main__` with its own directory on sys.path, in no package;
        # the name is one no import statement can spell.
        return f"<{path.name}>", None, path.parent
    parts = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while _is_package_dir(directory):
        parts.insert(0, directory.name)
        directory = directory.parent
    name = ".".join(parts)
    if path.name == "__init__.py":
        package = name
    else:
        package = ".".join(parts[:-1]) if len(parts) > 1 else None
    return name, package, directory


def _same_imports(old: ProjectModule, new: ProjectModule) -> bool:
    return old.linted == new.linted and old.ir.imported_modules == new.ir.imported_modules


@lru_cache(maxsize=4096)
def _path_of(text: str) -> Path:
    return Path(text)


@lru_cache(maxsize=4096)
def _search_roots(search_root: Path, root: Path) -> tuple[Path, ...]:
    """Where an import from a module under `search_root` looks, in order (built once per pair:
    resolution asks for them thousands of times a run): its own root, the root of the nearest
    sub-project around it (a directory below the project's root with its own setup.py or
    pyproject.toml, installed on its own: DeepSpeed-Chat's `dschat` inside DeepSpeedExamples),
    and the project's root."""
    nested = _subproject_root(search_root, root)
    nested_roots = [nested, nested / "src"] if nested is not None else []
    return tuple(dict.fromkeys([search_root, *nested_roots, root, root / "src"]))


PROJECT_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg")


def _subproject_root(directory: Path, root: Path) -> Path | None:
    if directory == root or not directory.is_relative_to(root):
        return None
    for candidate in (directory, *directory.parents):
        if candidate == root:
            return None
        if any((candidate / marker).is_file() for marker in PROJECT_MARKERS):
            return candidate
    return None


@lru_cache(maxsize=65536)
def _candidate_files(root: Path, dotted_name: str) -> tuple[Path, Path]:
    """`root/a/b.py` and `root/a/b/__init__.py` for `a.b`: the same Path objects each time, whose
    hashes are computed once (resolution looks up thousands of them in every run)."""
    relative = Path(*dotted_name.split("."))
    return root / relative.with_suffix(".py"), root / relative / "__init__.py"


# The set of absent files the directories were last looked at with (ProjectIndex.absent).
_DIRECTORIES_SEEN = [None]


def _forget_directories(absent: set | None) -> None:
    """Look at directories again: in every new project of a process, except in the language
    server's runs between two moments files may have come (it replaces its set of absent files
    then; each edit's run would otherwise walk every file's `__init__.py` chain again)."""
    if absent is None or absent is not _DIRECTORIES_SEEN[0]:
        _is_package_dir.cache_clear()
        module_identity.cache_clear()
        _DIRECTORIES_SEEN[0] = absent


@dataclass
class ProjectIndex:
    root: Path
    helpers: dict[str, Helper] = field(default_factory=dict)
    modules: dict[Path, ProjectModule] = field(default_factory=dict)
    load_errors: dict[Path, str] = field(default_factory=dict)
    lowered: object | None = None  # a store of IRs by file content: get(source, package), put(...)
    # Resolution is asked hundreds of thousands of times on a large project: remember answers.
    _named: dict[tuple[str, Path], tuple] = field(default_factory=dict, repr=False)
    _resolved: dict[tuple[str, int], tuple] = field(default_factory=dict, repr=False)  # (Symbol | None, reads)
    _imported: dict[tuple[int, int], tuple] = field(default_factory=dict, repr=False)  # modules_imported
    # module id -> import walks recorded from a program's fresh start; callbacks -> their runs
    # (interpreter/recordings.py). A module added clears them: a recording in progress then
    # lands in a list no longer in the dict, and is never replayed.
    import_walks: dict = field(default_factory=dict, repr=False)
    callback_runs: dict = field(default_factory=dict, repr=False)
    # The language server: calls out of an entry module, and imports walked inside others, by
    # (entry path, ref, callee or module), this run's, and the previous run's, taken on first
    # use (interpreter/kept_calls.py)
    call_runs: dict = field(default_factory=dict, repr=False)
    call_runs_before: dict = field(default_factory=dict, repr=False)
    recordings_hold: object = field(default=None, repr=False)  # reads -> whether they hold (adopt_recordings)
    # kept_calls.py: the previous run's calls put on this run's modules (made on first use)
    moved: object | None = field(default=None, repr=False)
    # module id -> what importing it brings in when its top level is inert (interpreter/inert.py);
    # and the previous run's (module id -> (module, answer, reads)), taken where they still hold
    inert_imports: dict = field(default_factory=dict, repr=False)
    inert_before: dict = field(default_factory=dict, repr=False)
    _roots: dict = field(default_factory=dict, repr=False)
    _mentioning: dict[str, list] = field(default_factory=dict, repr=False)  # modules_mentioning
    _files_named: dict[tuple[str, str], tuple] = field(default_factory=dict, repr=False)  # files_named
    # Candidate files of an import found missing on disk (`torch/nn.py` under the project root),
    # shared by the indexes of a long-lived process (the language server builds one per edit and
    # re-probed about 11,000 candidates each time); its owner replaces it when files may have come.
    absent: set | None = field(default=None, repr=False)
    # Every import candidate found missing in this run: a replay of the run is valid only while
    # they are still missing (engine._outside_digests).
    missing_files: set = field(default_factory=set, repr=False)
    # The modules of a previous run (path -> module), taken again where their text, place and
    # IR are the same: the language server's runs then share module objects, and with them
    # what was computed on them (a program's facts point at modules).
    reusable: dict | None = field(default=None, repr=False)
    # Counts changes to `modules` (pipeline/read_values.py keys its view of them on it).
    generation: int = field(default=0, repr=False)
    # (import_walks, callback_runs) of a previous run whose modules are `reusable`: taken
    # again where they still hold (adopt_recordings); and this run's, once its programs ran
    # (a module loaded later, by a rule, clears the dicts).
    recorded_before: tuple | None = field(default=None, repr=False)
    recorded: tuple | None = field(default=None, repr=False)
    # The previous run's modules_mentioning answers (word -> modules), over `reusable`'s modules:
    # a word asked again is looked for only in the modules that are new objects (the edited one).
    mentioning_before: dict | None = field(default=None, repr=False)
    _reusable_ids: set | None = field(default=None, repr=False)
    # The previous run's modules_imported answers (imports_kept), over `reusable`'s modules:
    # an import statement of a module that is the same object is not resolved again.
    imports_before: tuple | None = field(default=None, repr=False)
    _imports_carried: dict | None = field(default=None, repr=False)  # its answers, once found valid
    _import_reads: dict = field(default_factory=dict, repr=False)  # key -> reads, for imports_kept
    _paths_resolved_in: frozenset | None = field(default=None, repr=False)  # the files at the first import

    def __post_init__(self) -> None:
        _forget_directories(self.absent)

    @property
    def lives_on(self) -> bool:
        """Whether the next run takes this run's modules again (the language server): what is
        built on them is worth keeping for its rules."""
        return self.reusable is not None

    def add(self, source: SourceFile, *, linted: bool = True) -> ProjectModule:
        """Index a file: its IR from `lowered` (a cache) when it has it, else by parsing.
        Raises source.ParseFailure if it does not parse."""
        path = source.resolved_path
        name, package, search_root = module_identity(path)
        # One object per root: resolution memos key on it millions of times, and equal paths
        # that are one object compare without pathlib's slow __eq__.
        search_root = self._roots.setdefault(search_root, search_root)
        found = self.lowered.get(source, package) if self.lowered is not None else None
        if found is not None:
            module = self._reused(path, name, source, found, linted)
            if module is None:
                module = ProjectModule(path, name, package, search_root, source, found, linted, self.helpers, store=self.lowered)
        else:
            module = self._same_code_as_before(path, name, package, search_root, source, linted)
        if module is None:
            index = ModuleIndex(source, package)
            lowering = Lowering(index, self.helpers, self._texts_before(path))
            lowering.reuse = self._function_reuse(path, index)
            module_ir = lowering.build()
            module = ProjectModule(
                path, name, package, search_root, source, module_ir, linted, self.helpers, index, lowering.nodes, self.lowered
            )
            module.expression_texts = lowering.texts
            if self.lives_on:
                module.layout = lowering.layout
            if self.lowered is not None:
                self.lowered.put(source, package, module_ir)
        self.modules[path] = module
        self._forget_resolution()  # a new module can answer a name that was missing before
        return module

    def _texts_before(self, path: Path) -> ExpressionTexts | None:
        if not self.lives_on:
            return None  # (a file is lowered once: nothing to take texts from)
        previous = self.reusable.get(path)
        texts = previous.expression_texts if previous is not None else None
        return texts if texts is not None else ExpressionTexts.start()

    def _function_reuse(self, path: Path, index: ModuleIndex) -> FunctionReuse | None:
        """The previous lowering of an edited buffer, for the functions whose IR it still gives."""
        previous = self.reusable.get(path) if self.reusable is not None else None
        if previous is None or previous._nodes is None or previous.layout is None:
            return None
        tree = previous.source.__dict__.get("module")  # (a tree dropped since: nothing to compare)
        return function_reuse(index, tree, previous._ir, previous._nodes, previous.layout, previous.source.text)

    def _same_code_as_before(self, path, name, package, search_root, source: SourceFile, linted: bool) -> ProjectModule | None:
        """The module, where its new text differs from a previous run's only in comments and
        blank lines between statements (the language server, as a comment is typed): the IR is
        the previous one, its nodes are their counterparts in the new tree (same_code.py)."""
        previous = self.reusable.get(path) if self.reusable is not None else None
        if previous is None or previous._nodes is None or previous.linted != linted or previous.name != name:
            return None
        old_tree = previous.source.__dict__.get("module")  # (a tree dropped since is not parsed again for this)
        if old_tree is None:
            return None
        old_lines, new_lines, (start, end, delta) = edit_span(previous.source.text, source.text)
        if code_lines_differ(old_lines[start:end], new_lines[start : end + delta]):
            return None
        tree = source.module
        if not any(a is b for a, b in zip(old_tree.body, tree.body)):
            return None  # (parsed whole: comparing every statement would cost about as much as lowering)
        pairs = node_pairs(old_tree, tree)
        if pairs is None:
            return None
        nodes = [pairs.get(id(node), node) for node in previous._nodes]
        index = ModuleIndex(source, package)  # (its rules will read it; and a module with a tree keeps it within budget)
        if index.walk is not None:
            index.walk.before = None  # (its lowering is the previous one: no edit to look at, no tree to keep)
        module = ProjectModule(path, name, package, search_root, source, previous._ir, linted, self.helpers, index, nodes, self.lowered)
        module.expression_texts = previous.expression_texts
        module.layout = previous.layout
        if self.lowered is not None:
            self.lowered.put(source, package, previous._ir, like=previous.source)
        return module

    def _reused(self, path: Path, name: str, source: SourceFile, module_ir, linted: bool) -> ProjectModule | None:
        previous = self.reusable.get(path) if self.reusable is not None else None
        if (
            previous is None
            or previous._ir is not module_ir  # (the cache gives the same object for the same text)
            or previous.linted != linted
            or previous.name != name
            # (the same SourceFile where the language server passes an unchanged file's again)
            or previous.source is not source
            and (previous.source.path != source.path or previous.source.text != source.text)  # findings carry the display path
        ):
            return None
        previous.store = self.lowered
        return previous

    def replace_modules(self, modules: dict) -> None:
        """Put `modules` in place of the project's (another order, or rebuilt in a worker)."""
        if modules is not self.modules:
            self.modules.clear()
            self.modules.update(modules)
        self._forget_resolution()

    def _forget_resolution(self) -> None:
        self.generation += 1
        self.import_walks.clear()
        self.callback_runs.clear()
        self.call_runs.clear()
        self.call_runs_before.clear()
        self._named.clear()
        self.inert_imports.clear()
        self.inert_before = {}
        self._resolved.clear()
        self._imported.clear()
        self._imports_carried = None
        self._mentioning.clear()
        self._files_named.clear()

    def adopt_recordings(self, still_hold) -> None:
        """Take the interpreter's recordings of a previous run (interpreter/recordings.py) whose
        reads `still_hold(reads)` and whose modules are this run's objects: the language server
        interprets an edited script again on every edit, and walking its imports again was half
        of that (timm's train.py: 52 of 110 ms). The previous run's kept calls are taken later,
        on first use, where `still_hold` says their reads hold (`recordings_hold`)."""
        if self.recorded_before is None:
            return
        walks, runs, self.call_runs_before, self.inert_before = self.recorded_before
        self.recordings_hold = still_hold
        self.recorded_before = None
        current = {id(module) for module in self.modules.values()}

        def adopted(recordings):
            return [r for r in recordings if r.looked_up | r.imported <= current and still_hold(r.reads)]

        for key, recordings in walks.items():
            if key in current and key not in self.import_walks:
                self.import_walks[key] = adopted(recordings)
        for key, recordings in runs.items():
            if key not in self.callback_runs and all(module_id in current for module_id, _ in key):
                self.callback_runs[key] = adopted(recordings)

    def modules_mentioning(self, word: str) -> list[ProjectModule]:
        """The modules whose text contains `word`: a cheap filter before reading their trees.
        Recorded as one read, so a cached result depends on which modules match, not on
        every module's text."""
        note_read("mentions", word)
        return self.mentioning(word)

    def mentioning(self, word: str) -> list[ProjectModule]:
        """modules_mentioning without recording the read (the cache's digests ask it too:
        every program's cached facts that read a word, about 500 scans of every text per run)."""
        found = self._mentioning.get(word)
        if found is None:
            found = self._mentioning[word] = self._look_for(word)
        return found

    def _look_for(self, word: str) -> list[ProjectModule]:
        before = self.mentioning_before.get(word) if self.mentioning_before and self.reusable else None
        if before is None:
            return [m for m in self.modules.values() if contains(m.source.text, word)]
        if self._reusable_ids is None:  # (the objects stay alive: `reusable` holds them)
            self._reusable_ids = {id(m) for m in self.reusable.values()}
        known, having = self._reusable_ids, {id(m) for m in before}
        # (about 0.3 ms a word for pytorch-image-models' 315 texts, asked 5 times an edit)
        return [m for m in self.modules.values() if (id(m) in having if id(m) in known else contains(m.source.text, word))]

    @property
    def linted_modules(self) -> list[ProjectModule]:
        return [m for m in self.modules.values() if m.linted]

    # -- resolution --------------------------------------------------------------------
    def search_roots(self, importer: ProjectModule) -> list[Path]:
        return self._search_roots(importer.search_root)

    def _search_roots(self, search_root: Path) -> tuple[Path, ...]:
        return _search_roots(search_root, self.root)

    def module_named(self, dotted_name: str, importer: ProjectModule) -> ProjectModule | None:
        if not dotted_name:
            return None
        key = (dotted_name, id(importer.search_root))  # one object per root (add): no Path hashing
        if key not in self._named:
            self._named[key] = self._find_module(dotted_name, importer)
        module, broken = self._named[key]
        for path in broken:  # a result built on this import changes when the file is fixed
            note_read("content", path)
        if module is None:  # ... or when a file by that name appears
            note_read("missing", (dotted_name, str(importer.search_root)))
        return module

    def files_named(self, dotted_name: str, search_root: str) -> tuple[str, ...]:
        """The candidate files for `dotted_name` that exist, as a module of the project or on disk:
        the value of a ("missing", (dotted_name, search_root)) read, which changes when one of
        them appears."""
        key = (dotted_name, search_root)
        found = self._files_named.get(key)
        if found is None:
            existing = []
            for root in self._search_roots(_path_of(search_root)):
                for candidate in _candidate_files(root, dotted_name):
                    if candidate in self.modules or candidate in self.load_errors or self._on_disk(candidate):
                        existing.append(str(candidate))
            found = self._files_named[key] = tuple(existing)
        return found

    def modules_imported(self, importer: ProjectModule, ref: int, names: tuple[str, ...]) -> tuple:
        """The project modules that the import statement `ref` of `importer` (naming `names`, in
        the order Python runs them) brings in: every program walks the same imports again."""
        key = (id(importer), ref)
        found = self._imported.get(key)
        if found is not None:
            for path in found[1]:  # as module_named does on each call
                note_read("content", path)
            return found[0]
        carried = self._carried_import(key, importer)
        if carried is not None:
            return carried
        with record() as reads:
            modules = [self.module_named(name, importer) for name in names]
        for kind, read in reads:
            note_read(kind, read)
        broken = tuple(sorted(path for kind, path in reads if kind == "content" and path in self.load_errors))
        found = self._imported[key] = (tuple(dict.fromkeys(m for m in modules if m is not None)), broken)
        if self.lives_on:
            self._import_reads[key] = (importer, tuple(reads))
        return found[0]

    def imports_kept(self) -> tuple | None:
        """This run's modules_imported answers, for the next run of a long-lived process
        (`imports_before`): valid there while no file may have come or gone (the same `absent`
        set), the project has the same files and the same ones fail to load."""
        if not self.lives_on or self.absent is None:
            return None
        answers = {
            key: (importer, tuple(m.path for m in self._imported[key][0]), self._imported[key][1], reads)
            for key, (importer, reads) in self._import_reads.items()
            if key in self._imported
        }
        paths = self._paths_resolved_in if self._paths_resolved_in is not None else frozenset(self.modules)
        return (self.absent, paths, frozenset(self.load_errors), answers)

    def _carried_import(self, key: tuple, importer: ProjectModule) -> tuple | None:
        """The previous run's answer for this import statement, on this run's modules, with the
        reads its resolution made; None where it has none that holds. (Resolution depends only
        on which files exist and which fail to load: an answer found in the run before holds
        while neither changed. About 300 import statements an edit of a timm model file.)"""
        carried = self._imports_carried
        if carried is None:
            carried = self._imports_carried = self._valid_imports_before()
        found = carried.get(key)
        if found is None or found[0] is not importer:
            return None
        _, paths, broken, reads = found
        modules = []
        for path in paths:
            module = self.modules.get(path)
            if module is None:
                return None  # (not loaded yet in this run: resolved the usual way)
            modules.append(module)
        for kind, read in reads:
            note_read(kind, read)
        self._imported[key] = (tuple(modules), broken)
        self._import_reads[key] = (importer, reads)
        return self._imported[key][0]

    def _valid_imports_before(self) -> dict:
        """The previous run's answers where the files are the same: asked at the first import a
        program walks (every linted file is indexed by then), and again after a module was
        loaded from disk (ProjectIndex._forget_resolution), which ends the carrying."""
        paths = frozenset(self.modules)
        if self._paths_resolved_in is None:
            self._paths_resolved_in = paths
        before = self.imports_before
        if before is None or self.absent is None or before[0] is not self.absent:
            return {}
        _, paths_then, load_errors, answers = before
        if paths_then != paths or load_errors != frozenset(self.load_errors):
            return {}
        return answers

    def _find_module(self, dotted_name: str, importer: ProjectModule) -> tuple[ProjectModule | None, tuple]:
        """(the module, the candidate files passed over because they do not load)."""
        broken = []
        for root in self.search_roots(importer):
            for candidate in _candidate_files(root, dotted_name):
                module = self.modules.get(candidate)
                if module is None and candidate not in self.load_errors:
                    module = self._load_from_disk(candidate)
                if module is not None:
                    return module, tuple(broken)
                if candidate in self.load_errors:
                    broken.append(candidate)
        return None, tuple(broken)

    def load_path(self, path: Path) -> ProjectModule | None:
        """The module at a resolved path, loaded from disk if need be."""
        found = self.modules.get(path)
        if found is None and path not in self.load_errors:
            found = self._load_from_disk(path)
        return found

    def _on_disk(self, candidate: Path) -> bool:
        """Whether an import candidate is a file of this project on disk."""
        absent = self.absent
        if absent is not None and candidate in absent:
            self.missing_files.add(candidate)
            return False
        if not candidate.is_file():
            self.missing_files.add(candidate)
            if absent is not None:
                absent.add(candidate)
            return False
        return candidate.is_relative_to(self.root)

    def _load_from_disk(self, candidate: Path) -> ProjectModule | None:
        try:
            if not self._on_disk(candidate):
                return None
            module = self.add(SourceFile(candidate, read_source(candidate)), linted=False)
        except (SourceError, ParseFailure) as exc:
            self.load_errors[candidate] = str(exc)
            return None
        # Only its IR is read from now on (no rule runs on a file not linted): keeping the tree
        # kept every module imported from outside the linted paths alive for the whole run,
        # outside any tree budget (1,174 trees when linting torch/_inductor alone).
        module.release_tree()
        return module

    def resolve(self, qualname: str, importer: ProjectModule, depth: int = 0) -> Symbol | None:
        """What a qualified name, as `importer` sees it, is in the project, if anything. The
        answer is kept for the run with what finding it read, read again by each asker (one
        program's cached facts must not miss a read made for another's)."""
        key = (qualname, id(importer))
        found = self._resolved.get(key)
        if found is None:
            with record() as reads:
                symbol = self._resolve(qualname, importer, depth)
            found = self._resolved[key] = (symbol, frozenset(reads))
        note_reads(found[1])
        return found[0]

    def _resolve(self, qualname: str, importer: ProjectModule, depth: int) -> Symbol | None:
        if depth > 8:
            return None
        if qualname.startswith(LOCAL):
            return self._member(importer, qualname[len(LOCAL) :], depth)
        parts = qualname.split(".")
        for cut in range(len(parts), 0, -1):
            module = self.module_named(".".join(parts[:cut]), importer)
            if module is not None:
                return self._member(module, ".".join(parts[cut:]), depth)
        return None

    def _member(self, module: ProjectModule, path: str, depth: int) -> Symbol | None:
        table = module.table
        if not path or path in table.functions or path in table.classes:
            return Symbol(module, path)
        head, _, rest = path.partition(".")
        if head in table.classes:
            return Symbol(module, path) if rest else None
        alias = table.aliases.get(head)
        if alias is not None:
            return self.resolve(f"{alias}.{rest}" if rest else alias, module, depth + 1)
        if module.path.name == "__init__.py":  # pkg.sub where sub was not imported in __init__
            return self.resolve(f"{module.name}.{path}", module, depth + 1) if module.name else None
        return None

    def external_name(self, qualname: str, importer: ProjectModule, depth: int = 0) -> str | None:
        """The name outside the project that `qualname` stands for, following the project's
        re-exports (`from transformers import Trainer` in a module the importer takes it from);
        None where it names project code or a project name that binds nothing we can follow."""
        if depth > 8:
            return None
        if qualname.startswith(LOCAL):
            module, path = importer, qualname[len(LOCAL) :]
        else:
            parts = qualname.split(".")
            for cut in range(len(parts), 0, -1):
                module = self.module_named(".".join(parts[:cut]), importer)
                if module is not None:
                    path = ".".join(parts[cut:])
                    break
            else:
                return qualname
        head, _, rest = path.partition(".")
        table = module.table
        if not head or head in table.functions or head in table.classes:
            return None
        alias = table.aliases.get(head)
        if alias is None:
            return None
        return self.external_name(f"{alias}.{rest}" if rest else alias, module, depth + 1)

    def lineage(self, klass: Symbol):
        """The project classes along `klass`'s method resolution order, breadth first, `klass`
        first. Lazy: a class's bases are resolved only once the caller asks for the next class
        (resolution records reads and may load modules, so a lookup that stops early must not)."""
        seen: set[tuple[int, str]] = set()
        queue = [klass]
        while queue:
            current = queue.pop(0)
            key = (id(current.module), current.path)
            if key in seen or current.klass is None:
                continue
            seen.add(key)
            yield current
            for base in current.klass.bases:
                resolved = self.resolve(base, current.module)
                if resolved is not None and resolved.klass is not None:
                    queue.append(resolved)

    def external_bases(self, klass: Symbol):
        """The bases outside the project along the class's method resolution order, by the
        names external_name gives them (a project class's own bases first)."""
        for current in self.lineage(klass):
            for base in current.klass.bases:
                if self.resolve(base, current.module) is None:
                    name = self.external_name(base, current.module)
                    if name is not None:
                        yield name

    def method(self, klass: Symbol, name: str, skip_self: bool = False) -> Symbol | None:
        """Find `name` along the project part of the class's method resolution order."""
        for current in self.lineage(klass):
            if not (skip_self and current is klass) and name in current.klass.methods:
                return Symbol(current.module, f"{current.path}.{name}")
        return None

    # -- the import graph --------------------------------------------------------------
    def imported_by_project(self) -> set[Path]:
        """Paths of modules some linted module imports (they are libraries, not scripts)."""
        # The language server's runs take the last run's answer while no import changed
        # (pipeline/read_values.py), and load again what finding it loaded from disk.
        reads = getattr(self.lowered, "reads", None)
        if reads is None:
            return self._imported_by_project()
        basis = reads.basis(self)
        found = reads.fact("imported by project", basis, _same_imports)
        if found is not None:
            imported, loaded = found
            for path in loaded:
                self.load_path(path)
            return imported
        before = len(self.modules), len(self.load_errors)
        imported = self._imported_by_project()
        loaded = [*list(self.modules)[before[0]:], *list(self.load_errors)[before[1]:]]
        reads.keep("imported by project", basis, (imported, loaded))
        return imported

    def _imported_by_project(self) -> set[Path]:
        imported: set[Path] = set()
        for module in list(self.linted_modules):
            for name, names in module.ir.imported_modules:
                target = self.module_named(name, module)
                if target is not None:
                    imported.add(target.path)
                for member in names:
                    sub = self.module_named(f"{name}.{member}", module)
                    if sub is not None:
                        imported.add(sub.path)
        return imported
