"""The project index: every module of the project, named and lowered, and name resolution.

`ProjectIndex.add` indexes a file (its IR from the cache where it has it, else lowered now;
in the language server, a module of the previous run is taken again where its text allows).
Names resolve through the project's imports and aliases to the module and definition they
name (`resolve`, `external_name`, `lineage`); finding the module an import names is
module_finder.py's part of the class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import LOCAL
from torchrepro_lint.analysis.same_code import code_lines_differ, node_pairs
from torchrepro_lint.analysis.text_memo import contains
from torchrepro_lint.parsing.reparse import edit_span
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project.extract.function_reuse import FunctionReuse, function_reuse
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.project.known_apis import Helper
from torchrepro_lint.project.module_finder import ModuleFinder, forget_directories, module_identity
from torchrepro_lint.project.modules import ProjectModule, Symbol
from torchrepro_lint.project.reads import note_read, note_reads, record


@dataclass
class ProjectIndex(ModuleFinder):
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
        forget_directories(self.absent)

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
